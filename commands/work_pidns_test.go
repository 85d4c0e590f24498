//go:build linux

package commands_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/proctree"
	"github.com/leasetool/lease/internal/testenv"
)

// TestWorkGroupKeptAcrossPIDNamespaces: two lease work in one cgroup, one
// of them in a PID namespace of its own (unshare --pid, as a container
// runtime or a sandbox starts a job). The one inside names its cgroup
// lease-PID-RANDOM with its PID there, a PID no process has outside; the
// other, starting while the first waits for a busy item with its cgroup
// empty, must not take that cgroup for a dead holder's and remove it:
// then the first would run its next CMD in no cgroup of its own, and a
// process of that CMD's tree could outlive the worker. The first's next
// CMD runs in a fresh cmd-N of the same group.
func TestWorkGroupKeptAcrossPIDNamespaces(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "a PID namespace (unshare --pid)")
	testenv.NeedTools(t, "unshare")
	if !proctree.Cgroups() {
		testenv.Missing(t, "cgroup", "no delegated cgroup v2 with cgroup.kill (Linux 5.14) here")
	}
	free := testenv.FreePID(t) // lease work gets it inside: a PID that runs no process here

	h := newHoldTable(t)
	ids := h.workAdd("pidns", 2)
	first, busy := string(ids[0]), string(ids[1])
	held := h.must(0, "", "claim", "--owner", "other", "--ttl", "600", busy).out

	// Inside: sh is PID 1 of the new namespace, lease work the next PID
	// after ns_last_pid.
	cmd := h.command("work", "--", "sh", "-c", `cat /proc/self/cgroup > "cg-$LEASE_ID"`)
	script := fmt.Sprintf(`echo %d > /proc/sys/kernel/ns_last_pid && "$@"; exit $?`, free-1)
	cmd.Args = append([]string{"unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script, "sh"}, cmd.Args...)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Path = unshare
	var errOut strings.Builder
	cmd.Stderr = &syncWriter{w: &errOut}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// The first item done: its CMD and cmd-1 are gone, and lease work
	// waits for the busy one with its group empty.
	testenv.WaitFor(t, "the first item done", holdWait, func() bool {
		select {
		case err := <-done:
			t.Fatalf("lease work in its PID namespace ended early: %v\n%s", err, errOut.String())
		default:
		}
		return strings.Contains(h.must(0, "", "status", "--json", first).out, `"status":"done"`)
	})
	cg1, err := os.ReadFile(filepath.Join(h.dir, "cg-"+first))
	if err != nil {
		t.Fatal(err)
	}
	group := regexp.MustCompile(`(?m)^0::(.*/lease-(\d+)-[0-9a-f]{12})/cmd-\d+$`).FindStringSubmatch(string(cg1))
	if group == nil {
		t.Fatalf("the first CMD's cgroup: %q, want one below a lease-PID-RANDOM", cg1)
	}
	if group[2] != strconv.Itoa(free) {
		t.Fatalf("lease work's group %s: want the PID %d it was given inside its namespace", group[1], free)
	}

	// Another lease work in the same cgroup, outside: it sweeps the
	// groups of dead holders as it starts.
	other := newHoldTable(t)
	other.workAdd("outside", 1)
	other.must(0, "", "work", "--", "true")

	h.must(0, held, "release", "--owner", "other")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("lease work in its PID namespace: %v\n%s", err, errOut.String())
		}
	case <-time.After(holdWait):
		t.Fatalf("lease work in its PID namespace did not end within %v", holdWait)
	}
	cg2, err := os.ReadFile(filepath.Join(h.dir, "cg-"+busy))
	if err != nil {
		t.Fatal(err)
	}
	if want := "0::" + group[1] + "/cmd-2\n"; !strings.Contains(string(cg2), want) {
		t.Errorf("the second CMD's cgroup: %q, want %q: the worker's group was swept while it lived", cg2, want)
	}
}
