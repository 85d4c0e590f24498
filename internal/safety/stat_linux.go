package safety

import "syscall"

// statOf is the stat(2) answer of a Recorder inode: device 1, its inode
// number, mode (type and permission bits) and group.
func statOf(ino int, mode uint32, gid int) *syscall.Stat_t {
	return &syscall.Stat_t{Dev: 1, Ino: uint64(ino), Mode: mode, Gid: uint32(gid)}
}
