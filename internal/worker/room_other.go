//go:build !linux

package worker

import "golang.org/x/sys/unix"

// statSpace reads the room of the filesystem holding root (BSD statfs:
// the block counts are in f_bsize units).
func statSpace(root string) (space, error) {
	var sf unix.Statfs_t
	if err := unix.Statfs(root, &sf); err != nil {
		return space{}, err
	}
	bs := uint64(sf.Bsize)
	free := uint64(0)
	if sf.Bavail > 0 {
		free = uint64(sf.Bavail) * bs
	}
	ffree := uint64(0)
	if sf.Ffree > 0 {
		ffree = uint64(sf.Ffree)
	}
	return space{free: free, size: uint64(sf.Blocks) * bs, freeInodes: ffree, inodes: uint64(sf.Files)}, nil
}
