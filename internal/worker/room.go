package worker

// The no-room rule (issue 36): a fuzzer that cannot write its findings
// because the table's filesystem is full fails through no fault of its
// item. Counting that failure as an attempt turned a full-disk episode of
// 50 s into 11 counted attempts and a good item failed. So a run that fails
// while the table's filesystem has no room is released with no attempt
// counted, and a long-lived worker claims nothing while there is none.

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/leasetool/lease/commit"
)

// The bounds of the room floor: a filesystem has no room when less than
// RoomFloorShare of its size is free to its users (statfs f_bavail), with
// the floor at least RoomFloorMin and at most RoomFloorMax.
const (
	RoomFloorShare = 100 // 1/100: 1%
	RoomFloorMin   = 1 << 20
	RoomFloorMax   = 256 << 20
)

// RoomFloor is the free space below which a filesystem of size bytes has
// no room: 1% of it, clamped to [1 MiB, 256 MiB]. Enough that a command
// that writes its findings (a fuzzer's queue and crashes, a few MiB) can
// tell a full disk from a nearly full one, small enough not to idle a
// large filesystem that is simply well used.
func RoomFloor(size uint64) uint64 {
	return min(max(size/RoomFloorShare, RoomFloorMin), RoomFloorMax)
}

// NoRoomError says that the table's filesystem has no room: no free inode,
// or less free space than RoomFloor. It is an ENOSPC (errors.Is), the
// machine's state, that a worker waits out (OutageErrno).
type NoRoomError struct {
	Root               string
	Free, Floor, Size  uint64 // bytes
	FreeInodes, Inodes uint64
}

func (e *NoRoomError) Error() string {
	if e.Inodes > 0 && e.FreeInodes == 0 {
		return fmt.Sprintf("%s's filesystem has no room: 0 of %d inodes free", e.Root, e.Inodes)
	}
	return fmt.Sprintf("%s's filesystem has no room: %s free of %s, below the floor of %s (1%% of its size, at least %s, at most %s)",
		e.Root, mib(e.Free), mib(e.Size), mib(e.Floor), mib(RoomFloorMin), mib(RoomFloorMax))
}

// Unwrap makes a NoRoomError an ENOSPC.
func (e *NoRoomError) Unwrap() error { return syscall.ENOSPC }

func mib(n uint64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// NoRoom reports whether the filesystem holding the table root has no
// room (a *NoRoomError), by one statfs(2): no free inode (on a filesystem
// with a fixed number of them), or f_bavail below RoomFloor of its size.
// A statfs that fails tells nothing: nil; so does a filesystem that
// reports no size (some FUSE and pseudo filesystems) about its space.
func NoRoom(root string) error {
	sp, err := statSpace(root)
	if err != nil {
		return nil
	}
	return noRoom(root, sp)
}

// space is what statfs(2) says of a filesystem's room, in bytes and
// inodes (statSpace: the field names and types differ between systems).
type space struct {
	free, size, freeInodes, inodes uint64
}

func noRoom(root string, sp space) error {
	e := &NoRoomError{Root: root, Free: sp.free, Size: sp.size, FreeInodes: sp.freeInodes, Inodes: sp.inodes}
	e.Floor = RoomFloor(e.Size)
	if (e.Inodes > 0 && e.FreeInodes == 0) || (e.Size > 0 && e.Free < e.Floor) {
		return e
	}
	return nil
}

// IsNoRoom reports whether err is a NoRoomError.
func IsNoRoom(err error) bool {
	var e *NoRoomError
	return errors.As(err, &e)
}

// Failed returns the End of work that failed with f (a non-zero exit, a
// signal it did not get from its holder, an error): its Failure is f, an
// attempt, unless the table's filesystem has no room now; then the failure
// is the machine's, not the item's: no Failure (released, no attempt
// counted) and NoRoom says why. The holders call it once, when the work
// ended, and finish with the End it returns (again, after an outage).
func Failed(st *commit.Store, e End, f commit.Failure) End {
	if err := NoRoom(st.Root()); err != nil {
		e.Failure, e.NoRoom = nil, err
		return e
	}
	e.Failure = &f
	return e
}

// NoRoomMessage is the line a holder logs for a run released by the
// no-room rule: what failed, and that no attempt was counted.
func NoRoomMessage(id, what string, cause error) string {
	return fmt.Sprintf("%s: %s failed while %v: released, no attempt counted", id, what, cause)
}
