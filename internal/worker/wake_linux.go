//go:build linux

package worker

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
)

// The wake-up of a busy queue's waits (Backoff.Watch): inotify on the
// table's held/ directory. Release, complete, fail and revoke remove an
// item's held/ name after its record write (commit/held.go), so the
// removal of a name (IN_DELETE) says that an item was let go: free again,
// or done, which may leave the queue empty. The waiter tries again at
// once instead of at the end of its backoff; the backoff's poll stays the
// upper bound (a release that found no held/ name, one of another
// machine, items added to the queue).
//
// Only where inotify is delivered for the changes of the other processes
// of this machine: the local filesystems, by the root's statfs type
// (seam.FilesystemSyncer). On NFS, FUSE (GlusterFS, ceph-fuse), CephFS,
// Lustre and any other type the poll is the only mechanism: their
// clients report no change made on another node, and inotify there would
// be a promise kept for this node only.

// inotifyTrusted is whether inotify is delivered on the filesystem type
// named as seam's FilesystemType names it.
func inotifyTrusted(fstype string) bool {
	switch fstype {
	case "ext4", "xfs", "btrfs", "tmpfs":
		return true
	}
	return false
}

// fsTypeOf names st's filesystem type ("" when the FS cannot say); tests
// replace it to stand for a type where inotify is not trusted.
var fsTypeOf = func(st *commit.Store) string {
	fss, ok := st.FS().(seam.FilesystemSyncer)
	if !ok {
		return ""
	}
	name, _, err := fss.FilesystemType()
	if err != nil {
		return ""
	}
	return name
}

// waker is an inotify watch whose events wake a Backoff.
type waker struct {
	f *os.File
	c chan struct{} // one pending wake-up at most
}

// newWaker watches st's held/ directory, or returns nil where inotify is
// not trusted or the watch cannot be made (no held/ yet: the poll does).
func newWaker(st *commit.Store) *waker {
	if !inotifyTrusted(fsTypeOf(st)) {
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	// IN_DONT_FOLLOW, IN_ONLYDIR: a held/ that is a link is not watched
	// through (lease fsck's to report), the poll does.
	if _, err := unix.InotifyAddWatch(fd, st.Root()+"/"+layout.HeldDir, unix.IN_DELETE|unix.IN_DONT_FOLLOW|unix.IN_ONLYDIR); err != nil {
		unix.Close(fd)
		return nil
	}
	w := &waker{f: os.NewFile(uintptr(fd), "inotify"), c: make(chan struct{}, 1)}
	go w.read()
	return w
}

// read turns the watch's events into wake-ups until the waker is closed.
func (w *waker) read() {
	buf := make([]byte, 4096)
	for {
		_, err := w.f.Read(buf) // the runtime's poller: no thread held
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if err == nil {
			select {
			case w.c <- struct{}{}:
			default: // one is pending: the waiter tries once for all
			}
		}
	}
}

func (w *waker) close() { w.f.Close() }
