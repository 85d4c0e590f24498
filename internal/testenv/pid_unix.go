//go:build unix

package testenv

import (
	"os/exec"
	"syscall"
	"testing"
)

// FreePID is a process ID above 2 that no process has at the moment: that
// of a child that ran and was reaped (tried up to 10 times). A test that
// needs a PID taken for a dead holder's uses it; the kernel hands PIDs out
// in turn, so it stays free for a while.
func FreePID(t testing.TB) int {
	t.Helper()
	for range 10 {
		c := exec.Command("true")
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
		if p := c.Process.Pid; p > 2 && syscall.Kill(p, 0) == syscall.ESRCH {
			return p
		}
	}
	t.Fatal("no process ID found free")
	return 0
}
