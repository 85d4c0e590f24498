//go:build linux

package commands_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/proctree"
	"github.com/leasetool/lease/internal/testenv"
)

// TestWorkWaitsInPoller: where lease work supervises CMD itself, no
// thread of it is blocked in waitid(2) while CMD runs: it waits for CMD
// and for its sentinel in the runtime's poller (their pidfds), so the
// process sleeps whole meanwhile (docs/performance.md, "lease work
// against the floor"). /proc/PID/task/TID/syscall says which call each
// thread is in.
func TestWorkWaitsInPoller(t *testing.T) {
	t.Parallel()
	if !proctree.Cgroups() {
		testenv.Missing(t, "cgroup", "no delegated cgroup v2 with cgroup.kill (Linux 5.14) here: lease work keeps its supervisor process")
	}
	h := newHoldTable(t)
	h.workAdd("poller", 1)
	release := filepath.Join(h.dir, "release")
	p := h.start("work", "--max-items", "1", "--", "sh", "-c", `echo ready; while [ ! -e "$1" ]; do sleep 0.05; done`, "sh", release)
	p.expect("ready")
	pid := p.cmd.Process.Pid
	waitid := fmt.Sprintf("%d ", syscall.SYS_WAITID)
	// Five looks 100 ms apart. Nothing of lease work calls waitid while
	// CMD runs, so no look may find a thread in it; one look is forgiven
	// anyway (a pass through it, WNOHANG). A thread that waits there is
	// found at every look after the first.
	seen := 0
	for look := 0; look < 5; look++ {
		if threadInSyscall(t, pid, waitid) {
			seen++
		}
		time.Sleep(100 * time.Millisecond)
	}
	if seen > 1 {
		t.Fatalf("a thread of lease work was in waitid at %d of 5 looks while CMD ran: want its waits in the poller", seen)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("lease work exited %d\n%s", code, p.errOut)
	}
}
