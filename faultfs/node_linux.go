//go:build linux

package faultfs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a loopback node with hooks. Children are wrapped through
// WrapChild, so every node of the tree is a *node. The embedded
// *fs.LoopbackNode also carries go-fuse's unexported loopback marker method,
// so LoopbackNode.Rename and Link accept *node as the other directory.
type node struct {
	*fs.LoopbackNode
	fsys *FS
}

var (
	_ fs.NodeWrapChilder     = (*node)(nil)
	_ fs.NodeOpener          = (*node)(nil)
	_ fs.NodeCreater         = (*node)(nil)
	_ fs.NodeTmpfiler        = (*node)(nil)
	_ fs.NodeRenamer         = (*node)(nil)
	_ fs.NodeOpendirHandler  = (*node)(nil)
	_ fs.NodeCopyFileRanger  = (*node)(nil)
	_ fs.FileReaddirenter    = (*dirHandle)(nil)
	_ fs.FileSeekdirer       = (*dirHandle)(nil)
	_ fs.FileReleasedirer    = (*dirHandle)(nil)
	_ fs.FileFsyncdirer      = (*dirHandle)(nil)
	_ fs.FileIoctler         = (*dirHandle)(nil)
	_ fs.FileWriter          = (*fileHandle)(nil)
	_ fs.FileWritever        = (*fileHandle)(nil)
	_ fs.FileFsyncer         = (*fileHandle)(nil)
	_ fs.FileGetlker         = (*fileHandle)(nil)
	_ fs.FileSetlker         = (*fileHandle)(nil)
	_ fs.FileSetlkwer        = (*fileHandle)(nil)
	_ fs.FileReleaser        = (*fileHandle)(nil)
	_ fs.FilePassthroughFder = (*fileHandle)(nil)
)

func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	if lb, ok := ops.(*fs.LoopbackNode); ok {
		return &node{LoopbackNode: lb, fsys: n.fsys}
	}
	return ops
}

// relPath is the node's path relative to the mount root, "." for the root.
func (n *node) relPath() string {
	p := n.EmbeddedInode().Path(nil)
	if p == "" {
		return "."
	}
	return p
}

func (n *node) childPath(name string) string {
	d := n.relPath()
	if d == "." {
		return name
	}
	return d + "/" + name
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.fsys.hook(OpOpen, n.relPath()); errno != 0 {
		return nil, 0, errno
	}
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return n.fsys.wrapFile(n, "", fh), fuseFlags, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	p := n.childPath(name)
	if errno := n.fsys.hook(OpCreate, p); errno != 0 {
		return nil, nil, 0, errno
	}
	ch, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	cn, _ := ch.Operations().(*node)
	return ch, n.fsys.wrapFile(cn, p, fh), fuseFlags, 0
}

func (n *node) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	p := n.relPath()
	if errno := n.fsys.hook(OpCreate, p); errno != 0 {
		return nil, nil, 0, errno
	}
	ch, fh, fuseFlags, errno := n.LoopbackNode.Tmpfile(ctx, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	// An O_TMPFILE file has no path until it is linked; report the
	// directory's.
	return ch, n.fsys.wrapFile(nil, p, fh), fuseFlags, 0
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	src := n.childPath(name)
	dst := newName
	if np, ok := newParent.(*node); ok {
		dst = np.childPath(newName)
	}
	if errno := n.fsys.hook(OpRename, src, dst); errno != 0 {
		return errno
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fuseFlags, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{inner: fh, node: n}, fuseFlags, 0
}

func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	in, ok1 := fhIn.(*fileHandle)
	dst, ok2 := fhOut.(*fileHandle)
	if !ok1 || !ok2 {
		return 0, syscall.EXDEV
	}
	if errno := n.fsys.hook(OpWrite, dst.path()); errno != 0 {
		return 0, errno
	}
	return n.LoopbackNode.CopyFileRange(ctx, in.LoopbackFile, offIn, out, dst.LoopbackFile, offOut, length, flags)
}

// dirHandle is an open directory. Directory fsync reaches a go-fuse
// filesystem only as FileFsyncdirer on the handle returned by OpendirHandle
// (or NodeFsyncer on the node when the handle lacks it).
type dirHandle struct {
	inner fs.FileHandle
	node  *node
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if r, ok := d.inner.(fs.FileReaddirenter); ok {
		return r.Readdirent(ctx)
	}
	return nil, 0
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if s, ok := d.inner.(fs.FileSeekdirer); ok {
		return s.Seekdir(ctx, off)
	}
	return syscall.EOPNOTSUPP
}

func (d *dirHandle) Releasedir(ctx context.Context, releaseFlags uint32) {
	if r, ok := d.inner.(fs.FileReleasedirer); ok {
		r.Releasedir(ctx, releaseFlags)
	}
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if errno := d.node.fsys.hook(OpFsyncDir, d.node.relPath()); errno != 0 {
		return errno
	}
	if s, ok := d.inner.(fs.FileFsyncdirer); ok {
		return s.Fsyncdir(ctx, flags)
	}
	// Never ENOSYS: the kernel would stop sending FSYNCDIR for good.
	return syscall.EOPNOTSUPP
}

func (d *dirHandle) Ioctl(ctx context.Context, cmd uint32, arg uint64, input, output []byte) (int32, syscall.Errno) {
	if i, ok := d.inner.(fs.FileIoctler); ok {
		return i.Ioctl(ctx, cmd, arg, input, output)
	}
	return 0, syscall.ENOTTY
}

// fileHandle is an open regular file: go-fuse's LoopbackFile with hooks on
// write, fsync and locks.
type fileHandle struct {
	*fs.LoopbackFile
	fsys *FS
	node *node  // nil for O_TMPFILE files
	name string // path used when node is nil
	dev  uint64 // backing file identity, keys the lock table
	ino  uint64
}

func (f *FS) wrapFile(n *node, name string, fh fs.FileHandle) fs.FileHandle {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return fh
	}
	h := &fileHandle{LoopbackFile: lf, fsys: f, node: n, name: name}
	if fd, ok := lf.PassthroughFd(); ok {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) == nil {
			h.dev, h.ino = uint64(st.Dev), st.Ino
		}
	}
	return h
}

func (h *fileHandle) path() string {
	if h.node != nil {
		return h.node.relPath()
	}
	return h.name
}

// PassthroughFd refuses passthrough (also disabled as a capability): with
// it the kernel would read and write the backing file directly.
func (h *fileHandle) PassthroughFd() (int, bool) { return -1, false }

func (h *fileHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if errno := h.fsys.hook(OpWrite, h.path()); errno != 0 {
		return 0, errno
	}
	return h.LoopbackFile.Write(ctx, data, off)
}

func (h *fileHandle) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	if errno := h.fsys.hook(OpWrite, h.path()); errno != 0 {
		return 0, errno
	}
	return h.LoopbackFile.Writev(ctx, data, off)
}

func (h *fileHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if errno := h.fsys.hook(OpFsync, h.path()); errno != 0 {
		return errno
	}
	return h.LoopbackFile.Fsync(ctx, flags)
}

func (h *fileHandle) Release(ctx context.Context) syscall.Errno {
	h.fsys.locks.release(h)
	return h.LoopbackFile.Release(ctx)
}

// Getxattr answers ENOSYS: faultfs has no extended attributes, and the
// kernel, once told so, stops asking. Otherwise it asks for
// security.capability before the first write to every new file: one round
// trip per temp file that an NFS mount, which carries no security.*
// attributes, does not make.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// Listxattr answers ENOSYS, as Getxattr does.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}
