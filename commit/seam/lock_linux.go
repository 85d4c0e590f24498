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
	if !quiet {
		return unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, lk)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, old unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^all.Val[i]
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &all, &old); err != nil {
		return unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, lk)
	}
	err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, lk)
	unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return err
}

// interruptible reports whether lock requests on the filesystem of fd are
// answered by a user-space server that sees signals as interrupts (FUSE),
// so that setlk must keep signals away from them. OS asks once, for the
// table root: one statfs per process, not per lock file.
func interruptible(fd int) bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return true // cannot tell: the quiet call is safe everywhere
	}
	return st.Type == unix.FUSE_SUPER_MAGIC
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
