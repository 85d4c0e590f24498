package safety

import (
	"os"
	"syscall"
)

// statOf is the stat(2) answer of a Recorder inode: device 1, its inode
// number, mode (type and permission bits), owner (this process: it made
// every file) and group.
func statOf(ino int, mode uint32, gid int) *syscall.Stat_t {
	return &syscall.Stat_t{Dev: 1, Ino: uint64(ino), Mode: mode, Uid: uint32(os.Geteuid()), Gid: uint32(gid)}
}
