//go:build linux

package commit

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// lockByte takes an exclusive OFD lock on byte off of fd, retrying until
// timeout. A timeout of 0 tries once.
func lockByte(fd int, off int64, timeout time.Duration) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: off, Len: 1}
	deadline := time.Now().Add(timeout)
	backoff := 200 * time.Microsecond
	for {
		err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EINTR) {
			return err
		}
		if !time.Now().Before(deadline) {
			return ErrLockTimeout
		}
		time.Sleep(backoff)
		if backoff < 20*time.Millisecond {
			backoff *= 2
		}
	}
}
