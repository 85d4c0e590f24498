package seam

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// StampOf returns fi's Stamp, and false when fi does not say.
func StampOf(fi fs.FileInfo) (Stamp, bool) {
	switch st := fi.Sys().(type) {
	case *unix.Stat_t:
		return Stamp{uint64(st.Ino), uint64(st.Size), unix.TimespecToNsec(st.Mtim), unix.TimespecToNsec(st.Ctim)}, true
	case *syscall.Stat_t:
		return Stamp{uint64(st.Ino), uint64(st.Size), st.Mtim.Nano(), st.Ctim.Nano()}, true
	}
	return Stamp{}, false
}
