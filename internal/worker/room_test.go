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
