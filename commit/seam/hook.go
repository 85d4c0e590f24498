package seam

import (
	"context"
	"io/fs"
	"time"
)

// Op names one kind of call through the seam, for hooks.
type Op string

// The calls a Hook sees (and the recording FS of internal/safety logs).
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

// Calls of the capabilities that a Hook does not see (As finds them past
// the hook) but that the recording FS of internal/safety logs, as they
// change what a crash can leave.
const (
	OpPrepareLock Op = "prepare-lock"
	OpSyncfs      Op = "syncfs"
	// OpExchange and OpOverwrite are the calls of the reserve (Overwriter).
	OpExchange  Op = "exchange"
	OpOverwrite Op = "overwrite"
	// OpLink is a status marker's link (Linker), logged by the crash
	// filesystems; the hook wrapper does not see it.
	OpLink Op = "link"
)

// Hook is called before every call through a hooked FS with the call's
// kind and name; a non-nil error is returned instead of making the call.
type Hook func(op Op, name string) error

// WithHook wraps f so that h sees, and may fail, every call of FS and the
// open of a bounded directory read (as OpReadDir). The other capabilities
// of f are not calls a hook sees: As finds them through Unwrap, so a hooked
// store commits as the unwrapped one does.
func WithHook(f FS, h Hook) FS { return &hooked{f, h} }

type hooked struct {
	fs   FS
	hook Hook
}

// Unwrap implements Unwrapper.
func (h *hooked) Unwrap() FS { return h.fs }

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

// OpenDir implements DirOpener, the hook seeing the open as a readdir; the
// reads themselves go to the wrapped FS's reader (or to one ReadDir).
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

func (h *hooked) Lock(ctx context.Context, name string, off int64, timeout time.Duration) (func(), error) {
	if err := h.hook(OpLock, name); err != nil {
		return nil, err
	}
	return h.fs.Lock(ctx, name, off, timeout)
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
