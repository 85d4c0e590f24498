package worker

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRoomFloor: 1% of the filesystem's size, at least 1 MiB, at most
// 256 MiB.
func TestRoomFloor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ size, want uint64 }{
		{0, 1 << 20},
		{64 << 20, 1 << 20},
		{1 << 30, (1 << 30) / 100},
		{10 << 30, (10 << 30) / 100},
		{1 << 40, 256 << 20},
	} {
		if got := RoomFloor(c.size); got != c.want {
			t.Errorf("RoomFloor(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}

// TestNoRoomError: a NoRoomError is an ENOSPC (an outage to wait out)
// and says what ran out.
func TestNoRoomError(t *testing.T) {
	t.Parallel()
	e := &NoRoomError{Root: "/t", Free: 512 << 10, Size: 64 << 20, Floor: 1 << 20, Inodes: 100, FreeInodes: 3}
	if !errors.Is(e, syscall.ENOSPC) || !OutageErrno(e) || !IsNoRoom(e) {
		t.Errorf("%v is not an ENOSPC outage", e)
	}
	if s := e.Error(); !strings.Contains(s, "/t's filesystem has no room: 512 KiB free of 64.0 MiB, below the floor of 1.0 MiB") {
		t.Errorf("message %q", s)
	}
	e.FreeInodes = 0
	if s := e.Error(); !strings.Contains(s, "0 of 100 inodes free") {
		t.Errorf("message %q", s)
	}
	// A directory of a filesystem with room (the test's temporary one).
	if err := NoRoom(t.TempDir()); err != nil {
		t.Logf("the temporary directory's filesystem has no room: %v", err)
	}
}

// TestNoRoomOf: no room is no free inode, or free space below the floor;
// a filesystem that reports no size or no fixed inodes is not judged on
// them.
func TestNoRoomOf(t *testing.T) {
	t.Parallel()
	const mb = 1 << 20
	for _, c := range []struct {
		name string
		sf   unix.Statfs_t
		want bool
	}{
		{"room", unix.Statfs_t{Bsize: 4096, Frsize: 4096, Blocks: 64 * mb / 4096, Bavail: 2 * mb / 4096, Files: 100, Ffree: 50}, false},
		{"below the floor", unix.Statfs_t{Bsize: 4096, Frsize: 4096, Blocks: 64 * mb / 4096, Bavail: mb/4096 - 1, Files: 100, Ffree: 50}, true},
		{"no inode", unix.Statfs_t{Bsize: 4096, Frsize: 4096, Blocks: 64 * mb / 4096, Bavail: 32 * mb / 4096, Files: 100, Ffree: 0}, true},
		{"no fixed inodes", unix.Statfs_t{Bsize: 4096, Blocks: 64 * mb / 4096, Bavail: 32 * mb / 4096}, false},
		{"no size", unix.Statfs_t{Bsize: 4096}, false},
		{"below 1% of 10 GiB", unix.Statfs_t{Bsize: 4096, Blocks: 10 << 30 / 4096, Bavail: 100 * mb / 4096}, true},
		{"900 MiB of 100 GiB is room (the floor is at most 256 MiB)", unix.Statfs_t{Bsize: 4096, Blocks: 100 << 30 / 4096, Bavail: 900 * mb / 4096}, false},
		{"256 MiB of 1 TiB is room", unix.Statfs_t{Bsize: 4096, Blocks: 1 << 40 / 4096, Bavail: 257 * mb / 4096}, false},
	} {
		if got := noRoom("/t", &c.sf) != nil; got != c.want {
			t.Errorf("%s: no room %v, want %v", c.name, got, c.want)
		}
	}
}
