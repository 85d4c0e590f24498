package worker

import "golang.org/x/sys/unix"

// statSpace reads the room of the filesystem holding root (f_frsize is
// the unit of the block counts; f_bsize where a filesystem leaves it 0).
func statSpace(root string) (space, error) {
	var sf unix.Statfs_t
	if err := unix.Statfs(root, &sf); err != nil {
		return space{}, err
	}
	bs := uint64(sf.Frsize)
	if bs == 0 {
		bs = uint64(sf.Bsize)
	}
	return space{free: sf.Bavail * bs, size: sf.Blocks * bs, freeInodes: sf.Ffree, inodes: sf.Files}, nil
}
