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
// CMD runs in the cmd-1 its first CMD left empty, in the same group.
func TestWorkGroupKeptAcrossPIDNamespaces(t *testing.T) {
	t.Parallel()
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
	cmd := h.unshared([]string{"--mount-proc"}, fmt.Sprintf(`echo %d > /proc/sys/kernel/ns_last_pid && "$@"; exit $?`, free-1),
		"work", "--", "sh", "-c", `cat /proc/self/cgroup > "cg-$LEASE_ID"`)
	var errOut strings.Builder
	cmd.Stderr = &syncWriter{w: &errOut}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// The first item done: its CMD is gone, cmd-1 is empty, and lease
	// work waits for the busy one with no process in its group.
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
	if want := "0::" + group[1] + "/cmd-1\n"; !strings.Contains(string(cg2), want) {
		t.Errorf("the second CMD's cgroup: %q, want %q: the worker's group was swept while it lived", cg2, want)
	}
}

// unshared is the lease process of args in a PID namespace of its own
// (unshare --pid --fork, with extra options), run by sh -c script with
// the lease command line as "$@" (script "": lease itself, PID 1).
func (h *holdTable) unshared(extra []string, script string, args ...string) *exec.Cmd {
	h.t.Helper()
	testenv.NeedRoot(h.t, "a PID namespace (unshare --pid)")
	testenv.NeedTools(h.t, "unshare")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		h.t.Fatal(err)
	}
	cmd := h.command(args...)
	prefix := append([]string{"unshare", "--pid", "--fork"}, extra...)
	if script != "" {
		prefix = append(prefix, "sh", "-c", script, "sh")
	}
	cmd.Path, cmd.Args = unshare, append(prefix, cmd.Args...)
	return cmd
}

// TestSupervisionNeedsOwnProc: in a PID namespace whose /proc is still the
// machine's (unshare --pid --fork without --mount-proc), the process IDs
// lease reads there are not its namespace's: ending CMD's tree would read
// the wrong tree and signal whatever process has those IDs inside (a
// bystander, another worker's CMD). lease work refuses to start there
// (exit 2) and lease run too (125), naming /proc and the way out, with
// nothing claimed.
func TestSupervisionNeedsOwnProc(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := string(h.workAdd("foreign-proc", 1)[0])
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"work", "--", "true"}, 2},
		{[]string{"run", "--next", "--complete", "--", "true"}, 125},
	} {
		cmd := h.unshared(nil, "", tc.args...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		code := holdExit(t, cmd)
		if code != tc.code || !strings.Contains(errOut.String(), "/proc is not this PID namespace's") ||
			!strings.Contains(errOut.String(), "--mount-proc") {
			t.Errorf("lease %s in a PID namespace with the machine's /proc: exit %d, stderr %q; want %d naming /proc and --mount-proc",
				strings.Join(tc.args, " "), code, errOut.String(), tc.code)
		}
		if rec := h.must(0, "", "status", "--json", id).out; !strings.Contains(rec, `"status":"queued"`) {
			t.Errorf("the item after lease %s refused: %s, want it queued, never claimed", tc.args[0], rec)
		}
	}
}
