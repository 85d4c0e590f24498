package seam

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The statfs f_type of the filesystems lease knows (linux/magic.h).
var fsTypes = map[int64]struct {
	name    string
	barrier bool // syncfs(2) writes back every dirty page and commits the journal
}{
	unix.EXT4_SUPER_MAGIC:      {"ext4", true}, // ext2, ext3 and ext4 share it
	unix.XFS_SUPER_MAGIC:       {"xfs", true},
	unix.BTRFS_SUPER_MAGIC:     {"btrfs", true},
	unix.TMPFS_MAGIC:           {"tmpfs", true}, // nothing to write back: syncfs costs nothing
	unix.NFS_SUPER_MAGIC:       {"nfs", false},
	unix.FUSE_SUPER_MAGIC:      {"fuse", false}, // GlusterFS, ceph-fuse, sshfs...: the daemon decides
	cephSuperMagic:             {"ceph", false},
	0x0bd00bd0:                 {"lustre", false},
	unix.SMB2_SUPER_MAGIC:      {"smb", false},
	unix.OVERLAYFS_SUPER_MAGIC: {"overlay", false},
	0x2fc12fc1:                 {"zfs", false},
}

// FilesystemType implements FilesystemSyncer from the root's statfs f_type
// (read once, by OS): syncfs is the batch barrier on ext4, XFS, btrfs and
// tmpfs only.
func (o *OSFS) FilesystemType() (string, bool, error) {
	if o.statfsErr != nil {
		return "", false, o.statfsErr
	}
	if t, ok := fsTypes[o.fstype]; ok {
		return t.name, t.barrier, nil
	}
	return fmt.Sprintf("0x%x", o.fstype), false, nil
}

// OpenSyncfs implements FilesystemSyncer: a new descriptor of the root
// (O_RDONLY: syncfs refuses an O_PATH descriptor), whose syncfs reports the
// writeback errors met since this open.
func (o *OSFS) OpenSyncfs() (SyncfsHandle, error) {
	root, err := o.dir("")
	if err != nil {
		return nil, err
	}
	defer root.done()
	fd, err := unix.Openat(root.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: o.root, Err: err}
	}
	return &syncfsFile{f: os.NewFile(uintptr(fd), o.root)}, nil
}

type syncfsFile struct{ f *os.File }

func (s *syncfsFile) Syncfs() error {
	if syncsOff {
		return nil
	}
	c, err := s.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := c.Control(func(fd uintptr) { serr = unix.Syncfs(int(fd)) }); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "syncfs", Path: s.f.Name(), Err: serr}
	}
	return nil
}

func (s *syncfsFile) Close() error { return s.f.Close() }
