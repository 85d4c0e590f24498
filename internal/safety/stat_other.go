//go:build !linux

package safety

import (
	"os"
	"syscall"
)

// statOf is the stat(2) answer of a Recorder inode (see the Linux one);
// this system's Stat_t has a 16-bit mode.
func statOf(ino int, mode uint32, gid int) *syscall.Stat_t {
	return &syscall.Stat_t{Dev: 1, Ino: uint64(ino), Mode: uint16(mode), Uid: uint32(os.Geteuid()), Gid: uint32(gid)}
}
