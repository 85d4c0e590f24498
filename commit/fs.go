package commit

import (
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
// OS returns the real implementation; WithHook wraps any FS so that tests can
// count and fail every call; the memory FS used by crash tests implements it
// over Pebble's crash-simulating vfs.
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
	// when newname exists; it never replaces a file.
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
	// creating the file if needed, waiting at most timeout. It returns the
	// function that releases it; ErrLockTimeout when the wait ran out.
	Lock(name string, off int64, timeout time.Duration) (unlock func(), err error)
}

// DirOpener is the optional FS extension that reads a directory a bounded
// number of names at a time, so that a claim of the queue's next item
// reads a few directory blocks of a shard of a million entries, not all of
// it (SPEC §7, claim --next). An FS without it is read whole by ReadDir.
type DirOpener interface {
	OpenDir(name string) (DirReader, error)
}

// DirReader reads the names of an open directory.
type DirReader interface {
	// ReadNames returns at most n more names, without "." and "..";
	// io.EOF once there are no more.
	ReadNames(n int) ([]string, error)
	Close() error
}

// OpenDir opens directory name of f for reading in bounded parts: through
// f's DirOpener when it has one, else over one ReadDir of the whole
// directory.
func OpenDir(f FS, name string) (DirReader, error) {
	if o, ok := f.(DirOpener); ok {
		return o.OpenDir(name)
	}
	ents, err := f.ReadDir(name)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return &listedDir{names: names}, nil
}

// listedDir is a DirReader over names read at once.
type listedDir struct{ names []string }

func (d *listedDir) ReadNames(n int) ([]string, error) {
	if len(d.names) == 0 {
		return nil, io.EOF
	}
	n = min(max(n, 1), len(d.names))
	out := d.names[:n:n]
	d.names = d.names[n:]
	return out, nil
}

func (d *listedDir) Close() error { return nil }

// File is a file being written by CreateExcl.
type File interface {
	Write(p []byte) (int, error)
	// Sync makes the file's data durable (fdatasync(2) where it suffices).
	Sync() error
	Close() error
}

// Errors of the seam.
var (
	// ErrNotRegular is returned when a name that must be a regular file is a
	// symbolic link, a directory, a FIFO or anything else.
	ErrNotRegular = errors.New("not a regular file")
	// ErrLockTimeout is returned when a lock wait ran out.
	ErrLockTimeout = errors.New("lock wait timed out")
	// ErrVanished is returned by FS.ReadFile for a file that was opened
	// but was gone when it was read (see FS.ReadFile). It does not match
	// fs.ErrNotExist: the record is not missing, it is being replaced.
	ErrVanished = errors.New("file vanished between open and read (replaced through another client?)")
	// ErrCrossDirectory is returned by SyncBatch.Replace for a rename whose
	// source and destination directories differ (G8).
	ErrCrossDirectory = errors.New("rename across directories in a same-directory batch")
)

// Op names one kind of call through the seam, for hooks.
type Op string

// The calls a Hook sees.
const (
	OpRead            Op = "read"
	OpCreate          Op = "create"
	OpWrite           Op = "write"
	OpFsync           Op = "fsync"
	OpClose           Op = "close"
	OpRename          Op = "rename"
	OpRenameNoReplace Op = "rename-noreplace"
	OpRemove          Op = "remove"
	OpMkdir           Op = "mkdir"
	OpSyncDir         Op = "fsyncdir"
	OpReadDir         Op = "readdir"
	OpLstat           Op = "lstat"
	OpLock            Op = "lock"
)

// Hook is called before every call through a hooked FS with the call's
// kind and name; a non-nil error is returned instead of making the call.
type Hook func(op Op, name string) error

// WithHook wraps f so that h sees, and may fail, every call.
func WithHook(f FS, h Hook) FS { return &hooked{f, h} }

type hooked struct {
	fs   FS
	hook Hook
}

// DropIdleLocks, Syncfs and Refresh pass the optional FS extensions (see
// Store.Apply and Retry) through to the wrapped FS, so that a hooked store
// commits as the unwrapped one does.
func (h *hooked) DropIdleLocks() {
	if f, ok := h.fs.(interface{ DropIdleLocks() }); ok {
		f.DropIdleLocks()
	}
}

func (h *hooked) Refresh(dir string) {
	if f, ok := h.fs.(interface{ Refresh(dir string) }); ok {
		f.Refresh(dir)
	}
}

// SetSharing and PrepareLock pass the table's sharing and the batch's
// lock preparation through to the wrapped FS; they are not calls a hook
// sees (the hook sees the Lock that follows).
func (h *hooked) SetSharing(s Sharing) { applySharing(h.fs, s) }

func (h *hooked) PrepareLock(name string) error {
	if p, ok := h.fs.(lockPreparer); ok {
		return p.PrepareLock(name)
	}
	return nil
}

func (h *hooked) FixPerm(name string, mode uint32, gid int) error {
	if p, ok := h.fs.(PermFixer); ok {
		return p.FixPerm(name, mode, gid)
	}
	return fmt.Errorf("fix the mode of %s: %w", name, errors.ErrUnsupported)
}

func (h *hooked) Syncfs() error {
	if f, ok := h.fs.(interface{ Syncfs() error }); ok {
		return f.Syncfs()
	}
	return nil
}

func (h *hooked) ReadFile(name string, max int) ([]byte, error) {
	if err := h.hook(OpRead, name); err != nil {
		return nil, err
	}
	return h.fs.ReadFile(name, max)
}

func (h *hooked) CreateExcl(name string) (File, error) {
	if err := h.hook(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := h.fs.CreateExcl(name)
	if err != nil {
		return nil, err
	}
	return &hookedFile{f, name, h.hook}, nil
}

func (h *hooked) Rename(o, n string) error {
	if err := h.hook(OpRename, n); err != nil {
		return err
	}
	return h.fs.Rename(o, n)
}

func (h *hooked) RenameNoReplace(o, n string) error {
	if err := h.hook(OpRenameNoReplace, n); err != nil {
		return err
	}
	return h.fs.RenameNoReplace(o, n)
}

func (h *hooked) Remove(name string) error {
	if err := h.hook(OpRemove, name); err != nil {
		return err
	}
	return h.fs.Remove(name)
}

func (h *hooked) Mkdir(name string) error {
	if err := h.hook(OpMkdir, name); err != nil {
		return err
	}
	return h.fs.Mkdir(name)
}

func (h *hooked) SyncDir(name string) error {
	if err := h.hook(OpSyncDir, name); err != nil {
		return err
	}
	return h.fs.SyncDir(name)
}

func (h *hooked) SyncFile(name string) error {
	if err := h.hook(OpFsync, name); err != nil {
		return err
	}
	return h.fs.SyncFile(name)
}

// OpenDir passes the bounded directory reader through, the hook seeing
// the open as a readdir.
func (h *hooked) OpenDir(name string) (DirReader, error) {
	if err := h.hook(OpReadDir, name); err != nil {
		return nil, err
	}
	return OpenDir(h.fs, name)
}

func (h *hooked) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := h.hook(OpReadDir, name); err != nil {
		return nil, err
	}
	return h.fs.ReadDir(name)
}

func (h *hooked) Lstat(name string) (fs.FileInfo, error) {
	if err := h.hook(OpLstat, name); err != nil {
		return nil, err
	}
	return h.fs.Lstat(name)
}

func (h *hooked) Lock(name string, off int64, timeout time.Duration) (func(), error) {
	if err := h.hook(OpLock, name); err != nil {
		return nil, err
	}
	return h.fs.Lock(name, off, timeout)
}

type hookedFile struct {
	f    File
	name string
	hook Hook
}

func (h *hookedFile) Write(p []byte) (int, error) {
	if err := h.hook(OpWrite, h.name); err != nil {
		return 0, err
	}
	return h.f.Write(p)
}

func (h *hookedFile) Sync() error {
	if err := h.hook(OpFsync, h.name); err != nil {
		return err
	}
	return h.f.Sync()
}

func (h *hookedFile) Close() error {
	if err := h.hook(OpClose, h.name); err != nil {
		h.f.Close()
		return err
	}
	return h.f.Close()
}
