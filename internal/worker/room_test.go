package worker

import (
	"errors"
	"strings"
	"syscall"
	"testing"
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
		sp   space
		want bool
	}{
		{"room", space{size: 64 * mb, free: 2 * mb, inodes: 100, freeInodes: 50}, false},
		{"below the floor", space{size: 64 * mb, free: mb - 4096, inodes: 100, freeInodes: 50}, true},
		{"no inode", space{size: 64 * mb, free: 32 * mb, inodes: 100, freeInodes: 0}, true},
		{"no fixed inodes", space{size: 64 * mb, free: 32 * mb}, false},
		{"no size", space{}, false},
		{"below 1% of 10 GiB", space{size: 10 << 30, free: 100 * mb}, true},
		{"900 MiB of 100 GiB is room (the floor is at most 256 MiB)", space{size: 100 << 30, free: 900 * mb}, false},
		{"256 MiB of 1 TiB is room", space{size: 1 << 40, free: 257 * mb}, false},
	} {
		if got := noRoom("/t", c.sp) != nil; got != c.want {
			t.Errorf("%s: no room %v, want %v", c.name, got, c.want)
		}
	}
}
