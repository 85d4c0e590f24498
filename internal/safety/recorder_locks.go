package safety

// Recorder's byte locks: Lock, and the table of held (file, byte) locks
// with bounded waits behind it.

import (
	"context"
	"sync"
	"time"

	"github.com/leasetool/lease/commit/seam"
)

// Lock implements seam.FS: the lock file is created when missing.
func (r *Recorder) Lock(ctx context.Context, name string, off int64, timeout time.Duration) (func(), error) {
	r.yield()
	r.mu.Lock()
	i := r.call(seam.OpLock, name)
	n, err := r.lockFile(i, name)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	unlock, err := r.locks.lock(ctx, lockKey{n, off}, timeout, 50*time.Microsecond)
	if err != nil {
		r.mu.Lock()
		r.fail(i, err)
		r.mu.Unlock()
		return nil, perr("Lock", name, err)
	}
	return unlock, nil
}

// lockFile returns the lock file name for call i, creating it when
// missing, as the kernel FS's open with O_CREAT does. The caller holds
// r.mu.
func (r *Recorder) lockFile(i int, name string) (*inode, error) {
	d, base, err := r.parent(name)
	if err != nil {
		return nil, r.fail(i, perr("open", name, err))
	}
	n, ok := d.kids[base]
	switch {
	case ok && n.dir:
		return nil, r.fail(i, perr("open", name, seam.ErrNotRegular))
	case !ok:
		n = r.newInodeMode(false, true)
		d.kids[base] = n
		r.emit(event{kind: evEntry, call: i, key: entKey{d, base}, val: n})
	}
	return n, nil
}

// keyLocks is a table of held locks, one per key, with bounded waits:
// the byte locks of Recorder (by inode) and of Mem (by name).
type keyLocks[K comparable] struct {
	mu   sync.Mutex
	held map[K]bool
}

func newKeyLocks[K comparable]() *keyLocks[K] { return &keyLocks[K]{held: map[K]bool{}} }

// lock takes k, polling with backoff from first up to 5 ms, and returns
// its unlock (safe to call twice), or seam.ErrLockTimeout once timeout
// has passed (seam.WaitEnded once ctx is done).
func (l *keyLocks[K]) lock(ctx context.Context, k K, timeout, first time.Duration) (func(), error) {
	deadline := time.Now().Add(timeout)
	backoff := first
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
			return nil, seam.ErrLockTimeout
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, seam.WaitEnded(ctx)
		}
		if backoff < 5*time.Millisecond {
			backoff *= 2
		}
	}
}

// byteLocks are Recorder's (file, byte) locks.
type byteLocks = keyLocks[lockKey]

type lockKey struct {
	n   *inode
	off int64
}

func newByteLocks() *byteLocks { return newKeyLocks[lockKey]() }
