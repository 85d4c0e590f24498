package safety

// The file handles of Recorder (writes and fsyncs logged as data events)
// and the fs.FileInfo its Lstat and ReadDir return.

import (
	"bytes"
	"io/fs"
	"syscall"
	"time"

	"github.com/leasetool/lease/commit/seam"
)

type recFile struct {
	r      *Recorder
	n      *inode
	name   string
	closed bool
}

func (f *recFile) Write(p []byte) (int, error) {
	r := f.r
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpWrite, f.name)
	if f.closed {
		return 0, r.fail(i, perr("write", f.name, fs.ErrClosed))
	}
	f.n.data = append(bytes.Clone(f.n.data), p...)
	r.emit(event{kind: evData, call: i, node: f.n, data: f.n.data})
	return len(p), nil
}

func (f *recFile) Sync() error {
	r := f.r
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpFsync, f.name)
	if f.closed {
		return r.fail(i, perr("fsync", f.name, fs.ErrClosed))
	}
	r.emit(event{kind: evFsync, call: i, node: f.n})
	return nil
}

func (f *recFile) Close() error {
	r := f.r
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpClose, f.name)
	if f.closed {
		return r.fail(i, perr("close", f.name, fs.ErrClosed))
	}
	f.closed = true
	return nil
}

type info struct {
	name string
	dir  bool
	size int64
	ino  int
	mode uint32 // permission bits and setgid
	gid  int
}

// infoOf describes inode n under name.
func infoOf(name string, n *inode) info {
	return info{name, n.dir, int64(len(n.data)), n.ino, n.mode, n.gid}
}

func (i info) Name() string { return i.name }
func (i info) Size() int64  { return i.size }
func (i info) Mode() fs.FileMode {
	m := fs.FileMode(i.mode & 0o777)
	if i.mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if i.dir {
		m |= fs.ModeDir
	}
	return m
}
func (i info) ModTime() time.Time { return time.Time{} }
func (i info) IsDir() bool        { return i.dir }

// Sys gives the inode number, so that a file with two names (a rename
// whose source reappeared after a crash) reads as one file, as on disk,
// and the mode and group, as lease fsck reads them of a shared table.
func (i info) Sys() any {
	typ := uint32(syscall.S_IFREG)
	if i.dir {
		typ = syscall.S_IFDIR
	}
	return statOf(i.ino, typ|i.mode, i.gid)
}
