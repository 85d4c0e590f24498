package qualify

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Inodes are the inodes of the filesystem holding a table, as statfs(2)
// reports them. Every queued item of a table costs two, its queue entry
// and its record, and a filesystem can run out of them long before it runs
// out of bytes (a 1 GiB ext4 has 65,536). Per-user inode quotas (Lustre,
// GPFS) are not in statfs: lfs quota or mmlsquota shows them.
type Inodes struct {
	Free, Total uint64
	// Known: the filesystem has a fixed number of inodes; btrfs and
	// others that make them as needed report none (Total 0).
	Known bool
}

// ItemInodes is what one queued item costs: its queue entry and its
// record.
const ItemInodes = 2

// Room is how many more items the free inodes hold.
func (n Inodes) Room() uint64 { return n.Free / ItemInodes }

// String says what is left, for status and qualify.
func (n Inodes) String() string {
	if !n.Known {
		return "no fixed number of inodes (the filesystem makes them as needed)"
	}
	return fmt.Sprintf("%d of %d inodes free: room for about %d more items (each takes %d: its queue entry and its record)",
		n.Free, n.Total, n.Room(), ItemInodes)
}

// InodesOf statfs's the filesystem holding path, or its nearest existing
// ancestor when path does not exist yet.
func InodesOf(path string) (Inodes, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Inodes{}, err
	}
	var st unix.Statfs_t
	for {
		err = unix.Statfs(abs, &st)
		if err == nil || !errors.Is(err, unix.ENOENT) || abs == filepath.Dir(abs) {
			break
		}
		abs = filepath.Dir(abs)
	}
	if err != nil {
		return Inodes{}, &os.PathError{Op: "statfs", Path: abs, Err: err}
	}
	return Inodes{Free: uint64(st.Ffree), Total: uint64(st.Files), Known: st.Files > 0}, nil
}

// Space is the bytes free of the filesystem holding path, for messages.
func Space(path string) (free uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// inodeCheck is the inodes check of qualify: informational, except that a
// filesystem with no free inode left fails (nothing can be queued or
// claimed there).
func inodeCheck(dir string) Check {
	n, err := InodesOf(dir)
	if err != nil {
		return Check{Name: "inodes", Pass: true, Detail: "cannot tell: " + err.Error()}
	}
	return Check{Name: "inodes", Pass: !n.Known || n.Free > 0, Detail: n.String()}
}
