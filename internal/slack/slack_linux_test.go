package slack

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func slackNow(t *testing.T) int {
	t.Helper()
	n, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A child starts with the slack it is to get, from a thread that has its
// own back afterwards, whatever that was; with none to give (0), the
// thread's own.
func TestChild(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev := slackNow(t)
	defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(prev), 0, 0, 0)
	for _, tc := range []struct{ thread, orig, want int }{
		{300_000, 123_456, 123_456},
		{int(Worker), 50_000, 50_000},
		{300_000, 0, 300_000},
		{300_000, 300_000, 300_000},
	} {
		if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(tc.thread), 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		got := 0
		child(uint64(tc.orig), func() { got = slackNow(t) })
		if got != tc.want {
			t.Errorf("thread %d, child's %d: the child started with %d, want %d", tc.thread, tc.orig, got, tc.want)
		}
		if after := slackNow(t); after != tc.thread {
			t.Errorf("thread %d, child's %d: the thread has %d after, want its own back", tc.thread, tc.orig, after)
		}
	}
}
