package safety

// Mem's byte locks: Lock, and the table of held (file, byte) locks behind
// it.

import (
	"context"
	"io/fs"
	"time"
)

// Lock implements FS: the lock file is created when missing (never
// truncated) and byte off is taken in this Mem's lock table.
func (m *Mem) Lock(ctx context.Context, name string, off int64, timeout time.Duration) (func(), error) {
	p, err := memPath("open", name)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	err = m.lockFile(name, p)
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
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
