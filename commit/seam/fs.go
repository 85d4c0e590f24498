// Package seam is the filesystem seam of the storage engine: the FS
// interface every durable operation of a lease table goes through, the
// optional capabilities an FS may have (each a named interface, found
// through [As], which follows Unwrap on wrappers as Pebble's vfs does), the
// kernel implementation ([OS]) and the hook wrapper tests fail calls with
// ([WithHook]).
//
// It is the tool's own machinery, exported for the lease command, lease
// fsck and the crash-testing filesystems of internal/safety; Go programs use
// package leases. The layers above it are package durable (temp file,
// fsync, rename, directory fsync, the group commit, the record locks) and
// package commit (the lease operations).
//
// The kernel implementation needs Linux (open file description locks,
// renameat2, statx, syncfs): elsewhere [OS] returns an error wrapping
// [ErrUnsupported], so that programs embedding package leases still
// compile there.
package seam

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"
)

// FS is the narrow filesystem seam every durable operation goes through.
// Names are slash-separated paths relative to the table root; an
// implementation must never follow a symbolic link at or below the root,
// so a link planted as a record, a shard directory or a lock file cannot
// redirect a write.
//
// OS returns the real implementation; WithHook wraps any FS so that tests
// can count and fail every call; the crash-testing filesystems of
// internal/safety implement it in memory. What an FS can do beyond these
// calls is said by the capability interfaces of caps.go.
type FS interface {
	// ReadFile reads the regular file name, at most max bytes plus one so a
	// caller can tell an oversize file. A missing file is fs.ErrNotExist; a
	// symbolic link or any non-regular file is ErrNotRegular. A file that
	// was opened but could not be read because it was gone by then (read(2)
	// failing with ENOENT or ESTALE after a successful open, as a network
	// filesystem's client does when another client replaced the file) is
	// ErrVanished, never fs.ErrNotExist: the name may well exist.
	ReadFile(name string, max int) ([]byte, error)
	// CreateExcl creates name, which must not exist, for writing.
	CreateExcl(name string) (File, error)
	// Rename atomically replaces newname by oldname.
	Rename(oldname, newname string) error
	// RenameNoReplace moves oldname to newname and fails with fs.ErrExist
	// when newname exists; it never replaces a file. It is not optional:
	// a record read as missing gets its first version this way, and a
	// move that could replace would destroy a record another client made
	// meanwhile (an FS without renameat2 links, then unlinks).
	RenameNoReplace(oldname, newname string) error
	// Remove removes the file or empty directory name.
	Remove(name string) error
	// Mkdir creates the directory name; fs.ErrExist when it exists.
	Mkdir(name string) error
	// SyncDir makes the entries of directory name durable (fsync(2) on it).
	SyncDir(name string) error
	// SyncFile makes the data of the existing regular file name durable
	// (a result staged by another program, before it is published).
	SyncFile(name string) error
	// ReadDir lists directory name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Lstat describes name without following a final symbolic link.
	Lstat(name string) (fs.FileInfo, error)
	// Lock takes the exclusive lock on byte off of the lock file name,
	// creating the file if needed, waiting at most timeout and no longer
	// than ctx lasts. It returns the function that releases it; an error
	// wrapping ErrLockTimeout when the wait ran out, also when ctx ended
	// it (the error then wraps ctx.Err() too: see WaitEnded).
	Lock(ctx context.Context, name string, off int64, timeout time.Duration) (unlock func(), err error)
}

// File is a file being written by CreateExcl.
type File interface {
	Write(p []byte) (int, error)
	// Sync makes the file's data durable (fdatasync(2) where it suffices).
	Sync() error
	Close() error
}

// DirReader reads the names of an open directory.
type DirReader interface {
	// ReadNames returns at most n more names, without "." and "..";
	// io.EOF once there are no more.
	ReadNames(n int) ([]string, error)
	Close() error
}

// OpenDir opens directory name of f for reading in bounded parts: through
// f's DirOpener when it has one (see As), else over one ReadDir of the
// whole directory.
func OpenDir(f FS, name string) (DirReader, error) {
	if o, ok := As[DirOpener](f); ok {
		return o.OpenDir(name)
	}
	return listDir(f, name)
}

// listDir is a DirReader over one ReadDir of directory name.
func listDir(f FS, name string) (DirReader, error) {
	ents, err := f.ReadDir(name)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return &ListedDir{Names: names}, nil
}

// ListedDir is a DirReader over names read at once: what an FS that lists
// a directory whole hands out in bounded parts.
type ListedDir struct{ Names []string }

// ReadNames implements DirReader.
func (d *ListedDir) ReadNames(n int) ([]string, error) {
	if len(d.Names) == 0 {
		return nil, io.EOF
	}
	n = min(max(n, 1), len(d.Names))
	out := d.Names[:n:n]
	d.Names = d.Names[n:]
	return out, nil
}

// Close implements DirReader.
func (d *ListedDir) Close() error { return nil }

// Errors of the seam.
var (
	// ErrNotRegular is returned when a name that must be a regular file is a
	// symbolic link, a directory, a FIFO or anything else.
	ErrNotRegular = errors.New("not a regular file")
	// ErrNotInPlace is returned when an entry found in the table is not
	// one whose mode lease may change where it is: a symbolic link or
	// anything but a regular file or a directory, a file with more than
	// one link (another name, perhaps outside the table, reaches the same
	// inode), or one not owned by the account that must own it. Such an
	// entry is reported (and moved to lost+found/ by a repair), never
	// changed in place.
	ErrNotInPlace = errors.New("not changed in place")
	// ErrLockTimeout is returned when a lock wait ran out.
	ErrLockTimeout = errors.New("lock wait timed out")
	// ErrReadLocked is wrapped by the error of a lock that a read lock
	// stands in the way of (see ReadLockFinder). The lock is not waited
	// for: no lease writer holds it, so no renewal or release will free it.
	ErrReadLocked = errors.New("held by a read lock, which no lease writer takes: a process that can only read the lock file holds it (lease fsck --repair takes that access away)")
	// ErrVanished is returned by FS.ReadFile for a file that was opened
	// but was gone when it was read (see FS.ReadFile). It does not match
	// fs.ErrNotExist: the record is not missing, it is being replaced.
	ErrVanished = errors.New("file vanished between open and read (replaced through another client?)")
	// ErrUnsupported is wrapped by the error of OS on a system whose
	// kernel lacks what a table needs (open file description locks,
	// renameat2): lease tables need Linux.
	ErrUnsupported = fmt.Errorf("lease tables need Linux (open file description locks, renameat2): %w", errors.ErrUnsupported)
)

// ReadLockError is the error of a lock that a read lock stands in the way
// of: it wraps ErrReadLocked and ErrLockTimeout (the lock was not granted).
type ReadLockError struct {
	Pid int // a process holding the read lock, 0 when the kernel does not tell (an OFD lock)
}

func (e *ReadLockError) Error() string {
	if e.Pid > 0 {
		return fmt.Sprintf("%v (pid %d)", ErrReadLocked, e.Pid)
	}
	return ErrReadLocked.Error()
}

// Unwrap returns ErrReadLocked and ErrLockTimeout.
func (e *ReadLockError) Unwrap() []error { return []error{ErrReadLocked, ErrLockTimeout} }

// WaitEnded is the error of a lock wait that ctx ended before the lock was
// granted: it wraps ErrLockTimeout, so that the record is reported as a
// lock timeout, and ctx.Err(), so that a caller can tell its own
// cancellation.
func WaitEnded(ctx context.Context) error { return waitEnded{ctx.Err()} }

type waitEnded struct{ cause error }

func (w waitEnded) Error() string   { return ErrLockTimeout.Error() + ": " + w.cause.Error() }
func (w waitEnded) Unwrap() []error { return []error{ErrLockTimeout, w.cause} }
