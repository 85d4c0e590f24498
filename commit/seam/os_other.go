//go:build !linux

package seam

import (
	"context"
	"io"
	"io/fs"
	"time"
)

// OS would return the FS of the directory root on the local kernel; on
// this system it returns an error wrapping ErrUnsupported, as the kernel
// lacks the open file description locks and renameat2 a table relies on
// (Go's cmd/go/internal/lockedfile keeps its system calls apart the same
// way). Code that embeds package leases compiles here; opening a table
// fails with that error.
func OS(root string) (*OSFS, error) {
	return nil, &fs.PathError{Op: "open", Path: root, Err: ErrUnsupported}
}

// OSFS is the kernel implementation of FS, which this system cannot
// provide: OS never returns one, and every method fails with
// ErrUnsupported.
type OSFS struct{}

func unsupported(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: ErrUnsupported}
}

// ReadFile implements FS.
func (*OSFS) ReadFile(name string, max int) ([]byte, error) { return nil, unsupported("open", name) }

// CreateExcl implements FS.
func (*OSFS) CreateExcl(name string) (File, error) { return nil, unsupported("create", name) }

// OpenRead implements FileOpener.
func (*OSFS) OpenRead(name string) (io.ReadCloser, error) { return nil, unsupported("open", name) }

// Rename implements FS.
func (*OSFS) Rename(oldname, newname string) error { return unsupported("rename", newname) }

// RenameNoReplace implements FS.
func (*OSFS) RenameNoReplace(oldname, newname string) error { return unsupported("rename", newname) }

// Remove implements FS.
func (*OSFS) Remove(name string) error { return unsupported("remove", name) }

// Mkdir implements FS.
func (*OSFS) Mkdir(name string) error { return unsupported("mkdir", name) }

// SyncDir implements FS.
func (*OSFS) SyncDir(name string) error { return unsupported("fsync", name) }

// SyncFile implements FS.
func (*OSFS) SyncFile(name string) error { return unsupported("fsync", name) }

// ReadDir implements FS.
func (*OSFS) ReadDir(name string) ([]fs.DirEntry, error) { return nil, unsupported("open", name) }

// Lstat implements FS.
func (*OSFS) Lstat(name string) (fs.FileInfo, error) { return nil, unsupported("lstat", name) }

// Lock implements FS.
func (*OSFS) Lock(ctx context.Context, name string, off int64, timeout time.Duration) (func(), error) {
	return nil, unsupported("Lock", name)
}

// Close implements io.Closer.
func (*OSFS) Close() error { return nil }

// Exchange implements Overwriter; unsupported here.
func (o *OSFS) Exchange(a, b string) error { return unsupported("exchange", b) }

// Overwrite implements Overwriter; unsupported here.
func (o *OSFS) Overwrite(name string, data []byte) error { return unsupported("overwrite", name) }
