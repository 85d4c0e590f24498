//go:build linux

package seam

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/leasetool/lease/layout"
	"golang.org/x/sys/unix"
)

// OS returns the FS of the directory root on the local kernel. Every
// directory below root is reached with openat(2) and O_NOFOLLOW, one
// component at a time, and kept open for the life of the FS, so a name is
// resolved once and a directory fsync reuses the handle. Call Close when
// done.
func OS(root string) (*OSFS, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	// One statfs per process, for the table root, not per lock file.
	var st unix.Statfs_t
	err = unix.Fstatfs(fd, &st)
	known := err == nil
	// FUSE's server sees signals as interrupts: its lock calls keep them
	// away (setlk). Where it cannot tell, the quiet call is safe.
	quiet := !known || st.Type == unix.FUSE_SUPER_MAGIC
	o := &OSFS{root: root, dirs: map[string]int{"": fd}, quiet: quiet, nfs: known && st.Type == unix.NFS_SUPER_MAGIC}
	if known {
		o.fstype = int64(st.Type)
	} else {
		o.statfsErr = &fs.PathError{Op: "statfs", Path: root, Err: err}
	}
	o.kick = newKicker(fd, quiet, o.fstype)
	return o, nil
}

// OSFS is the kernel implementation of FS.
type OSFS struct {
	root  string
	mu    sync.Mutex
	dirs  map[string]int       // open directory handles by table-relative name
	locks map[string]*lockFile // open shard lock files by table-relative name
	quiet bool                 // the root is on FUSE: lock calls block signals (setlk)
	nfs   bool                 // the root is on NFS: a granted lock revalidates its directory
	// fstype is the root's statfs f_type, read once by OS (0 when
	// statfsErr says why it could not be read).
	fstype    int64
	statfsErr error
	kick      *kicker  // CephFS: slow reads ask the MDS to write its journal; nil elsewhere
	stale     []int    // directory handles dropped by Refresh, closed by Close
	share     *Sharing // the table's sharing (SetSharing), nil when not shared
	umask     uint32   // the process's umask, read by SetSharing
}

// SetSharing implements Sharer: it makes every directory and file created from now on get the
// modes of sharing s (see Sharing), whatever the process's umask.
func (o *OSFS) SetSharing(s Sharing) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.share, o.umask = &s, processUmask()
}

// FixPerm implements PermFixer: it sets the group (gid -1 leaves it) and
// then the mode of name through a descriptor of the entry itself, opened
// with O_PATH|O_NOFOLLOW below its directory's descriptor (the root: the
// root's own descriptor), after checking with fstat that the descriptor is
// a directory or a regular file of one link (ErrNotInPlace otherwise).
// Nothing is done by a path a link swapped in could redirect: the group
// with fchownat(AT_EMPTY_PATH), the mode with chmod of the descriptor's
// /proc/self/fd name, which names that inode and no other.
func (o *OSFS) FixPerm(name string, mode uint32, gid int) error {
	fd, err := o.openPath(name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return o.perr("stat", name, err)
	}
	if err := inPlace(&st); err != nil {
		return o.perr("chmod", name, err)
	}
	// The group first: chown(2) clears the setgid bit that chmod sets.
	if gid >= 0 && int(st.Gid) != gid {
		if err := unix.Fchownat(fd, "", -1, gid, unix.AT_EMPTY_PATH); err != nil {
			return o.perr("chgrp", name, err)
		}
	}
	if err := fchmodPath(fd, mode); err != nil {
		return o.perr("chmod", name, err)
	}
	return nil
}

// openPath opens name (the root when "") with O_PATH|O_NOFOLLOW: a
// descriptor of the entry itself, a symbolic link included, that reads
// nothing and cannot block.
func (o *OSFS) openPath(name string) (int, error) {
	if strings.Trim(name, "/") == "" {
		root, err := o.dir("")
		if err != nil {
			return -1, err
		}
		defer root.done()
		fd, err := unix.Openat(root.fd, ".", unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: o.root, Err: err}
		}
		return fd, nil
	}
	dfd, base, err := o.at(name)
	if err != nil {
		return -1, err
	}
	defer dfd.done()
	fd, err := unix.Openat(dfd.fd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, o.perr("open", name, err)
	}
	return fd, nil
}

// inPlace returns ErrNotInPlace, saying why, unless st is a directory or a
// regular file of one link: the entries of a table whose mode lease may
// change where they are.
func inPlace(st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return nil
	case unix.S_IFREG:
		if st.Nlink != 1 {
			return fmt.Errorf("%w: a file with %d links (another name may reach it from outside the table)", ErrNotInPlace, st.Nlink)
		}
		return nil
	case unix.S_IFLNK:
		return fmt.Errorf("%w: a symbolic link, never followed", ErrNotInPlace)
	}
	return fmt.Errorf("%w: not a regular file or a directory", ErrNotInPlace)
}

// fchmodPath sets the mode of the inode that the O_PATH descriptor fd
// refers to (fchmod(2) refuses O_PATH descriptors): fchmodat2 with
// AT_EMPTY_PATH (Linux 6.6), else chmod of /proc/self/fd/FD, which the
// kernel resolves to that inode, never through a name of the table.
func fchmodPath(fd int, mode uint32) error {
	if !noFchmodat2 {
		_, _, errno := unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(fd), uintptr(unsafe.Pointer(&emptyPath[0])), uintptr(mode), unix.AT_EMPTY_PATH, 0, 0)
		if errno == 0 {
			return nil
		}
		if errno != unix.ENOSYS && errno != unix.EINVAL && errno != unix.EOPNOTSUPP {
			return errno
		}
	}
	return unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), mode, 0)
}

var emptyPath = [1]byte{0}

// noFchmodat2 makes fchmodPath take the way of kernels before 6.6 (a
// test seam).
var noFchmodat2 = false

// MkdirPrivate implements PrivateDirMaker: mkdirat(2) with mode 0700, so
// that no other account can enter the directory from the moment it exists
// (in a setgid directory it gets the group and the setgid bit of its
// parent), then, through a descriptor of it opened O_NOFOLLOW, a check
// that it is the directory this process made and the mode set exactly
// (the umask may have taken owner bits).
func (o *OSFS) MkdirPrivate(name string) error {
	dfd, base, err := o.at(name)
	if err != nil {
		return err
	}
	defer dfd.done()
	if err := unix.Mkdirat(dfd.fd, base, 0o700); err != nil {
		return o.perr("mkdir", name, err)
	}
	return o.chmodMade(dfd.fd, base, name, func(st *unix.Stat_t) uint32 { return uint32(st.Mode)&unix.S_ISGID | 0o700 })
}

// chmodMade sets the mode of the directory base of dfd that this process
// has just made to mode(its stat), through a descriptor opened O_NOFOLLOW
// and after checking that it is a directory owned by this process's
// account: a name swapped meanwhile is refused with ErrNotInPlace, never
// followed.
func (o *OSFS) chmodMade(dfd int, base, name string, mode func(*unix.Stat_t) uint32) error {
	fd, err := unix.Openat(dfd, base, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return o.perr("open", name, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return o.perr("stat", name, err)
	}
	if int(st.Uid) != unix.Geteuid() {
		return o.perr("chmod", name, fmt.Errorf("%w: a directory of uid %d where this process made its own", ErrNotInPlace, st.Uid))
	}
	if want := mode(&st); want != uint32(st.Mode)&0o7777 {
		if err := fchmodPath(fd, want); err != nil {
			return o.perr("chmod", name, err)
		}
	}
	return nil
}

// sharedFile gives the new file fd the mode the table's sharing calls for,
// when the umask left it another one: one fchmod, for the files lease
// creates (0666 less the umask), only when they need it.
func (o *OSFS) sharedFile(fd int, name string, writable bool) error {
	if o.share == nil {
		return nil
	}
	actual := 0o666 &^ o.umask
	if want := o.share.FileMode(actual, writable); want != actual {
		if err := unix.Fchmod(fd, want); err != nil {
			return o.perr("chmod", name, err)
		}
	}
	return nil
}

// regular returns ErrNotRegular unless fd is a regular file, and the size
// the kernel has in its cache (-1 if it does not tell). It asks statx with
// AT_STATX_DONT_SYNC: an inode's type never changes, and the size was just
// refreshed by the open (FUSE and NFS revalidate a file when it is opened),
// so on those filesystems this costs no round trip where fstat costs one.
func regular(fd int) (int64, error) {
	var stx unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE|unix.STATX_SIZE, &stx)
	if err == nil && stx.Mask&unix.STATX_TYPE != 0 {
		if stx.Mode&unix.S_IFMT != unix.S_IFREG {
			return -1, ErrNotRegular
		}
		if stx.Mask&unix.STATX_SIZE == 0 {
			return -1, nil
		}
		return int64(stx.Size), nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return -1, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, ErrNotRegular
	}
	return st.Size, nil
}

// Close closes the cached directory handles.
func (o *OSFS) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, fd := range o.dirs {
		unix.Close(fd)
		delete(o.dirs, k)
	}
	for _, fd := range o.stale {
		unix.Close(fd)
	}
	o.stale = nil
	o.closeLocksLocked()
	o.kick.close()
	return nil
}

func (o *OSFS) perr(op, name string, err error) error {
	if errors.Is(err, unix.ELOOP) {
		err = fmt.Errorf("%w (a symbolic link)", ErrNotRegular)
	}
	return &fs.PathError{Op: op, Path: path.Join(o.root, name), Err: err}
}

// dirFD is an open directory handle that dir returned: one of the cache
// (done does nothing), or one opened for a single call (done closes it).
type dirFD struct {
	fd  int
	own bool
}

func (d dirFD) done() {
	if d.own {
		unix.Close(d.fd)
	}
}

// cached reports whether the handle of table-relative directory name is
// kept once opened: the table's own directories, as many as its shape
// says (the root, the shards, the queue's, held/, tally/unqueued/), never
// those whose number grows with the campaign: one item's results
// (stage/ID.TOKEN/... and public/ID/...), lost+found/'s, and the tally's
// buckets (one every five minutes, 288 a day). A worker that kept the
// handle of every result tree it published ran out of descriptors (EMFILE
// after 240 items at `ulimit -n 256`), and a handle cannot be closed while
// another goroutine may use it this moment (forgetTree).
func cached(name string) bool {
	top, rest, deep := strings.Cut(name, "/")
	if !deep || rest == "" {
		return true
	}
	switch top {
	case layout.StageDir, layout.PublicDir, layout.LostFound:
		return false
	case layout.TallyDir:
		bucket, _, _ := strings.Cut(rest, "/")
		_, isBucket := layout.ParseBucket(bucket)
		return !isBucket
	}
	return true
}

// dir returns an open handle of the table-relative directory name, opening
// each component with O_NOFOLLOW (on first use for a cached one; see
// cached). The caller calls done once its call is over.
func (o *OSFS) dir(name string) (dirFD, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if fd, ok := o.dirs[name]; ok { // the common case: a clean name seen before
		return dirFD{fd: fd}, nil
	}
	name = strings.Trim(path.Clean("/"+name), "/")
	if fd, ok := o.dirs[name]; ok {
		return dirFD{fd: fd}, nil
	}
	cur := dirFD{fd: o.dirs[""]}
	done := ""
	for _, comp := range strings.Split(name, "/") {
		if done == "" {
			done = comp
		} else {
			done += "/" + comp
		}
		if fd, ok := o.dirs[done]; ok {
			cur = dirFD{fd: fd}
			continue
		}
		fd, err := unix.Openat(cur.fd, comp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		cur.done() // a parent opened for this call alone
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return dirFD{fd: -1}, &fs.PathError{Op: "open", Path: path.Join(o.root, done), Err: fmt.Errorf("not a directory (a symbolic link or a file): %w", err)}
			}
			return dirFD{fd: -1}, &fs.PathError{Op: "open", Path: path.Join(o.root, done), Err: err}
		}
		cur = dirFD{fd: fd, own: !cached(done)}
		if !cur.own {
			o.dirs[done] = fd
		}
	}
	return cur, nil
}

// at splits name into an open parent directory and a base name; the
// caller calls done on the directory once its call is over.
func (o *OSFS) at(name string) (dirFD, string, error) {
	d, base := path.Split(name)
	if base == "" || base == "." || base == ".." {
		return dirFD{fd: -1}, "", &fs.PathError{Op: "open", Path: path.Join(o.root, name), Err: fs.ErrInvalid}
	}
	fd, err := o.dir(strings.TrimSuffix(d, "/"))
	return fd, base, err
}

// ReadFile implements FS.
func (o *OSFS) ReadFile(name string, max int) ([]byte, error) {
	defer o.kick.watch()()
	dfd, base, err := o.at(name)
	if err != nil {
		return nil, err
	}
	defer dfd.done()
	// O_NONBLOCK: a FIFO planted as a record must not hang the reader.
	fd, err := unix.Openat(dfd.fd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, o.perr("open", name, err)
	}
	defer unix.Close(fd)
	size, err := regular(fd)
	if err != nil {
		return nil, o.perr("open", name, err)
	}
	var buf []byte
	if max+1 <= readBufSize {
		// One pooled buffer per reader instead of a fresh max+1 bytes
		// per record read; the caller gets an exact copy.
		p := readBufs.Get().(*[readBufSize]byte)
		defer readBufs.Put(p)
		buf = p[:max+1]
	} else {
		buf = make([]byte, max+1)
	}
	want := len(buf)
	if size >= 0 && size < int64(want) {
		// Ask for the size the open saw: a read past the cached end of
		// file makes FUSE (and NFS) fetch the attributes again first.
		want = int(size)
	}
	n := 0
	for n < len(buf) {
		if n >= want {
			want = len(buf) // the file is longer than it was: read on to the end
		}
		m, err := unix.Read(fd, buf[n:want])
		if err == unix.EINTR {
			continue
		}
		if err == unix.ENOENT || err == unix.ESTALE {
			// The open succeeded, so the name was there: a network
			// filesystem's client (GlusterFS with open-behind) opened
			// it lazily and found the file replaced meanwhile. Never
			// "no such file", which would make the record missing.
			return nil, &fs.PathError{Op: "read", Path: path.Join(o.root, name), Err: vanished{err.(unix.Errno)}}
		}
		if err != nil {
			return nil, o.perr("read", name, err)
		}
		if m == 0 {
			break
		}
		n += m
		if n < len(buf) && (n < want || int64(n) == size) && buf[n-1] == '\n' {
			// A short read of a regular file, or all of the size the
			// open saw, is its end; a record ends in a newline. Not
			// asking again saves a read, and on FUSE and NFS an
			// attribute round trip.
			break
		}
	}
	return append([]byte(nil), buf[:n]...), nil
}

// vanished is the error of a read that failed because the open file was
// gone: it is ErrVanished (and only that, not fs.ErrNotExist), and names
// the errno.
type vanished struct{ errno unix.Errno }

func (v vanished) Error() string { return ErrVanished.Error() + ": " + v.errno.Error() }
func (v vanished) Unwrap() error { return ErrVanished }

const readBufSize = 8 << 10

var readBufs = sync.Pool{New: func() any { return new([readBufSize]byte) }}

// CreateExcl implements FS. Files are created with mode 0666 less the umask.
func (o *OSFS) CreateExcl(name string) (File, error) {
	dfd, base, err := o.at(name)
	if err != nil {
		return nil, err
	}
	defer dfd.done()
	fd, err := unix.Openat(dfd.fd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return nil, o.perr("create", name, err)
	}
	if err := o.sharedFile(fd, name, false); err != nil {
		unix.Close(fd)
		unix.Unlinkat(dfd.fd, base, 0)
		return nil, err
	}
	return &osFile{fd: fd, name: path.Join(o.root, name)}, nil
}

// Rename implements FS.
func (o *OSFS) Rename(oldname, newname string) error {
	ofd, obase, err := o.at(oldname)
	if err != nil {
		return err
	}
	defer ofd.done()
	nfd, nbase, err := o.at(newname)
	if err != nil {
		return err
	}
	defer nfd.done()
	if err := unix.Renameat(ofd.fd, obase, nfd.fd, nbase); err != nil {
		return o.perr("rename", newname, err)
	}
	o.forgetTree(oldname)
	return nil
}

// RenameNoReplace implements FS with renameat2(RENAME_NOREPLACE), or with
// link(2) and unlink(2) where the filesystem lacks it (NFS): link never
// replaces an existing name either. A directory cannot be linked: there
// it falls back to rename(2) once the new name was found missing, and
// rename(2) refuses to replace a directory that is not empty, so what a
// directory moved this way can replace is at most an empty directory made
// in between (results are published under their record's lock). A
// directory moved away takes its cached handles with it.
func (o *OSFS) RenameNoReplace(oldname, newname string) error {
	ofd, obase, err := o.at(oldname)
	if err != nil {
		return err
	}
	defer ofd.done()
	nfd, nbase, err := o.at(newname)
	if err != nil {
		return err
	}
	defer nfd.done()
	err = unix.Renameat2(ofd.fd, obase, nfd.fd, nbase, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOTSUP) {
		if err = unix.Linkat(ofd.fd, obase, nfd.fd, nbase, 0); err == nil {
			err = unix.Unlinkat(ofd.fd, obase, 0)
		} else if errors.Is(err, unix.EPERM) && o.isDirAt(ofd.fd, obase) {
			var st unix.Stat_t
			if err = unix.Fstatat(nfd.fd, nbase, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
				err = unix.EEXIST
			} else if errors.Is(err, unix.ENOENT) {
				err = unix.Renameat(ofd.fd, obase, nfd.fd, nbase)
			}
		}
	}
	if err != nil {
		return o.perr("rename", newname, err)
	}
	o.forgetTree(oldname)
	return nil
}

// Link implements Linker with linkat(2) without AT_SYMLINK_FOLLOW: a
// symbolic link is linked as itself, never followed.
func (o *OSFS) Link(oldname, newname string) error {
	ofd, obase, err := o.at(oldname)
	if err != nil {
		return err
	}
	defer ofd.done()
	nfd, nbase, err := o.at(newname)
	if err != nil {
		return err
	}
	defer nfd.done()
	if err := unix.Linkat(ofd.fd, obase, nfd.fd, nbase, 0); err != nil {
		return o.perr("link", newname, err)
	}
	return nil
}

// isDirAt reports whether base in directory dfd is a directory.
func (o *OSFS) isDirAt(dfd int, base string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// forgetTree closes the cached handles of directory name and of every
// directory below it, after name was renamed: they would reach the
// directory at its new name (they are closed by Close). Only directories are cached, and a cached
// directory's parents are cached too, so a name that is not cached has
// nothing cached below it (a record's rename costs one lookup).
func (o *OSFS) forgetTree(name string) {
	name = strings.Trim(path.Clean("/"+name), "/")
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.dirs[name]; !ok || name == "" {
		return
	}
	for k, fd := range o.dirs {
		if k == name || strings.HasPrefix(k, name+"/") {
			o.stale = append(o.stale, fd) // another writer may be using it this moment (see Refresh)
			delete(o.dirs, k)
		}
	}
}

// Remove implements FS.
func (o *OSFS) Remove(name string) error {
	dfd, base, err := o.at(name)
	if err != nil {
		return err
	}
	defer dfd.done()
	err = unix.Unlinkat(dfd.fd, base, 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(dfd.fd, base, unix.AT_REMOVEDIR)
		if err == nil {
			o.forget(name)
		}
	}
	if err != nil {
		return o.perr("remove", name, err)
	}
	return nil
}

// Refresh implements Refresher: it drops the cached handles of the
// table-relative directory dir and of the lock files in it after an ESTALE
// (the engine's retry calls it): a network
// filesystem's client answers ESTALE for a handle whose file the server
// no longer knows by it, and only a fresh lookup of the name cures that.
// The old directory handle stays open, unused, until Close, since another
// writer may be using it this moment; the lock file is closed once no
// writer of this process holds or waits for a byte of it.
func (o *OSFS) Refresh(dir string) {
	dir = strings.Trim(path.Clean("/"+dir), "/")
	o.mu.Lock()
	defer o.mu.Unlock()
	if fd, ok := o.dirs[dir]; ok && dir != "" {
		o.stale = append(o.stale, fd)
		delete(o.dirs, dir)
	}
	for name, lf := range o.locks {
		if d := path.Dir(name); d != dir && !(d == "." && dir == "") {
			continue
		}
		delete(o.locks, name)
		lf.mu.Lock()
		lf.retired = true
		if lf.users == 0 {
			lf.closeLocked()
		}
		lf.mu.Unlock()
	}
}

// forget closes the cached handle of a removed directory.
func (o *OSFS) forget(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	name = strings.Trim(path.Clean("/"+name), "/")
	if fd, ok := o.dirs[name]; ok {
		unix.Close(fd)
		delete(o.dirs, name)
	}
}

// SyncFile implements FS.
func (o *OSFS) SyncFile(name string) error {
	dfd, base, err := o.at(name)
	if err != nil {
		return err
	}
	defer dfd.done()
	fd, err := unix.Openat(dfd.fd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return o.perr("open", name, err)
	}
	defer unix.Close(fd)
	if _, err := regular(fd); err != nil {
		return o.perr("open", name, err)
	}
	if err := fsyncFD(fd); err != nil {
		return o.perr("fsync", name, err)
	}
	return nil
}

// fsyncFD is fsync(2) of fd, again when a signal interrupted it.
func fsyncFD(fd int) error {
	if syncsOff {
		return nil
	}
	for {
		if err := unix.Fsync(fd); err != unix.EINTR {
			return err
		}
	}
}

// Mkdir implements FS. Directories are created with mode 0777 less the umask.
func (o *OSFS) Mkdir(name string) error {
	dfd, base, err := o.at(name)
	if err != nil {
		return err
	}
	defer dfd.done()
	if err := unix.Mkdirat(dfd.fd, base, 0o777); err != nil {
		return o.perr("mkdir", name, err)
	}
	if o.share != nil {
		// Always: mkdir(2) ignores the setgid bit of its mode. Through
		// a descriptor: the name may have been swapped meanwhile.
		return o.chmodMade(dfd.fd, base, name, func(*unix.Stat_t) uint32 { return o.share.DirModeOf(name, 0o777&^o.umask) })
	}
	return nil
}

// SyncDir implements FS.
func (o *OSFS) SyncDir(name string) error {
	fd, err := o.dir(name)
	if err != nil {
		return err
	}
	defer fd.done()
	if err := fsyncFD(fd.fd); err != nil {
		return o.perr("fsync", name, err)
	}
	return nil
}

// ReadDir implements FS.
func (o *OSFS) ReadDir(name string) ([]fs.DirEntry, error) {
	f, err := o.openDir(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// openDir opens directory name for reading its entries: a descriptor of
// its own, so that reading does not move the offset of the cached one the
// *at calls use.
func (o *OSFS) openDir(name string) (*os.File, error) {
	fd, err := o.dir(name)
	if err != nil {
		return nil, err
	}
	if fd.own { // opened for this call: the reader's own
		return os.NewFile(uintptr(fd.fd), path.Join(o.root, name)), nil
	}
	nfd, err := unix.Openat(fd.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, o.perr("open", name, err)
	}
	return os.NewFile(uintptr(nfd), path.Join(o.root, name)), nil
}

// Lstat implements FS.
func (o *OSFS) Lstat(name string) (fs.FileInfo, error) {
	if strings.Trim(name, "/") == "" {
		return os.Lstat(o.root)
	}
	dfd, base, err := o.at(name)
	if err != nil {
		return nil, err
	}
	defer dfd.done()
	var st unix.Stat_t
	if err := unix.Fstatat(dfd.fd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, o.perr("lstat", name, err)
	}
	return statInfo{base, &st}, nil
}

type osFile struct {
	fd   int
	name string
}

func (f *osFile) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Write(f.fd, p[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, &fs.PathError{Op: "write", Path: f.name, Err: err}
		}
		n += m
	}
	return n, nil
}

// Sync uses fdatasync: a new file's size is data that fdatasync makes
// durable, and nothing else of its metadata matters to a reader.
func (f *osFile) Sync() error {
	if syncsOff {
		return nil
	}
	for {
		err := unix.Fdatasync(f.fd)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "fsync", Path: f.name, Err: err}
		}
		return nil
	}
}

func (f *osFile) Close() error {
	if err := unix.Close(f.fd); err != nil {
		return &fs.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}

type statInfo struct {
	name string
	st   *unix.Stat_t
}

func (s statInfo) Name() string { return s.name }
func (s statInfo) Size() int64  { return s.st.Size }
func (s statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	return m
}
func (s statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Sec, s.st.Mtim.Nsec) }
func (s statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s statInfo) Sys() any           { return s.st }

// Syncfs implements Syncer: it flushes the whole filesystem of the root.
func (o *OSFS) Syncfs() error {
	fd, err := o.dir("")
	if err != nil {
		return err
	}
	defer fd.done()
	return unix.Syncfs(fd.fd)
}

// OpenDir implements DirOpener: the directory name, read a bounded number
// of names at a time.
func (o *OSFS) OpenDir(name string) (DirReader, error) {
	f, err := o.openDir(name)
	if err != nil {
		return nil, err
	}
	return &osDir{f: f}, nil
}

// processUmask is the umask of this process. It is read from
// /proc/self/status; where that is not available, set and restored, which
// is safe only while no other goroutine creates files (a table is being
// opened).
func processUmask() uint32 {
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return uint32(m)
				}
			}
		}
	}
	m := unix.Umask(0o022)
	unix.Umask(m)
	return uint32(m)
}
