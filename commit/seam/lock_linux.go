//go:build linux

package seam

import (
	"context"
	"errors"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// lockByte takes an exclusive OFD lock on byte off of fd, retrying until
// timeout, or until ctx is done (WaitEnded). A timeout of 0 tries once.
//
// It never waits inside the kernel: every try is one non-blocking
// F_OFD_SETLK, and between tries it sleeps with a backoff of at most 20 ms,
// so the wait ends when timeout runs out whatever the filesystem does with
// a blocked lock request. Uncontended, the lock is one system call. quiet
// says whether the calls must be made with signals blocked (see setlk).
func lockByte(ctx context.Context, fd int, off int64, timeout time.Duration, quiet bool) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: off, Len: 1}
	deadline := time.Now().Add(timeout)
	backoff := 200 * time.Microsecond
	for {
		err := setlk(fd, &lk, quiet)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EINTR) {
			return err
		}
		if !errors.Is(err, unix.EINTR) {
			// A read lock is no writer's: waiting for it would wait for
			// whoever holds it to let go, not for a lease to end.
			if rd, pid := readLockOn(fd, off, 1, quiet); rd {
				return &ReadLockError{Pid: pid}
			}
		}
		if !time.Now().Before(deadline) {
			return ErrLockTimeout
		}
		if err := sleep(ctx, backoff); err != nil {
			return err
		}
		if backoff < 20*time.Millisecond {
			backoff *= 2
		}
	}
}

// readLockOn reports whether a read lock of another open file description
// holds a byte of fd's range [off, off+n) (n 0: to the end of the file),
// and its pid when the kernel tells (a traditional POSIX lock; OFD locks
// report -1, given as 0). F_OFD_GETLK reports one conflicting lock at a
// time; the range is walked past each write lock found, so that a
// writer's lock does not hide a read lock after it.
func readLockOn(fd int, off, n int64, quiet bool) (bool, int) {
	for i := 0; i < 1<<16; i++ { // bounded: each step passes one lock
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: off, Len: n}
		if err := getlk(fd, &lk, quiet); err != nil || lk.Type == unix.F_UNLCK {
			return false, 0
		}
		if lk.Type == unix.F_RDLCK {
			return true, max(int(lk.Pid), 0)
		}
		if lk.Len == 0 {
			return false, 0 // a write lock to the end of the file
		}
		next := lk.Start + lk.Len
		if n != 0 {
			if next >= off+n {
				return false, 0
			}
			n -= next - off
		}
		off = next
	}
	return false, 0
}

// getlk is one F_OFD_GETLK call, made as setlk makes F_OFD_SETLK.
func getlk(fd int, lk *unix.Flock_t, quiet bool) error {
	return lockCall(fd, unix.F_OFD_GETLK, lk, quiet)
}

// unlockByte releases the OFD lock on byte off of fd.
func unlockByte(fd int, off int64, quiet bool) error {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: off, Len: 1}
	for {
		if err := setlk(fd, &lk, quiet); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// setlk makes one F_OFD_SETLK call. With quiet, every signal that can be
// blocked is blocked on the calling thread for the length of the call.
//
// A FUSE filesystem's lock request travels to its user-space server; when
// a signal arrives while it is in flight, the kernel sends the server an
// INTERRUPT for it. The GlusterFS 10 client's handler of an interrupted
// lock request can deadlock all its event threads (gluster issue 4371),
// and every later call on that mount then hangs for good. A Go program is
// signalled all the time (the runtime's preemption signal, SIGURG, and
// profiling and child signals), so on FUSE the call is made with them
// blocked: a signal sent meanwhile stays pending and is delivered when the
// call returns, after the server has answered. SIGKILL and SIGSTOP cannot
// be blocked. Blocking and restoring the mask are two more system calls,
// local ones: the lock itself is still one request to the filesystem.
func setlk(fd int, lk *unix.Flock_t, quiet bool) error {
	return lockCall(fd, unix.F_OFD_SETLK, lk, quiet)
}

// lockCall is the fcntl lock call cmd, with signals blocked when quiet
// (see setlk).
func lockCall(fd, cmd int, lk *unix.Flock_t, quiet bool) error {
	if !quiet {
		return unix.FcntlFlock(uintptr(fd), cmd, lk)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, old unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^all.Val[i]
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &all, &old); err != nil {
		return unix.FcntlFlock(uintptr(fd), cmd, lk)
	}
	err := unix.FcntlFlock(uintptr(fd), cmd, lk)
	unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return err
}

// sleep pauses for d, or until ctx is done (WaitEnded).
func sleep(ctx context.Context, d time.Duration) error {
	if ctx.Done() == nil {
		time.Sleep(d)
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return WaitEnded(ctx)
	}
}
