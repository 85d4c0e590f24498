package commands_test

// lease run and the whole process tree of its command (internal/proctree):
// no process CMD starts survives a lost (revoked) lease, a signal to lease
// run, kill -9 of lease run, or CMD's own exit; with --complete, what CMD
// left in LEASE_STAGE is published as public/ID/ and a failed run counts
// an attempt; LEASE_INPUT names the item's stored content.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/leasefmt"
)

// treeScript starts a shell with a background sleep and a setsid'd shell
// with its own background sleep, writes their process IDs to pids, and
// waits.
const treeScript = `echo $$ >> pids
sleep 600 & echo $! >> pids
setsid sh -c 'echo $$ >> pids; sleep 600 & echo $! >> pids; wait' &
while [ "$(wc -l < pids)" -lt 4 ]; do sleep 0.01; done
echo ready
wait`

func treePids(t *testing.T, dir string) []int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		p, _ := strconv.Atoi(f)
		pids = append(pids, p)
	}
	if len(pids) != 4 {
		t.Fatalf("pids: %q", data)
	}
	return pids
}

// treeGone waits (bounded) until none of pids runs; survivors fail the
// test and are killed.
func treeGone(t *testing.T, what string, pids []int) {
	t.Helper()
	deadline := time.Now().Add(holdWait)
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range left {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
				t.Errorf("%s: process %d of the command's tree survived: %q", what, p, strings.ReplaceAll(string(cmdline), "\x00", " "))
				syscall.Kill(p, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunNoOrphans(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"revoke", "sigterm", "kill-9", "command-exits"} {
		t.Run(how, func(t *testing.T) {
			h := newHoldTable(t)
			id := holdID("tree-" + how)
			script := treeScript
			if how == "command-exits" {
				script = strings.TrimSuffix(treeScript, "wait") + "exit 0"
			}
			p := h.start("run", "--ttl", "30", "--interval", "10", "--grace", "1", string(id), "--", "sh", "-c", script)
			p.expect("ready")
			pids := treePids(t, h.dir)
			switch how {
			case "revoke":
				h.must(0, "", "revoke", string(id))
			case "sigterm":
				p.cmd.Process.Signal(syscall.SIGTERM)
			case "kill-9":
				p.cmd.Process.Kill()
			}
			code := p.wait()
			switch how {
			case "revoke":
				if code != 124 {
					t.Errorf("lease run exited %d after a revoke, want 124\n%s", code, p.errOut)
				}
			case "kill-9":
				if code != 128+9 {
					t.Errorf("lease run exited %d, want 137", code)
				}
			case "command-exits":
				if code != 0 {
					t.Errorf("lease run exited %d, want the command's 0\n%s", code, p.errOut)
				}
			}
			treeGone(t, how, pids)
		})
	}
}

// TestRunCompletePublishesStage: two items whose commands stage the same
// names (as every AFL instance does) are published whole, each under its
// own public/ID/, and are done.
func TestRunCompletePublishesStage(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	stage := `mkdir -p "$LEASE_STAGE/crashes" &&
echo "crash of $LEASE_ID" > "$LEASE_STAGE/crashes/id:000000,sig:11,src:000000,time:12,op:havoc,rep:2" &&
echo "execs_done : 42" > "$LEASE_STAGE/fuzzer_stats"`
	for _, name := range []string{"a", "b"} {
		id := holdID("publish-" + name)
		h.must(0, "", "run", "--complete", string(id), "--", "sh", "-c", stage)
		rec := h.record(id)
		if rec == nil || rec.Status != "done" {
			t.Fatalf("%s: record %+v, want done", name, rec)
		}
		got, err := os.ReadFile(filepath.Join(h.root, "public", string(id), "crashes", "id:000000,sig:11,src:000000,time:12,op:havoc,rep:2"))
		if err != nil || string(got) != "crash of "+string(id)+"\n" {
			t.Errorf("%s: published crash %q, %v", name, got, err)
		}
		if _, err := os.Stat(filepath.Join(h.root, "public", string(id), "fuzzer_stats")); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(h.root, "stage", string(id)+".1")); !os.IsNotExist(err) {
			t.Errorf("%s: the staging directory is still there (%v)", name, err)
		}
	}
	h.must(0, "", "fsck")
	// An empty LEASE_STAGE publishes nothing and completes as before.
	id := holdID("publish-nothing")
	h.must(0, "", "run", "--complete", string(id), "--", "true")
	if _, err := os.Stat(filepath.Join(h.root, "public", string(id))); !os.IsNotExist(err) {
		t.Errorf("an empty stage was published (%v)", err)
	}
}

// TestRunCompletePublishRefused: a result that cannot be published leaves
// the item not done, counts an attempt, and keeps what was staged.
func TestRunCompletePublishRefused(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("publish-refused")
	if err := os.MkdirAll(filepath.Join(h.root, "public", string(id)), 0o755); err != nil {
		t.Fatal(err)
	}
	r := h.lease("", "run", "--complete", string(id), "--", "sh", "-c", `echo finding > "$LEASE_STAGE/crash"`)
	if r.code != 125 || !strings.Contains(r.errOut, "not done") {
		t.Fatalf("%s\nwant exit 125 and the item not done", r)
	}
	rec := h.record(id)
	if rec == nil || rec.Status != "released" {
		t.Fatalf("record %+v, want released", rec)
	}
	if got, err := os.ReadFile(filepath.Join(h.root, "stage", string(id)+".1", "crash")); err != nil || string(got) != "finding\n" {
		t.Errorf("the staged result: %q, %v", got, err)
	}
	full := h.must(0, "", "status", "--json", string(id)).out
	if !strings.Contains(full, `"attempts":1`) || !strings.Contains(full, "cannot be published") {
		t.Errorf("status: %s", full)
	}
}

// TestRunCompleteCountsAttempts: with --complete, a command that fails
// counts an attempt with its status and the end of its stderr, and the
// item becomes failed at max_attempts; a command stopped by a signal sent
// to lease run counts none.
func TestRunCompleteCountsAttempts(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("poison")
	h.must(0, string(id)+"\n", "add")
	for attempt := 1; attempt <= 2; attempt++ {
		r := h.lease("", "run", "--next", "--complete", "--max-attempts", "2", "--", "sh", "-c", `echo "parse error at byte 7" >&2; exit 3`)
		if r.code != 3 || !strings.Contains(r.errOut, "parse error at byte 7") {
			t.Fatalf("attempt %d: %s\nwant the command's 3 and its stderr passed through", attempt, r)
		}
	}
	out := h.must(0, "", "status", "--json", string(id)).out
	if !strings.Contains(out, `"status":"failed"`) || !strings.Contains(out, `"attempts":2`) || !strings.Contains(out, `"exit_status":3`) ||
		!strings.Contains(out, `"stderr_tail":"parse error at byte 7"`) {
		t.Errorf("after 2 failed runs: %s", out)
	}
	if r := h.lease("", "run", "--next", "--complete", "--", "true"); r.code != 123 {
		t.Errorf("run --next with only a failed item: %s\nwant 123 (nothing left to do)", r)
	}
	// Stopped by a signal to lease run: released, no attempt counted.
	other := holdID("stopped")
	p := h.start("run", "--complete", string(other), "--", "sh", "-c", `trap 'exit 9' TERM; echo ready; while :; do sleep 0.05; done`)
	p.expect("ready")
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(); code != 9 {
		t.Errorf("lease run exited %d, want 9", code)
	}
	if out := h.must(0, "", "status", "--json", string(other)).out; !strings.Contains(out, `"status":"released"`) || !strings.Contains(out, `"attempts":0`) {
		t.Errorf("stopped by SIGTERM: %s", out)
	}
}

// TestRunInput: an item added with its content finds it at LEASE_INPUT;
// one without gets LEASE_INPUT empty, whatever lease run inherited.
func TestRunInput(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	seed := filepath.Join(h.dir, "seed")
	os.WriteFile(seed, []byte("GIF89a seed\n"), 0o644)
	r := h.must(0, "", "add", "--content", seed)
	id := leasefmt.ID(strings.TrimSpace(r.out))
	if want := h.must(0, "", "id", "--content", seed).out; r.out != want {
		t.Fatalf("add --content printed %q, want lease id --content's %q", r.out, want)
	}
	r = h.must(0, "", "run", "--next", "--complete", "--", "sh", "-c", `cat "$LEASE_INPUT"; echo "$LEASE_INPUT"`)
	want := "GIF89a seed\n" + filepath.Join(h.root, "input", queueShard(id), string(id)) + "\n"
	if r.out != want {
		t.Errorf("the command printed %q, want %q", r.out, want)
	}
	cmd := h.command("run", string(holdID("no-input")), "--", "sh", "-c", `echo "[$LEASE_INPUT]"`)
	cmd.Env = append(cmd.Env, "LEASE_INPUT=/etc/passwd")
	out, err := cmd.Output()
	if err != nil || string(out) != "[]\n" {
		t.Errorf("an item without input: %q, %v; want LEASE_INPUT empty", out, err)
	}
}
