//go:build linux

package proctree_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/proctree"
	"github.com/leasetool/lease/internal/testenv"
)

// TestStaleGroupsSwept: a holder that starts removes the groups that
// holders killed together with their sentinels left behind (a name
// lease-PID-RANDOM whose PID runs no process, nothing in it), and nothing
// else: not a group whose holder runs (one in another PID namespace too,
// which keeps its group locked), not one a process is still in, not
// another name.
func TestStaleGroupsSwept(t *testing.T) {
	if !proctree.Cgroups() {
		testenv.Missing(t, "cgroup", "no delegated cgroup v2 with cgroup.kill (Linux 5.14) here")
	}
	base := proctree.OwnCgroup()
	dead := testenv.FreePID(t)
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	mk := func(name string, children ...string) string {
		t.Helper()
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, c := range children {
				syscall.Rmdir(filepath.Join(dir, c))
			}
			syscall.Rmdir(dir)
		})
		for _, c := range children {
			if err := os.Mkdir(filepath.Join(dir, c), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	stale := mk(fmt.Sprintf("lease-%d-0123456789ab", dead), "cmd-1", "cmd-2")
	busy := mk(fmt.Sprintf("lease-%d-ba9876543210", dead), "cmd-1")
	if err := os.WriteFile(filepath.Join(busy, "cmd-1", "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Out of busy again before its rmdir: back to our own group.
		os.WriteFile(filepath.Join(base, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0)
	})
	live := mk(fmt.Sprintf("lease-%d-aaaaaaaaaaaa", sleep.Process.Pid))
	other := mk(fmt.Sprintf("lease-%d-notarandom", dead))
	// A holder in another PID namespace: its PID runs nothing here, but it
	// keeps its group locked (TestWorkGroupKeptAcrossPIDNamespaces runs
	// one for real).
	elsewhere := mk(fmt.Sprintf("lease-%d-cccccccccccc", dead))
	lock, err := os.Open(elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}

	s, err := proctree.StartSupervisor(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("%s, left by a holder that is gone and empty: %v, want it removed", stale, err)
	}
	for _, dir := range []string{busy, filepath.Join(busy, "cmd-1"), live, other, elsewhere} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s: %v, want it left", dir, err)
		}
	}
	for _, tc := range []struct {
		name string
		pid  int
	}{{"lease-12-0123456789ab", 12}, {"lease-12-0123456789AB", 0}, {"lease-012-0123456789ab", 0}, {"lease--0123456789ab", 0},
		{"lease-12-0123456789a", 0}, {"lease-test-0123456789ab", 0}, {"cmd-1", 0}, {"lease-99999999999999999999-0123456789ab", 0}} {
		if pid, ok := proctree.StaleHolder(tc.name); pid != tc.pid || ok != (tc.pid != 0) {
			t.Errorf("StaleHolder(%q) = %d, %v; want %d", tc.name, pid, ok, tc.pid)
		}
	}
}
