package commands_test

// lease work as real processes: one worker goes on past items that fail,
// are poisoned, are lost or cannot be published, waits for a busy queue
// without losing the lease it then gets, stops on a signal releasing its
// item (no attempt), leaves nothing running when killed with -9, stops on
// a table error with its exit status, and runs under mpirun from a script.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"github.com/leasetool/lease/internal/proctree"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/leasefmt"
)

// workItem is one --json object of lease work.
type workItem struct {
	Command     string `json:"command"`
	Item        int    `json:"item"`
	ID          string `json:"id"`
	Token       int64  `json:"token"`
	ChildStatus *int   `json:"child_status"`
	Lost        bool   `json:"lost"`
	Finish      string `json:"finish"`
	Attempts    int64  `json:"attempts"`
	End         string `json:"end"`
	Exit        int    `json:"exit"`
	Items       int    `json:"items"`
	Finishes    map[string]int
	Stats       struct {
		Lost int64 `json:"lost"`
	} `json:"stats"`
}

// workObjects parses the JSON lines of lease work's stderr: the items,
// then the end.
func workObjects(t *testing.T, errOut string) (items []workItem, end workItem) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(errOut))
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var w workItem
		if err := json.Unmarshal([]byte(l), &w); err != nil {
			t.Fatalf("lease work --json line %q: %v", l, err)
		}
		if w.End != "" {
			end = w
			continue
		}
		items = append(items, w)
	}
	return items, end
}

// workAdd adds items named name-0 ... name-(n-1), with their content.
func (h *holdTable) workAdd(name string, n int) []leasefmt.ID {
	h.t.Helper()
	var files []string
	for i := 0; i < n; i++ {
		f := filepath.Join(h.dir, fmt.Sprintf("%s-%d", name, i))
		if err := os.WriteFile(f, []byte(fmt.Sprintf("%s-%d\n", name, i)), 0o644); err != nil {
			h.t.Fatal(err)
		}
		files = append(files, f)
	}
	out := h.must(0, "", append([]string{"add", "--content"}, files...)...).out
	var ids []leasefmt.ID
	for _, l := range strings.Fields(out) {
		ids = append(ids, leasefmt.ID(l))
	}
	if len(ids) != n {
		h.t.Fatalf("add --content printed %q", out)
	}
	return ids
}

// TestWorkCampaign: one worker does every item of the queue in one
// process; a poison item that always fails is released with an attempt
// counted each time and ends failed at max_attempts, with its exit status
// and stderr; the worker goes on and exits 0 once the queue is empty.
// Each item's staged result is published as public/ID/.
func TestWorkCampaign(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	ids := h.workAdd("seed", 5)
	poison := h.workAdd("poison", 1)[0]
	script := `if grep -q poison "$LEASE_INPUT"; then echo "harness: bad input" >&2; exit 7; fi
mkdir "$LEASE_STAGE/crashes" && cp "$LEASE_INPUT" "$LEASE_STAGE/crashes/id:000000,sig:11"
echo "$PPID" >> "$LEASE_ROOT/../supervisors"`
	r := h.lease("", "work", "--json", "--max-attempts", "2", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("%s\nwant exit 0: the queue is empty", r)
	}
	items, end := workObjects(t, r.errOut)
	if len(items) != 7 || end.End != "empty" || end.Items != 7 || end.Finishes["done"] != 5 || end.Finishes["failed"] != 1 || end.Finishes["released"] != 1 {
		t.Errorf("%d items, end %+v; want 5 done, the poison one released then failed\n%s", len(items), end, r.errOut)
	}
	for _, it := range items {
		if it.ID == string(poison) && (it.ChildStatus == nil || *it.ChildStatus != 7 || it.Attempts == 0) {
			t.Errorf("poison item: %+v", it)
		}
	}
	if n := strings.Count(r.errOut, "harness: bad input"); n != 2 {
		t.Errorf("the poison item ran %d times, want 2 (max_attempts)", n)
	}
	for _, id := range ids {
		if rec := h.record(id); rec == nil || rec.Status != "done" {
			t.Errorf("item %s: %+v, want done", id, rec)
		}
		got, err := os.ReadFile(filepath.Join(h.root, "public", string(id), "crashes", "id:000000,sig:11"))
		if err != nil || !strings.HasPrefix(string(got), "seed-") {
			t.Errorf("item %s: published %q, %v", id, got, err)
		}
	}
	full := h.must(0, "", "status", "--json", string(poison)).out
	if !strings.Contains(full, `"status":"failed"`) || !strings.Contains(full, `"attempts":2`) || !strings.Contains(full, `"exit_status":7`) ||
		!strings.Contains(full, "harness: bad input") {
		t.Errorf("the poison item: %s", full)
	}
	// One process for the whole campaign, and one supervisor: every item's
	// command had the same parent.
	data, _ := os.ReadFile(filepath.Join(h.dir, "supervisors"))
	sups := strings.Fields(string(data))
	if len(sups) != 5 || sups[0] != sups[4] || sups[1] != sups[4] {
		t.Fatalf("the items' parents: %q, want one supervisor for the worker", data)
	}
	h.must(0, "", "fsck")
}

// TestWorkVerbose: -v prints one line per item and one at the end, and
// nothing of the renewals: each item's CMD waits until a renewal has moved
// its record's expires_at (the 60 s ttl cannot run out meanwhile).
func TestWorkVerbose(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	h.workAdd("v", 3)
	r := h.must(0, "", "work", "-v", "--ttl", "60", "--renew-interval", "0.2", "--", "sh", "-c", renewedScript)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(r.errOut), "\n") {
		lines = append(lines, l)
	}
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "lease work: item 1: ") || !strings.Contains(lines[0], "exit 0, done") ||
		!strings.HasPrefix(lines[3], "lease work: empty after 3 items: done 3") {
		t.Errorf("-v printed:\n%s", r.errOut)
	}
}

// renewedScript is a CMD that ends once a renewal has moved its lease's
// expires_at, as lease status shows it, past what it was when CMD began;
// it exits 9 when it cannot read expires_at.
const renewedScript = `expires() { lease status --json "$LEASE_ID" | sed -n 's/.*"expires_at":\([0-9.e+]*\).*/\1/p'; }
e0=$(expires)
[ -n "$e0" ] || exit 9
while [ "$(expires)" = "$e0" ]; do sleep 0.05; done`

// TestWorkOwner: without --owner a worker's leases carry USER@HOST/PID
// (with the rank of a launcher's task), so that the workers of one host
// are told apart; --owner and LEASE_OWNER still name it.
func TestWorkOwner(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	h.workAdd("owner", 2)
	r := h.must(0, "", "work", "--max-items", "1", "--", "sh", "-c", `lease status --json "$LEASE_ID"`)
	var rec holdStatus
	json.Unmarshal([]byte(r.out), &rec)
	parts := strings.Split(rec.Owner, "/")
	if len(parts) != 2 || !strings.Contains(parts[0], "@") || parts[1] == "" {
		t.Errorf("owner %q, want USER@HOST/PID", rec.Owner)
	}
	cmd := h.command("run", "--next", "--", "sh", "-c", `lease status --json "$LEASE_ID"`)
	cmd.Env = append(cmd.Env, "SLURM_PROCID=3")
	out, err := cmd.Output()
	json.Unmarshal(out, &rec)
	if err != nil || !strings.Contains(rec.Owner, "/rank-3/") {
		t.Errorf("lease run with SLURM_PROCID=3: owner %q (%v), want USER@HOST/rank-3/PID", rec.Owner, err)
	}
	h.must(0, "", "retry", "--failed") // nothing failed: retry --failed of none is fine
	h.workAdd("named", 1)
	r = h.must(0, "", "work", "--owner", "host-a/fuzz-1", "--max-items", "1", "--", "sh", "-c", `lease status --json "$LEASE_ID"`)
	json.Unmarshal([]byte(r.out), &rec)
	if rec.Owner != "host-a/fuzz-1" {
		t.Errorf("--owner host-a/fuzz-1: owner %q", rec.Owner)
	}
}

// TestWorkWaitsForBusyQueue: the only item is held by another lease for
// longer than the worker's ttl - clock_skew - grace; the worker waits,
// takes it once the holder releases it, and keeps it: the lost point
// counts from the claim that granted it, not from before the wait.
func TestWorkWaitsForBusyQueue(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := h.workAdd("busy", 1)[0]
	held := h.must(0, "", "claim", "--ttl", "600", string(id)).out
	// The worker's lease is told to stop ttl - clock_skew - grace = 20 -
	// 0.1 - 8 = 11.9 s after the claim (or renewal, every 0.5 s) that began
	// it: far enough that it is not reached by accident once granted (at
	// load 38 a renewal took more than 5.9 s).
	// The item stays held until the test releases it, past that point
	// counted from before the wait.
	begin := time.Now()
	p := h.start("work", "--json", "--ttl", "20", "--renew-interval", "0.5", "--grace", "8", "--", "sh", "-c",
		`echo "granted $LEASE_TOKEN"; while [ ! -e "$LEASE_ROOT/../stop" ]; do sleep 0.05; done`)
	time.Sleep(time.Until(begin.Add(15 * time.Second))) // a lower bound on the wait (3 s for lease to start), not a timing assertion
	if rec := h.record(id); rec.Token != 1 || rec.Status != "leased" {
		t.Fatalf("the worker took a held item: %+v\n%s", rec, stderrOf(p))
	}
	h.must(0, held, "release")
	p.expect("granted 2")
	// A renewal after the grant: the lease was not declared lost at once.
	h.waitRenewed(p, id, 2, h.rawRecord(id).ExpiresAt)
	if err := os.WriteFile(filepath.Join(h.dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code := p.wait()
	errOut := stderrOf(p)
	items, end := workObjects(t, errOut)
	if code != 0 || len(items) != 1 || items[0].Lost || items[0].Finish != "done" || end.End != "empty" || strings.Contains(errOut, "lease lost") {
		t.Fatalf("lease work: exit %d\n%s\nwant the item taken after the wait and done, not lost", code, errOut)
	}
	if rec := h.record(id); rec == nil || rec.Status != "done" || rec.Token != 2 {
		t.Errorf("record %+v, want done with token 2", rec)
	}
}

// TestWorkLostLeaseIsNoAttempt: a lease lost while CMD runs (revoked)
// stops CMD; that run is no attempt, and the worker goes on: it claims
// the item again and finishes it.
func TestWorkLostLeaseIsNoAttempt(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := h.workAdd("lost", 1)[0]
	script := `if [ ! -e "$LEASE_ROOT/../revoked" ]; then touch "$LEASE_ROOT/../revoked"; lease revoke "$LEASE_ID" > /dev/null; sleep 30; fi`
	r := h.lease("", "work", "--json", "--max-attempts", "1", "--grace", "1", "--", "sh", "-c", script)
	items, end := workObjects(t, r.errOut)
	if r.code != 0 || len(items) != 2 || !items[0].Lost || items[0].Finish != "lost" || items[1].Finish != "done" || end.Stats.Lost != 1 {
		t.Fatalf("%s\nwant a lost run, then the item done (max_attempts 1: a lost run counted would fail it)", r)
	}
	if rec := h.record(id); rec == nil || rec.Status != "done" {
		t.Errorf("record %+v", rec)
	}
	if full := h.must(0, "", "status", "--json", string(id)).out; !strings.Contains(full, `"attempts":0`) {
		t.Errorf("a lost run counted an attempt: %s", full)
	}
}

// TestWorkOwnSignalIsAnAttempt: a CMD killed by a signal lease work did
// not send (a crash) is a failed run.
func TestWorkOwnSignalIsAnAttempt(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := h.workAdd("segv", 1)[0]
	r := h.lease("", "work", "--max-attempts", "1", "--", "sh", "-c", `kill -SEGV $$`)
	if r.code != 0 {
		t.Fatalf("%s", r)
	}
	full := h.must(0, "", "status", "--json", string(id)).out
	if !strings.Contains(full, `"status":"failed"`) || !strings.Contains(full, `"exit_status":139`) {
		t.Errorf("a CMD killed by SIGSEGV: %s, want failed with exit status 139", full)
	}
}

// TestWorkSignal: SIGTERM (or SIGINT) stops the worker: CMD's whole tree
// is stopped, the item is released with no attempt counted, and lease
// work exits 128+n. A signal while it waits for a busy queue ends the
// wait.
func TestWorkSignal(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			h := newHoldTable(t)
			id := h.workAdd("stop", 1)[0]
			// The tree ignores the signal: it is stopped by SIGKILL after the grace.
			script := "trap '' INT TERM\n" + treeScript
			p := h.start("work", "--grace", "1", "--max-attempts", "1", "--", "sh", "-c", script)
			p.expect("ready")
			pids := treePids(t, h.dir)
			p.cmd.Process.Signal(sig)
			if code := p.wait(); code != 128+int(sig) {
				t.Errorf("lease work exited %d, want %d\n%s", code, 128+int(sig), p.errOut)
			}
			treeGone(t, sig.String(), pids)
			full := h.must(0, "", "status", "--json", string(id)).out
			if !strings.Contains(full, `"status":"released"`) || !strings.Contains(full, `"attempts":0`) {
				t.Errorf("after the stop: %s", full)
			}
		})
	}
	t.Run("waiting", func(t *testing.T) {
		h := newHoldTable(t)
		id := h.workAdd("held", 1)[0]
		h.must(0, "", "claim", "--ttl", "600", string(id))
		p := h.start("work", "-v", "--", "true")
		time.Sleep(300 * time.Millisecond) // not a timing assertion: the signal may come before or during the wait
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.wait(); code != 143 {
			t.Errorf("lease work exited %d while waiting, want 143\n%s", code, p.errOut)
		}
	})
}

// TestWorkKilled: kill -9 of lease work leaves nothing of CMD's tree
// running; the item expires and the next worker takes it over and
// finishes it, no attempt counted.
func TestWorkKilled(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := h.workAdd("killed", 1)[0]
	p := h.start("work", "--ttl", "2", "--renew-interval", "0.5", "--grace", "1", "--", "sh", "-c",
		`if [ -e "$LEASE_ROOT/../again" ]; then exit 0; fi; touch "$LEASE_ROOT/../again"; `+treeScript)
	p.expect("ready")
	pids := treePids(t, h.dir)
	p.cmd.Process.Kill()
	p.wait()
	treeGone(t, "kill -9", pids)
	r := h.lease("", "work", "--json", "--", "sh", "-c", `exit 0`)
	items, _ := workObjects(t, r.errOut)
	if r.code != 0 || len(items) != 1 || items[0].Finish != "done" || items[0].Token != 2 {
		t.Fatalf("%s\nwant the item taken over (token 2) and done", r)
	}
	if full := h.must(0, "", "status", "--json", string(id)).out; !strings.Contains(full, `"attempts":0`) {
		t.Errorf("%s", full)
	}
	h.must(0, "", "fsck")
}

// TestWorkPublishRefused: a result that cannot be published (public/ID
// is taken) never marks the item done and loses nothing staged: the item
// is released with an attempt counted, and failed at max_attempts; the
// worker goes on with the others.
func TestWorkPublishRefused(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	ids := h.workAdd("pub", 3)
	taken := ids[1]
	os.MkdirAll(filepath.Join(h.root, "public", string(taken), "crashes"), 0o755)
	r := h.lease("", "work", "--json", "--max-attempts", "2", "--", "sh", "-c", `echo "finding $LEASE_TOKEN" > "$LEASE_STAGE/crash"`)
	items, end := workObjects(t, r.errOut)
	if r.code != 0 || len(items) != 4 || end.Finishes["done"] != 2 || end.Finishes["publish-refused"] != 2 {
		t.Fatalf("%s\nwant 2 done and the taken one refused twice", r)
	}
	rec := h.record(taken)
	if rec == nil || rec.Status != "failed" {
		t.Fatalf("the item whose result was refused: %+v, want failed", rec)
	}
	for tok := 1; tok <= 2; tok++ {
		got, err := os.ReadFile(filepath.Join(h.root, "stage", fmt.Sprintf("%s.%d", taken, tok), "crash"))
		if err != nil || string(got) != fmt.Sprintf("finding %d\n", tok) {
			t.Errorf("what token %d staged: %q, %v", tok, got, err)
		}
	}
	// fsck moves the unpublished results to lost+found/, never deletes
	// them: debris, not damage (what made the publish fail, the test's
	// own public/ID/, is damage: exit 1, corrected).
	if r := h.must(4, "", "fsck"); !strings.Contains(r.out, "errors: 1 (orphan-result 1)") || !strings.Contains(r.out, "debris of killed workers: 2 (stale-stage 2)") {
		t.Errorf("%s\nwant the staging directories reported as debris, the planted public/ID/ as the only error", r)
	}
	if r := h.must(1, "", "fsck", "--repair"); !strings.Contains(r.out, "swept stale-stage") {
		t.Errorf("%s", r)
	}
	if _, err := os.Stat(filepath.Join(h.root, "stage", string(taken)+".1")); err == nil {
		t.Error("fsck --repair left the stale staging directory in stage/")
	}
	found := false
	filepath.Walk(filepath.Join(h.root, "lost+found"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && filepath.Base(p) == "crash" {
			found = true
		}
		return nil
	})
	if !found {
		t.Error("the unpublished results are not in lost+found/")
	}
}

// TestWorkTableError: when nothing but a corrupt record is left to claim
// the worker stops with exit 3; a command that cannot run is 127 with
// nothing claimed; bad usage is 2.
func TestWorkTableError(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := h.workAdd("corrupt", 1)[0]
	rec := filepath.Join(h.root, "work", queueShard(id), string(id)+".json")
	os.MkdirAll(filepath.Dir(rec), 0o755)
	os.WriteFile(rec, []byte("{not json\n"), 0o644)
	if r := h.lease("", "work", "--", "true"); r.code != 3 || !strings.Contains(r.errOut, "corrupt") {
		t.Errorf("%s\nwant exit 3", r)
	}
	if r := h.lease("", "work", "--", "no-such-command-here"); r.code != 127 {
		t.Errorf("%s\nwant 127", r)
	}
	for _, args := range [][]string{{"work"}, {"work", "--max-items", "-1", "--", "true"}, {"work", string(id), "--", "true"}} {
		if r := h.lease("", args...); r.code != 2 {
			t.Errorf("%s\nwant 2", r)
		}
	}
}

// TestWorkMaxItems: --max-items N runs N items and exits 0.
func TestWorkMaxItems(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	h.workAdd("max", 3)
	r := h.must(0, "", "work", "--json", "--max-items", "2", "--", "true")
	if items, end := workObjects(t, r.errOut); len(items) != 2 || end.End != "max-items" {
		t.Errorf("%s", r)
	}
	if r := h.must(0, "", "work", "--json", "--", "true"); !strings.Contains(r.errOut, `"items":1,`) {
		t.Errorf("%s", r)
	}
}

// TestWorkSupervisorKilled: when the worker's supervisor is killed (not
// the worker), the item's run ends as killed by SIGKILL, and the next item
// gets a new supervisor: the worker goes on (the killed run is released,
// no attempt counted: see TestWorkKillPatterns). A supervisor process is
// what a worker has where CMD gets no cgroup; LEASE_SUPERVISOR=process
// asks for it here too.
func TestWorkSupervisorKilled(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	h.extraEnv = []string{proctree.ModeEnv + "=process"}
	h.workAdd("sup", 2)
	script := `echo $PPID >> "$LEASE_ROOT/../parents"
if [ ! -e "$LEASE_ROOT/../killed" ]; then touch "$LEASE_ROOT/../killed"; kill -KILL $PPID; sleep 30; fi`
	r := h.lease("", "work", "--json", "--", "sh", "-c", script)
	items, end := workObjects(t, r.errOut)
	if r.code != 0 || end.Finishes["done"] != 2 || len(items) != 3 {
		t.Fatalf("%s\nwant the killed run released and both items done", r)
	}
	data, _ := os.ReadFile(filepath.Join(h.dir, "parents"))
	if p := strings.Fields(string(data)); len(p) != 3 || p[0] == p[1] || p[1] != p[2] {
		t.Errorf("the runs' supervisors: %q, want a new one after the first was killed", data)
	}
}

// TestWorkSignalInLastItem: SIGTERM while the last item of --max-items
// runs stops the worker as any SIGTERM does, exit 143; it exited 0.
func TestWorkSignalInLastItem(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	h.workAdd("last", 2)
	p := h.start("work", "--max-items", "1", "--grace", "1", "--", "sh", "-c", "echo ready; sleep 30 & wait")
	p.expect("ready")
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(); code != 143 {
		t.Errorf("lease work --max-items 1 stopped by SIGTERM in its item: exit %d, want 143\n%s", code, p.errOut)
	}
}

// TestWorkManyItemsFewDescriptors: a worker runs for days, so nothing it
// or its supervisor holds open may grow with the items done. Under a
// limit of 128 descriptors one worker publishes 200 staged result trees:
// before, the worker kept the handles of every published tree and the
// supervisor the pidfd of every command, and the worker stopped with "too
// many open files" after about a hundred items.
func TestWorkManyItemsFewDescriptors(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	const n = 200
	var in strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintln(&in, holdID(fmt.Sprintf("fd-%d", i)))
	}
	h.must(0, in.String(), "add")
	script := `mkdir "$LEASE_STAGE/crashes" && echo "$LEASE_ID" > "$LEASE_STAGE/crashes/id:000000"`
	cmd := h.command()
	cmd.Path = "/bin/sh"
	cmd.Args = []string{"sh", "-c", `ulimit -n 128 && exec lease work -- sh -c "$1"`, "sh", script}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("lease work under ulimit -n 128: %v\n%s", err, out)
	}
	ents, err := os.ReadDir(filepath.Join(h.root, "public"))
	if err != nil || len(ents) != n {
		t.Fatalf("%d results published (%v), want %d\n%s", len(ents), err, n, out)
	}
	h.must(0, "", "fsck")
}

// TestWorkOneCgroupForAllItems: where CMD gets a cgroup of its own, a
// worker makes one and runs every CMD in it, emptied between them (a
// cgroup made and removed an item was 3% of the worker's CPU): each
// item's CMD finds itself alone in the same cmd-N, with its own
// supervisor process or without one; an item whose CMD left a process
// behind (killed at its end) leaves it empty for the next all the same.
// On the old code each CMD had a cmd-N of its own (cmd-1, cmd-2, ...).
func TestWorkOneCgroupForAllItems(t *testing.T) {
	t.Parallel()
	if !proctree.Cgroups() {
		testenv.Missing(t, "cgroup", "no delegated cgroup v2 with cgroup.kill (Linux 5.14) here")
	}
	for _, sup := range []string{"auto", "process"} {
		t.Run(sup, func(t *testing.T) {
			t.Parallel()
			h := newHoldTable(t)
			h.extraEnv = []string{proctree.ModeEnv + "=" + sup, "CGMNT=" + cgroupMount(t)}
			ids := h.workAdd("cg-"+sup, 3)
			// Each CMD records its cgroup and the processes in it, and
			// leaves a sleep behind (in its cgroup, out of its process
			// group), which the worker kills once CMD has exited.
			script := `cg=$CGMNT$(sed -n 's/^0:://p' /proc/self/cgroup)
echo "$cg" > "$LEASE_ROOT/../cg-$LEASE_ID"
wc -l < "$cg/cgroup.procs" > "$LEASE_ROOT/../procs-$LEASE_ID"
setsid sleep 60 &`
			h.must(0, "", "work", "--grace", "1", "--max-items", "3", "--", "sh", "-c", script)
			var first string
			for i, id := range ids {
				cg, err := os.ReadFile(filepath.Join(h.dir, "cg-"+string(id)))
				if err != nil {
					t.Fatal(err)
				}
				if !regexp.MustCompile(`/lease-\d+-[0-9a-f]{12}/cmd-\d+\n$`).Match(cg) {
					t.Fatalf("item %d's CMD ran in cgroup %q, want a cmd-N of the worker's group", i, cg)
				}
				if i == 0 {
					first = string(cg)
				} else if string(cg) != first {
					t.Errorf("item %d's CMD ran in cgroup %q, item 0's in %q: want one cgroup for all the worker's items", i, cg, first)
				}
				// sh and wc (the sed of $(...) is gone): never the sleep
				// an earlier CMD left.
				procs, err := os.ReadFile(filepath.Join(h.dir, "procs-"+string(id)))
				if n, _ := strconv.Atoi(strings.TrimSpace(string(procs))); err != nil || n != 2 {
					t.Errorf("item %d's cgroup had %q processes as its CMD ran (%v), want its own alone", i, procs, err)
				}
			}
			// Gone with the worker: the group, and the cmd-N kept in it.
			group := filepath.Dir(strings.TrimSpace(first))
			testenv.WaitFor(t, "the worker's cgroup removed", holdWait, func() bool {
				_, err := os.Stat(group)
				return os.IsNotExist(err)
			})
		})
		// Two cgroups are not reused: one that got cgroup.kill (the first
		// CMD leaves a process that ignores SIGTERM, killed through
		// cgroup.kill after the grace; on Linux 6.18 a CMD started in
		// that cgroup was killed as it started), and one CMD made a
		// cgroup below (as root it could enable controllers there, and
		// the kernel would refuse the next CMD). The next CMD runs in a
		// new cgroup.
		for _, tc := range []struct{ name, first string }{
			{"killed", `setsid sh -c "trap '' TERM; touch ready; exec sleep 60" &
	until [ -e ready ]; do sleep 0.01; done`},
			{"nested", `mkdir "$CGMNT$(sed -n 's/^0:://p' /proc/self/cgroup)/inner"`},
		} {
			t.Run(sup+"-"+tc.name, func(t *testing.T) {
				t.Parallel()
				h := newHoldTable(t)
				mnt := cgroupMount(t)
				h.extraEnv = []string{proctree.ModeEnv + "=" + sup, "CGMNT=" + mnt}
				ids := h.workAdd("cg"+tc.name+"-"+sup, 2)
				script := `sed -n 's/^0:://p' /proc/self/cgroup > "$LEASE_ROOT/../cg-$LEASE_ID"
if mkdir "$LEASE_ROOT/../first" 2>/dev/null; then
	` + tc.first + `
fi`
				r := h.must(0, "", "work", "--json", "--grace", "0.2", "--", "sh", "-c", script)
				if _, end := workObjects(t, r.errOut); end.Finishes["done"] != 2 {
					t.Fatalf("%s\nwant both items done", r)
				}
				a, _ := os.ReadFile(filepath.Join(h.dir, "cg-"+string(ids[0])))
				b, _ := os.ReadFile(filepath.Join(h.dir, "cg-"+string(ids[1])))
				if len(a) == 0 || len(b) == 0 || string(a) == string(b) {
					t.Errorf("the two CMDs' cgroups: %q and %q, want two", a, b)
				}
				// Nothing is left of them once the worker is gone, the
				// cgroup CMD made below its own included.
				if m := regexp.MustCompile(`/lease-\d+-[0-9a-f]{12}`).FindString(string(a)); m != "" {
					testenv.WaitFor(t, "the worker's cgroup removed", holdWait, func() bool {
						_, err := os.Stat(mnt + m)
						return os.IsNotExist(err)
					})
				}
			})
		}
	}
}

// cgroupMount is the cgroup2 mount point (/proc/self/mountinfo).
func cgroupMount(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.Contains(l, " - cgroup2 ") {
			return f[4]
		}
	}
	t.Fatal("no cgroup2 mount")
	return ""
}
