package safety

// Mem's byte locks: Lock, and the table of held (file, byte) locks behind
// it.

import (
	"context"
	"io/fs"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/leasetool/lease/commit/seam"
)

// Lock implements FS: the lock file is created when missing (never
// truncated) and byte off is taken in this Mem's lock table.
func (m *Mem) Lock(ctx context.Context, name string, off int64, timeout time.Duration) (func(), error) {
	p, err := memPath("open", name)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if err := m.parentDir("open", name, p); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	fi, ok, err := m.stat(p)
	switch {
	case err != nil:
		m.mu.Unlock()
		return nil, memErr("open", name, err)
	case ok && fi.IsDir():
		m.mu.Unlock()
		return nil, &fs.PathError{Op: "open", Path: name, Err: seam.ErrNotRegular}
	case !ok:
		f, err := m.fs.OpenReadWrite(p, vfs.WriteCategoryUnspecified)
		if err != nil {
			m.mu.Unlock()
			return nil, memErr("open", name, err)
		}
		f.Close()
	}
	m.mu.Unlock()
	unlock, err := m.locks.lock(ctx, memLockKey{p, off}, timeout, 100*time.Microsecond)
	if err != nil {
		return nil, &fs.PathError{Op: "Lock", Path: name, Err: err}
	}
	return unlock, nil
}

type memLockKey struct {
	name string
	off  int64
}
