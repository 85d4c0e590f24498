//go:build linux

package seam

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// lockFile is one shard lock file, opened once per batch (see
// DropIdleLocks) and shared by the process's writers. Every record lock is
// an OFD lock on one byte of it.
// Locks taken through one open file description do not exclude each other,
// so the process keeps its own table of the bytes it holds: a writer first
// takes the byte in the table (waiting, bounded by the same timeout, while
// another writer of this process holds it), then the fcntl lock (waiting
// while another process holds it), and releases them in the reverse order.
//
// Opening the lock file once per shard instead of once per record saves an
// open (with O_CREAT, which takes the directory's lock exclusively on many
// filesystems and queues behind creates and renames), an fstat and a close
// per record: on FUSE and NFS five round trips (LOOKUP, OPEN, GETATTR,
// FLUSH, RELEASE) for one (the unlock).
type lockFile struct {
	fd      int
	quiet   bool // lock calls are made with signals blocked (FUSE; see setlk)
	mu      sync.Mutex
	held    map[int64]chan struct{} // bytes held in this process; closed on release
	users   int                     // holders and waiters of a byte
	retired bool                    // an unlock failed: close when the last user is gone
}

// lockFile returns the open lock file name, opening it on first use.
func (o *OSFS) lockFile(name string) (*lockFile, error) {
	o.mu.Lock()
	if lf, ok := o.locks[name]; ok {
		lf.mu.Lock()
		lf.users++
		lf.mu.Unlock()
		o.mu.Unlock()
		return lf, nil
	}
	o.mu.Unlock()
	dfd, base, err := o.at(name)
	if err != nil {
		return nil, err
	}
	defer dfd.done()
	stop := o.kick.watch() // a lock file the other client used last waits like a record
	fd, err := o.openLock(dfd.fd, base, name)
	stop()
	if err != nil {
		return nil, err
	}
	if _, err := regular(fd); err != nil {
		unix.Close(fd)
		return nil, o.perr("open", name, ErrNotRegular)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.locks == nil {
		o.locks = map[string]*lockFile{}
	}
	lf, ok := o.locks[name]
	if ok { // another writer opened it meanwhile
		unix.Close(fd)
	} else {
		lf = &lockFile{fd: fd, quiet: o.quiet, held: map[int64]chan struct{}{}}
		o.locks[name] = lf
	}
	lf.mu.Lock()
	lf.users++
	lf.mu.Unlock()
	return lf, nil
}

// openLock opens the lock file base of directory dfd for reading and
// writing, creating it if needed. A lock file this process creates is
// readable only by those who may write it (a read lock, which needs only
// read access, would stop every writer of the shard): its owner's alone
// (0600) in a table that is not shared, the group's too in a shared one
// (Sharing.FileMode). One that exists is left as it is (it may be another
// account's; lease fsck --repair narrows its mode).
func (o *OSFS) openLock(dfd int, base, name string) (int, error) {
	const flags = unix.O_RDWR | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if o.share == nil {
		fd, err := unix.Openat(dfd, base, flags|unix.O_CREAT, 0o600)
		if err != nil {
			return -1, o.perr("open", name, err)
		}
		return fd, nil
	}
	for {
		fd, err := unix.Openat(dfd, base, flags, 0)
		if err == nil {
			return fd, nil
		}
		if !errors.Is(err, unix.ENOENT) {
			return -1, o.perr("open", name, err)
		}
		fd, err = unix.Openat(dfd, base, flags|unix.O_CREAT|unix.O_EXCL, 0o666)
		if errors.Is(err, unix.EEXIST) {
			continue // another process created it meanwhile
		}
		if err != nil {
			return -1, o.perr("open", name, err)
		}
		if err := o.sharedFile(fd, name, true); err != nil {
			unix.Close(fd)
			return -1, err
		}
		return fd, nil
	}
}

// ReadLocked implements ReadLockFinder: it opens name for reading (never
// following a link, never blocking) and asks F_OFD_GETLK about each lock
// of the whole file.
func (o *OSFS) ReadLocked(name string) (bool, int, error) {
	dfd, base, err := o.at(name)
	if err != nil {
		return false, 0, err
	}
	defer dfd.done()
	fd, err := unix.Openat(dfd.fd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, 0, o.perr("open", name, err)
	}
	defer unix.Close(fd)
	if _, err := regular(fd); err != nil {
		return false, 0, o.perr("open", name, err)
	}
	locked, pid := readLockOn(fd, 0, 0, o.quiet)
	return locked, pid, nil
}

// PrepareLock opens the lock file name (creating it if needed) and keeps
// it for the batch, so that a batch finds out that it may not lock a
// shard before it writes anything (see Store.apply).
func (o *OSFS) PrepareLock(name string) error {
	lf, err := o.lockFile(name)
	if err != nil {
		return err
	}
	lf.mu.Lock()
	doneLocked(lf)
	lf.mu.Unlock()
	return nil
}

// doneLocked drops one user; a retired lock file is closed by its last
// user. The caller holds lf.mu.
func doneLocked(lf *lockFile) {
	lf.users--
	if lf.retired && lf.users == 0 {
		lf.closeLocked()
	}
}

// closeLocked closes the descriptor, dropping its locks, once. The caller
// holds lf.mu.
func (lf *lockFile) closeLocked() {
	if lf.fd >= 0 {
		unix.Close(lf.fd)
		lf.fd = -1
	}
}

// Lock implements FS with an OFD lock on byte off of the lock file name,
// through the process's shared descriptor of that file; see lockFile.
func (o *OSFS) Lock(ctx context.Context, name string, off int64, timeout time.Duration) (func(), error) {
	lf, err := o.lockFile(name)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	timedOut := func(err error) error {
		lf.mu.Lock()
		doneLocked(lf)
		lf.mu.Unlock()
		return &fs.PathError{Op: "Lock", Path: path.Join(o.root, name), Err: err}
	}
	// The byte in this process's table.
	for {
		lf.mu.Lock()
		busy, ok := lf.held[off]
		if !ok {
			lf.held[off] = make(chan struct{})
			lf.mu.Unlock()
			break
		}
		lf.mu.Unlock()
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil, timedOut(ErrLockTimeout)
		}
		t := time.NewTimer(wait)
		select {
		case <-busy:
			t.Stop()
		case <-t.C:
			return nil, timedOut(ErrLockTimeout)
		case <-ctx.Done():
			t.Stop()
			return nil, timedOut(WaitEnded(ctx))
		}
	}
	release := func() {
		lf.mu.Lock()
		close(lf.held[off])
		delete(lf.held, off)
		doneLocked(lf)
		lf.mu.Unlock()
	}
	// The byte between processes.
	wait := time.Until(deadline)
	if wait < 0 {
		wait = 0
	}
	if err := lockByte(ctx, lf.fd, off, wait, lf.quiet); err != nil {
		release()
		return nil, &fs.PathError{Op: "Lock", Path: path.Join(o.root, name), Err: err}
	}
	if o.nfs {
		if err := o.revalidateDir(name); err != nil {
			unlockByte(lf.fd, off, lf.quiet)
			release()
			return nil, &fs.PathError{Op: "Lock", Path: path.Join(o.root, name), Err: err}
		}
	}
	return func() {
		if err := unlockByte(lf.fd, off, lf.quiet); err != nil {
			// The byte may still be locked through this descriptor: stop
			// using it, and close it (dropping the lock) once no writer
			// of this process holds or waits for a byte of it.
			o.mu.Lock()
			if o.locks[name] == lf {
				delete(o.locks, name)
			}
			o.mu.Unlock()
			lf.mu.Lock()
			lf.retired = true
			lf.mu.Unlock()
		}
		release()
	}, nil
}

// closeLocksLocked closes the cached lock files (dropping their locks). The
// caller holds o.mu.
func (o *OSFS) closeLocksLocked() {
	for name, lf := range o.locks {
		lf.mu.Lock()
		lf.closeLocked()
		lf.mu.Unlock()
		delete(o.locks, name)
	}
}

// DropIdleLocks closes the cached lock files no writer holds or waits for.
// Every batch starts with it (Store.Apply), so a long-running process
// (renew-batch --watch, lease run) opens each shard's lock file again once
// per batch and never keeps locking through a file that was replaced
// meanwhile, while a batch still opens it once per shard, not per record.
func (o *OSFS) DropIdleLocks() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for name, lf := range o.locks {
		lf.mu.Lock()
		if lf.users == 0 {
			lf.closeLocked()
			delete(o.locks, name)
		}
		lf.mu.Unlock()
	}
}

// revalidateDir makes the NFS client fetch the attributes of the directory
// of lock, a lock file, from the server (statx with AT_STATX_FORCE_SYNC), after a lock on
// the records it holds was granted: a change attribute that moved since
// the client cached it makes the client look its entries up again. Without
// it an NFSv4 client opens a record whose name it still has cached by its
// old file handle (OPEN CLAIM_FH), and the server, which keeps a file
// renamed over open for a while, serves the record as it was before
// another client's last write under that lock: a claim then reads a token
// already granted and grants it again (docs/design.md#nfs; 5 of 320 writes
// through two NFSv4.2 clients, 0 with this).
func (o *OSFS) revalidateDir(lock string) error {
	d, _ := path.Split(lock)
	name := strings.TrimSuffix(d, "/")
	dfd, err := o.dir(name)
	if err != nil {
		return err
	}
	defer dfd.done()
	var sx unix.Statx_t
	for {
		err = unix.Statx(dfd.fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_FORCE_SYNC, unix.STATX_CTIME, &sx)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return o.perr("stat", name, err)
	}
	return nil
}
