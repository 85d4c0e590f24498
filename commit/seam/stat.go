package seam

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// Owner returns the mode bits (with setgid), owner and group of fi, and
// false when fi does not say.
func Owner(fi fs.FileInfo) (mode uint32, uid, gid int, ok bool) {
	switch st := fi.Sys().(type) {
	case *unix.Stat_t:
		return uint32(st.Mode) & 0o7777, int(st.Uid), int(st.Gid), true
	case *syscall.Stat_t:
		return uint32(st.Mode) & 0o7777, int(st.Uid), int(st.Gid), true
	}
	return 0, 0, 0, false
}

// Links is the link count of fi (1 when the FileInfo does not tell).
func Links(fi fs.FileInfo) uint64 {
	switch st := fi.Sys().(type) {
	case *unix.Stat_t:
		return uint64(st.Nlink)
	case *syscall.Stat_t:
		return uint64(st.Nlink)
	}
	return 1
}

// SameFile reports whether a and b describe one regular file (one inode).
func SameFile(a, b fs.FileInfo) bool {
	if a == nil || b == nil || !a.Mode().IsRegular() || !b.Mode().IsRegular() {
		return false
	}
	ka, oka := inodeOf(a)
	kb, okb := inodeOf(b)
	return oka && okb && ka == kb
}

// SameDir reports whether a and b describe one directory (one inode): a
// crash may show a directory under both names of a rename it was in.
func SameDir(a, b fs.FileInfo) bool {
	if a == nil || b == nil || !a.IsDir() || !b.IsDir() {
		return false
	}
	ka, oka := inodeOf(a)
	kb, okb := inodeOf(b)
	return oka && okb && ka == kb
}

type fileKey struct{ dev, ino uint64 }

func inodeOf(fi fs.FileInfo) (fileKey, bool) {
	switch st := fi.Sys().(type) {
	case *unix.Stat_t:
		return fileKey{uint64(st.Dev), uint64(st.Ino)}, true
	case *syscall.Stat_t:
		return fileKey{uint64(st.Dev), uint64(st.Ino)}, true
	}
	return fileKey{}, false
}

// Stamp is what a directory's stat says of its content: when two stats of
// one directory give the same Stamp, no entry was made or removed in
// between, on a filesystem that updates a directory's change time (POSIX
// does, for every entry made or removed). It leaves out the device number,
// which differs between the clients of one shared filesystem (each mount
// has its own), so that a Stamp taken through one client holds for all.
type Stamp struct {
	Ino, Size        uint64
	MtimeNS, CtimeNS int64
}
