//go:build linux

package faultfs

import (
	"context"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Lock emulation for LocksForward.
//
// go-fuse's LoopbackFile applies every forwarded lock as an OFD lock on the
// backing descriptor of the FUSE file handle, ignoring the lock owner the
// kernel passes. That excludes between processes, but it is not POSIX: one
// process locking the same byte through two descriptors conflicts with
// itself, and closing one descriptor does not drop the locks taken through
// another. faultfs instead keeps one backing descriptor per (file, lock
// owner) and takes the owner's locks as OFD locks on it. The kernel's owner
// is the process's file table for POSIX locks and the open file description
// for OFD locks, so:
//   - locks of one owner merge and never conflict with each other;
//   - locks of different owners conflict, POSIX against OFD included;
//   - they also conflict with locks taken directly on the backing file and
//     through other mounts of it;
//   - a POSIX owner's locks on a file are dropped when it closes any
//     descriptor of that file (FLUSH carries the owner), OFD locks when the
//     open file description goes away (RELEASE).

type lockKey struct {
	dev, ino uint64 // backing file
	owner    uint64 // kernel lock owner id
}

type ownerLock struct {
	fd      int // backing file opened for this owner; holds its OFD locks
	handles map[*fileHandle]struct{}
}

type lockTable struct {
	mu sync.Mutex
	m  map[lockKey]*ownerLock
}

func (t *lockTable) init() { t.m = make(map[lockKey]*ownerLock) }

// setlk applies one non-blocking lock request of owner.
func (t *lockTable) setlk(h *fileHandle, owner uint64, lk *fuse.FileLock) syscall.Errno {
	if h.dev == 0 && h.ino == 0 {
		return syscall.ENOLCK
	}
	var flk syscall.Flock_t
	lk.ToFlockT(&flk)
	k := lockKey{h.dev, h.ino, owner}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.m[k]
	if e == nil {
		if flk.Type == syscall.F_UNLCK {
			return 0
		}
		fd, errno := h.reopen()
		if errno != 0 {
			return errno
		}
		e = &ownerLock{fd: fd, handles: make(map[*fileHandle]struct{})}
		t.m[k] = e
	}
	e.handles[h] = struct{}{}
	return fs.ToErrno(syscall.FcntlFlock(uintptr(e.fd), unix.F_OFD_SETLK, &flk))
}

// getlk answers F_GETLK for owner: the first lock of another owner that
// conflicts with lk, or F_UNLCK.
func (t *lockTable) getlk(h *fileHandle, owner uint64, lk *fuse.FileLock, out *fuse.FileLock) syscall.Errno {
	var flk syscall.Flock_t
	lk.ToFlockT(&flk)
	t.mu.Lock()
	defer t.mu.Unlock()
	var fd int
	if e := t.m[lockKey{h.dev, h.ino, owner}]; e != nil {
		fd = e.fd
	} else {
		// The owner holds nothing here, so every lock conflicts;
		// the handle's own descriptor never holds byte-range locks.
		var ok bool
		if fd, ok = h.LoopbackFile.PassthroughFd(); !ok {
			return syscall.EBADF
		}
	}
	if err := syscall.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &flk); err != nil {
		return fs.ToErrno(err)
	}
	out.FromFlockT(&flk)
	// OFD locks report pid -1, which the kernel cannot map; the holder is
	// not known to us anyway.
	out.Pid = 0
	return 0
}

// dropOwner releases every lock owner holds on h's file: a POSIX owner
// closed a descriptor of it.
func (t *lockTable) dropOwner(h *fileHandle, owner uint64) {
	k := lockKey{h.dev, h.ino, owner}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.m[k]; e != nil {
		syscall.Close(e.fd)
		delete(t.m, k)
	}
}

// release forgets h; owners that locked only through h lose their locks
// (for an OFD owner, h is its open file description).
func (t *lockTable) release(h *fileHandle) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.m {
		if _, ok := e.handles[h]; !ok {
			continue
		}
		delete(e.handles, h)
		if len(e.handles) == 0 {
			syscall.Close(e.fd)
			delete(t.m, k)
		}
	}
}

func (t *lockTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.m {
		syscall.Close(e.fd)
		delete(t.m, k)
	}
}

// reopen opens the backing file of h again, read-write if possible, as a
// separate open file description to carry one owner's OFD locks.
func (h *fileHandle) reopen() (int, syscall.Errno) {
	fd, ok := h.LoopbackFile.PassthroughFd()
	if !ok {
		return -1, syscall.EBADF
	}
	p := "/proc/self/fd/" + strconv.Itoa(fd)
	var err error
	for _, mode := range []int{syscall.O_RDWR, syscall.O_RDONLY, syscall.O_WRONLY} {
		var nfd int
		if nfd, err = syscall.Open(p, mode|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0); err == nil {
			return nfd, 0
		}
	}
	return -1, fs.ToErrno(err)
}

func (h *fileHandle) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	if flags&lkFlagFlushOwner != 0 {
		h.fsys.locks.dropOwner(h, owner)
		return 0
	}
	if h.fsys.LockMode() == LocksBroken {
		*out = fuse.FileLock{Typ: syscall.F_UNLCK}
		return 0
	}
	if flags&fuse.FUSE_LK_FLOCK != 0 {
		return h.LoopbackFile.Getlk(ctx, owner, lk, flags, out)
	}
	return h.fsys.locks.getlk(h, owner, lk, out)
}

func (h *fileHandle) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.setLock(ctx, owner, lk, flags, false)
}

func (h *fileHandle) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.setLock(ctx, owner, lk, flags, true)
}

// setLock takes a lock, waiting for it if wait is set. Waiting polls, so
// that an interrupt (a signal to the waiting process) ends it with EINTR,
// which the kernel turns into a restart or EINTR as for local locks.
func (h *fileHandle) setLock(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, wait bool) syscall.Errno {
	try := func() syscall.Errno {
		if h.fsys.LockMode() == LocksBroken {
			return 0
		}
		if flags&fuse.FUSE_LK_FLOCK != 0 {
			// flock(2) locks belong to the open file description,
			// which the handle's own backing descriptor mirrors.
			return h.LoopbackFile.Setlk(ctx, owner, lk, flags)
		}
		return h.fsys.locks.setlk(h, owner, lk)
	}
	errno := try()
	if !wait {
		return errno
	}
	backoff := 500 * time.Microsecond
	for errno == syscall.EAGAIN || errno == syscall.EACCES {
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return syscall.EINTR
		case <-h.fsys.closing:
			t.Stop()
			return syscall.EINTR
		}
		if backoff < 10*time.Millisecond {
			backoff *= 2
		}
		errno = try()
	}
	return errno
}
