package commands_test

// No process of CMD's tree outlives its supervision, whatever the chaos
// harness kills (issue 36): the supervisor alone, lease work alone, both
// at once, CMD alone. CMD starts a background sleep (and, where a
// subreaper is left to catch it, one that calls setsid and one orphaned
// at once by a double fork); after the kill
// none of them may run past the grace, the item's next run must find none
// of them running, and a dead supervisor counts no attempt. Before, a
// killed supervisor left CMD's children running under PID 1 while the
// item ran again, and was logged "exited 125: failed attempt counted".

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/leasetool/lease/internal/proctree"
)

// killScript is CMD: its first run records its supervisor (its parent)
// and the pids of its tree, says ready and waits; a later run records
// which of those pids still run (overlap) and exits 0.
const killScript = `D="$LEASE_ROOT/.."
if [ -e "$D/again" ]; then
  for p in $(cat "$D/pids"); do
    if [ -e /proc/$p/stat ] && ! grep -q ') Z ' /proc/$p/stat; then echo $p >> "$D/overlap"; fi
  done
  exit 0
fi
touch "$D/again"
echo $PPID > "$D/sup"
echo $$ >> "$D/pids"
sleep 1000 & echo $! >> "$D/pids"
want=2
if [ "$1" = setsid ]; then
  setsid sh -c 'echo $$ >> "$0/pids"; exec sleep 1000' "$D" &
  ( sleep 1000 & echo $! >> "$D/pids" ) &
  want=4
fi
while [ "$(wc -l < "$D/pids")" -lt $want ]; do sleep 0.01; done
echo ready
wait`

func readPid(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("%s: %q", path, data)
	}
	return p
}

func TestWorkKillPatterns(t *testing.T) {
	t.Parallel()
	// With a supervisor process (LEASE_SUPERVISOR=process, and what a
	// worker has where CMD gets no cgroup), every kill; without one (the
	// default where CMD gets a cgroup), lease work supervises CMD itself:
	// kill -9 of it, and of CMD.
	cases := []struct{ how, sup string }{{"supervisor", "process"}, {"cmd", "process"}, {"work", "process"}, {"both", "process"},
		{"cmd", "auto"}, {"work", "auto"}}
	for _, tc := range cases {
		how := tc.how
		t.Run(how+"/"+tc.sup, func(t *testing.T) {
			t.Parallel()
			h := newHoldTable(t)
			h.extraEnv = []string{proctree.ModeEnv + "=" + tc.sup}
			id := h.workAdd("kill-"+how+"-"+tc.sup, 1)[0]
			mode := "setsid"
			if how == "both" && !proctree.Cgroups() {
				// With the holder and the supervisor both gone and no
				// cgroup, what left CMD's process group has no one above
				// it to catch it (lease-work(1) says so): only the group
				// is checked. With cgroups, the sentinel's cgroup.kill
				// ends it too.
				mode = "group"
			}
			// A lease told to stop ttl - clock_skew - grace = 13.9 s after
			// a renewal (every 0.5 s) cannot be lost by accident before
			// the kill; where the kill leaves it to run out, the next
			// worker waits for that.
			args := []string{"work", "--json", "--ttl", "15", "--renew-interval", "0.5", "--grace", "1", "--", "sh", "-c", killScript, "sh", mode}
			p := h.start(args...)
			p.expect("ready")
			pids := pidsIn(t, filepath.Join(h.dir, "pids"))
			sup := readPid(t, filepath.Join(h.dir, "sup"))
			work := p.cmd.Process.Pid
			if inline := sup == work; inline != (tc.sup == "auto" && proctree.Cgroups()) {
				t.Fatalf("CMD's parent %d, lease work %d: want lease work itself exactly when CMD gets a cgroup (%v) and no supervisor process is asked for (%s)", sup, work, proctree.Cgroups(), tc.sup)
			}
			switch how {
			case "supervisor":
				syscall.Kill(sup, syscall.SIGKILL)
			case "cmd":
				syscall.Kill(pids[0], syscall.SIGKILL)
			case "work":
				syscall.Kill(work, syscall.SIGKILL)
			case "both":
				syscall.Kill(work, syscall.SIGKILL)
				syscall.Kill(sup, syscall.SIGKILL)
			}
			treeGone(t, "kill -9 of "+how, append([]int{sup}, pids...))
			code := p.wait()
			errOut := p.errOut.String()
			switch how {
			case "supervisor", "cmd":
				// The worker goes on: the item runs again and is done.
				if code != 0 {
					t.Fatalf("lease work: exit %d after the kill of its %s\n%s", code, how, errOut)
				}
			default:
				// The lease runs out; the next worker takes the item over.
				r := h.lease("", "work", "--json", "--", "sh", "-c", killScript)
				items, _ := workObjects(t, r.errOut)
				if r.code != 0 || len(items) != 1 || items[0].Finish != "done" {
					t.Fatalf("%s\nwant the item taken over and done", r)
				}
			}
			if data, err := os.ReadFile(filepath.Join(h.dir, "overlap")); err == nil {
				t.Errorf("the item ran again while processes of its old tree ran: %q", data)
			}
			rec := h.must(0, "", "status", "--json", string(id)).out
			if !strings.Contains(rec, `"status":"done"`) {
				t.Errorf("the item after the kill: %s", rec)
			}
			wantAttempts := `"attempts":0`
			if how == "cmd" {
				wantAttempts = `"attempts":1` // CMD killed by a signal lease work did not send: its own failure
			}
			if !strings.Contains(rec, wantAttempts) || (how == "supervisor" && (strings.Contains(errOut, "exited 125") || strings.Contains(errOut, "failed attempt"))) {
				t.Errorf("the item after the kill of the %s: %s\n%s\nwant %s", how, rec, errOut, wantAttempts)
			}
		})
	}
}

// pidsIn reads the process IDs in path, one a line.
func pidsIn(t *testing.T, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %q", path, data)
		}
		pids = append(pids, n)
	}
	return pids
}

// TestRunSupervisorKilled: lease run --complete whose supervisor is
// killed leaves nothing of CMD's tree running (a setsid one included),
// counts no attempt and exits 125; it counted an attempt and left the
// children to PID 1.
func TestRunSupervisorKilled(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := h.workAdd("run-sup", 1)[0]
	p := h.start("run", "--complete", "--ttl", "30", "--grace", "1", "--next", "--", "sh", "-c", killScript, "sh", "setsid")
	p.expect("ready")
	pids := pidsIn(t, filepath.Join(h.dir, "pids"))
	sup := readPid(t, filepath.Join(h.dir, "sup"))
	syscall.Kill(sup, syscall.SIGKILL)
	treeGone(t, "kill -9 of lease run's supervisor", append([]int{sup}, pids...))
	if code := p.wait(); code != 125 || !strings.Contains(p.errOut.String(), "no attempt counted") {
		t.Errorf("lease run after its supervisor was killed: exit %d\n%s\nwant 125, no attempt", code, p.errOut)
	}
	if rec := h.must(0, "", "status", "--json", string(id)).out; !strings.Contains(rec, `"attempts":0`) {
		t.Errorf("the item after the kill: %s", rec)
	}
}

// TestWorkNoOrphans: whoever supervises CMD (lease work itself, the
// default where CMD gets a cgroup, or a supervisor process), no process of
// CMD's tree outlives the item: not when CMD exits and leaves its tree
// running, nor when the lease is revoked, even with SIGTERM ignored (SIGKILL
// after the grace), a setsid(2) one included. lease work returns only once
// the tree is gone.
func TestWorkNoOrphans(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"command-exits", "revoke"} {
		for _, sup := range []string{"auto", "process"} {
			t.Run(how+"/"+sup, func(t *testing.T) {
				t.Parallel()
				h := newHoldTable(t)
				h.extraEnv = []string{proctree.ModeEnv + "=" + sup}
				id := h.workAdd("orphans-"+how+"-"+sup, 1)[0]
				script := "trap '' TERM\n" + treeScript
				if how == "command-exits" {
					script = strings.TrimSuffix(script, "wait") + "exit 0"
				}
				p := h.start("work", "--max-items", "1", "--grace", "1", "--", "sh", "-c", script)
				p.expect("ready")
				pids := treePids(t, h.dir)
				if how == "revoke" {
					h.must(0, "", "revoke", string(id))
				}
				code := p.wait()
				for _, pid := range pids {
					if alive(pid) {
						t.Errorf("%s: process %d of CMD's tree runs after lease work exited %d", how, pid, code)
					}
				}
				treeGone(t, how, pids)
				rec := h.must(0, "", "status", "--json", string(id)).out
				if how == "command-exits" && (code != 0 || !strings.Contains(rec, `"status":"done"`)) {
					t.Errorf("lease work exited %d, the item %s; want 0 and done\n%s", code, rec, p.errOut)
				}
			})
		}
	}
}

// TestWorkBadSupervisorMode: a LEASE_SUPERVISOR that is neither auto nor
// process is a usage error (exit 2), said before anything is claimed.
func TestWorkBadSupervisorMode(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := h.workAdd("mode", 1)[0]
	r := h.leaseWithEnv([]string{proctree.ModeEnv + "=inline"}, "", "work", "--", "true")
	if r.code != 2 || !strings.Contains(r.errOut, `LEASE_SUPERVISOR="inline": want auto or process`) {
		t.Fatalf("%s\nwant exit 2 naming LEASE_SUPERVISOR", r)
	}
	if rec := h.must(0, "", "status", "--json", string(id)).out; !strings.Contains(rec, `"status":"queued"`) {
		t.Errorf("the item after the refused start: %s, want it queued, never claimed", rec)
	}
}
