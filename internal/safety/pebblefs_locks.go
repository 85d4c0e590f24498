package safety

// Mem's byte locks: Lock, and the table of held (file, byte) locks behind
// it.

import (
	"io/fs"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/leasetool/lease/commit"
)

// Lock implements FS: the lock file is created when missing (never
// truncated) and byte off is taken in this Mem's lock table.
func (m *Mem) Lock(name string, off int64, timeout time.Duration) (func(), error) {
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
		return nil, &fs.PathError{Op: "open", Path: name, Err: commit.ErrNotRegular}
	case !ok:
		f, err := m.fs.OpenReadWrite(p, vfs.WriteCategoryUnspecified)
		if err != nil {
			m.mu.Unlock()
			return nil, memErr("open", name, err)
		}
		f.Close()
	}
	m.mu.Unlock()
	return m.locks.lock(memLockKey{p, off}, name, timeout)
}

// memLocks is a table of held (file, byte) locks with bounded waits.
type memLocks struct {
	mu   sync.Mutex
	held map[memLockKey]bool
}

type memLockKey struct {
	name string
	off  int64
}

func (l *memLocks) lock(k memLockKey, name string, timeout time.Duration) (func(), error) {
	deadline := time.Now().Add(timeout)
	backoff := 100 * time.Microsecond
	for {
		l.mu.Lock()
		if !l.held[k] {
			l.held[k] = true
			l.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					l.mu.Lock()
					delete(l.held, k)
					l.mu.Unlock()
				})
			}, nil
		}
		l.mu.Unlock()
		if !time.Now().Before(deadline) {
			return nil, &fs.PathError{Op: "Lock", Path: name, Err: commit.ErrLockTimeout}
		}
		time.Sleep(backoff)
		if backoff < 5*time.Millisecond {
			backoff *= 2
		}
	}
}
