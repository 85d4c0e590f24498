package commands_test

// The table's work queue (docs/design.md#queue, #cli): lease add, claim --next [--wait],
// run --next, status --summary and fsck's queue checks, through the
// commands as scripts run them.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/leasefmt"
)

// queueEntries lists the IDs that have an entry in queue/ (any shard).
func queueEntries(t *testing.T, root string) map[leasefmt.ID]string {
	t.Helper()
	out := map[leasefmt.ID]string{}
	shards, _ := os.ReadDir(filepath.Join(root, "queue"))
	for _, sh := range shards {
		ents, err := os.ReadDir(filepath.Join(root, "queue", sh.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			out[leasefmt.ID(e.Name())] = sh.Name()
		}
	}
	return out
}

// queueRecordShard is the work shard directory name of id in a 16-shard
// table, from docs/design.md#layout alone.
func queueShard(id leasefmt.ID) string {
	var shard uint64
	fmt.Sscanf(string(id[:8]), "%x", &shard)
	return fmt.Sprintf("%02x", shard%16)
}

func TestAddIsIdempotent(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("add", 20)
	r := coreMust(t, 0, coreJoin(ids, ""), "add", "--root", root)
	if r.out != coreJoin(ids, "") {
		t.Fatalf("add printed %q, want every ID once in input order", r.out)
	}
	q := queueEntries(t, root)
	if len(q) != len(ids) {
		t.Fatalf("%d entries, want %d", len(q), len(ids))
	}
	for _, id := range ids {
		if q[id] != queueShard(id) {
			t.Errorf("%s queued in shard %q, want %s", id, q[id], queueShard(id))
		}
		fi, err := os.Stat(filepath.Join(root, "queue", queueShard(id), string(id)))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
			t.Errorf("entry of %s: %v %v, want an empty regular file", id, fi, err)
		}
	}
	// Again, with ID TOKEN lines, a repeated line and a new ID: only the
	// new one is added, and nothing is reported as a failure.
	extra := coreID("add-extra")
	in := string(ids[0]) + " 7\n" + coreJoin(ids[:5], "") + string(extra) + "\n" + string(extra) + "\n"
	r = coreMust(t, 0, in, "add", "--root", root, "-v")
	if r.out != string(extra)+"\n" {
		t.Errorf("second add printed %q, want only the new ID once", r.out)
	}
	if !strings.Contains(r.errOut, "queued=7") || !strings.Contains(r.errOut, "ok=1") {
		t.Errorf("-v counts: %q, want ok=1 queued=7", r.errOut)
	}
	// A done item is not queued again.
	claimed := coreMust(t, 0, "", "claim", "--root", root, string(ids[0]))
	coreMust(t, 0, claimed.out, "complete", "--root", root)
	if _, ok := queueEntries(t, root)[ids[0]]; ok {
		t.Errorf("complete left the queue entry of %s", ids[0])
	}
	r = coreMust(t, 0, string(ids[0])+"\n", "add", "--root", root, "--json")
	var doc struct {
		Counts map[string]int `json:"counts"`
		Exit   int            `json:"exit"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil || doc.Counts["done"] != 1 || doc.Exit != 0 {
		t.Errorf("add of a done item: %s (%v), want counts done=1, exit 0", r.out, err)
	}
	if _, ok := queueEntries(t, root)[ids[0]]; ok {
		t.Errorf("a done item was queued again")
	}
}

// TestAddBadInputChangesNothing: a malformed line anywhere refuses the
// whole input (exit 2) and creates no entry.
func TestAddBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	good := coreJoin(coreIDs("bad", 5), "")
	before := coreSnapshot(t, root)
	for _, in := range []string{
		good + "not-an-id\n",
		good + strings.ToUpper(string(coreID("x"))) + "\n",
		good + string(coreID("x")) + " 1 2\n",
		good + string(coreID("x")) + " NaN\n",
		good + "../../etc/passwd\n",
		good + strings.Repeat("a", 5000) + "\n",
	} {
		r := coreLease(t, in, "add", "--root", root)
		if r.code != 2 || r.out != "" || len(r.errOut) > 600 {
			t.Errorf("add of bad input: %s, want exit 2, nothing on stdout, a bounded message", r)
		}
	}
	coreSame(t, "bad add input", before, coreSnapshot(t, root))
}

// TestAddFilesNotIDsHintsContent: lease add corpus/* (files that are
// not lists of IDs) is exit 2 as any bad line, and says that --content
// queues files; it said "bad ID" only. A bad line on stdin gets no hint.
func TestAddFilesNotIDsHintsContent(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed-1")
	if err := os.WriteFile(seed, []byte("\x89PNG fuzzer input\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := coreSnapshot(t, root)
	r := coreLease(t, "", "add", "--root", root, seed)
	if r.code != 2 || r.out != "" || !strings.Contains(r.errOut, seed+":1: malformed line") || !strings.Contains(r.errOut, "--content") || len(r.errOut) > 600 {
		t.Errorf("add of a file that is not a list of IDs: %s, want exit 2, the bad line and a hint at --content", r)
	}
	if r := coreLease(t, "not-an-id\n", "add", "--root", root); r.code != 2 || strings.Contains(r.errOut, "--content") {
		t.Errorf("add of a bad line on stdin: %s, want exit 2 and no hint", r)
	}
	one := filepath.Join(dir, "seed-2")
	os.WriteFile(one, []byte("crash\n"), 0o644)
	if r := coreLease(t, "", "add", "--root", root, one); r.code != 2 || !strings.Contains(r.errOut, one+":1: bad ID") || !strings.Contains(r.errOut, "--content") {
		t.Errorf("add of a file of one word: %s, want exit 2, bad ID and a hint at --content", r)
	}
	coreSame(t, "add of files not IDs", before, coreSnapshot(t, root))
}

func TestClaimNextEmptyBusyAndWait(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	// Nothing queued: empty.
	r := coreMust(t, 1, "", "claim", "--root", root, "--next", "1")
	if !strings.HasPrefix(r.errOut, "empty:") || r.out != "" {
		t.Fatalf("empty queue: %s, want a line starting with empty:", r)
	}
	ids := coreIDs("next", 3)
	coreMust(t, 0, coreJoin(ids, ""), "add", "--root", root)
	r = coreMust(t, 0, "", "claim", "--root", root, "--next", "2", "--ttl", "2", "--clock-skew", "0")
	got := coreLines(t, r.out)
	if len(got) != 2 || r.errOut != "" {
		t.Fatalf("claim --next 2: %s, want two grants and nothing on stderr", r)
	}
	r = coreMust(t, 0, "", "claim", "--root", root, "--next", "5", "--ttl", "2", "--clock-skew", "0", "--json")
	var doc struct {
		Results []struct {
			ID string `json:"id"`
		} `json:"results"`
		Queue struct {
			Answer string `json:"answer"`
			Held   int    `json:"held"`
		} `json:"queue"`
		Exit int `json:"exit"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil || len(doc.Results) != 1 || doc.Queue.Answer != "granted" || doc.Queue.Held != 2 {
		t.Fatalf("claim --next 5 of the one left: %s (%v), want 1 result, answer granted, held 2", r.out, err)
	}
	for _, x := range doc.Results {
		got[leasefmt.ID(x.ID)] = "1"
	}
	if len(got) != 3 {
		t.Fatalf("granted %v, want the 3 queued items each once", got)
	}
	// Everything held: busy, not empty.
	r = coreMust(t, 1, "", "claim", "--root", root, "--next", "1")
	if !strings.HasPrefix(r.errOut, "busy:") {
		t.Fatalf("all held: %s, want a line starting with busy:", r)
	}
	// --wait=SECONDS gives up busy after about that long.
	start := time.Now()
	r = coreMust(t, 1, "", "claim", "--root", root, "--next", "1", "--wait=0.3")
	if !strings.HasPrefix(r.errOut, "busy:") || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("--wait=0.3 on a busy queue: %s after %v, want busy after 0.3 s", r, time.Since(start))
	}
	// --wait: the first lease expires after 2 s and is granted again with
	// a larger token; --wait N (a separate argument) works too.
	r = coreMust(t, 0, "", "claim", "--root", root, "--next", "1", "--clock-skew", "0", "--wait", "30")
	for id, tok := range coreLines(t, r.out) {
		if got[id] == "" || tok != "2" {
			t.Errorf("after expiry: %s %s, want one of the queued items with token 2", id, tok)
		}
	}
	// Complete everything: the queue is empty, and claim says so.
	var all strings.Builder
	for id := range got {
		coreMust(t, 0, "", "revoke", "--root", root, string(id))
	}
	for i := 0; i < 3; i++ {
		r := coreMust(t, 0, "", "claim", "--root", root, "--next", "1")
		all.WriteString(r.out)
	}
	coreMust(t, 0, all.String(), "complete", "--root", root)
	if q := queueEntries(t, root); len(q) != 0 {
		t.Errorf("entries left after every item was completed: %v", q)
	}
	r = coreMust(t, 1, "", "claim", "--root", root, "--next", "1", "--wait")
	if !strings.HasPrefix(r.errOut, "empty:") {
		t.Errorf("--wait on an empty queue: %s, want empty at once", r)
	}
}

// TestClaimNextCleansDoneEntries: an entry of a done item (a complete
// killed between done and the removal, or another program's entry) is
// removed by the claim that meets it, silently, and the claim goes on.
func TestClaimNextCleansDoneEntries(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("clean", 4)
	coreMust(t, 0, coreJoin(ids, ""), "add", "--root", root)
	var held strings.Builder
	for _, id := range ids[:3] {
		held.WriteString(coreMust(t, 0, "", "claim", "--root", root, string(id)).out)
	}
	coreMust(t, 0, held.String(), "complete", "--root", root)
	for _, id := range ids[:3] { // as if each complete died before the removal
		if err := os.WriteFile(filepath.Join(root, "queue", queueShard(id), string(id)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := coreMust(t, 0, "", "claim", "--root", root, "--next", "1", "-v")
	if !strings.HasPrefix(r.out, string(ids[3])+" 1") {
		t.Fatalf("claim --next: %s, want %s, the one item not done", r, ids[3])
	}
	if strings.Contains(r.errOut, "done ") {
		t.Errorf("done entries reported on stderr: %q", r.errOut)
	}
	q := queueEntries(t, root)
	for _, id := range ids[:3] {
		if _, ok := q[id]; ok && !strings.Contains(r.errOut, "cleaned=") {
			t.Errorf("entry of done %s still there", id)
		}
	}
	coreMust(t, 0, r.out, "complete", "--root", root)
	coreMust(t, 1, "", "claim", "--root", root, "--next", "1")
	if q := queueEntries(t, root); len(q) != 0 {
		t.Errorf("entries of done items left: %v", q)
	}
}

// TestClaimNextProcessesNeverShare: 8 processes claim --next from one
// queue of 120 items and complete what they got, until it is empty: every
// item granted exactly once, each process ends with `empty` (--wait: while
// the last items are held by others, a worker waits for them to finish).
func TestClaimNextProcessesNeverShare(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("share", 120)
	coreMust(t, 0, coreJoin(ids, ""), "add", "--root", root)
	const procs = 8
	script := `err=$(mktemp); while out=$("$LEASE" claim --next 3 --wait --root "$ROOT" 2>"$err"); do
  printf '%s\n' "$out"; printf '%s\n' "$out" | "$LEASE" complete --root "$ROOT" > /dev/null || exit
done; cat "$err" >&2; rm "$err"`
	cmds := make([]*exec.Cmd, procs)
	outs := make([]strings.Builder, procs)
	errs := make([]strings.Builder, procs)
	for i := range cmds {
		cmds[i] = exec.Command("bash", "-c", script)
		cmds[i].Env = append(os.Environ(), "LEASE="+procBin, "ROOT="+root, fmt.Sprintf("LEASE_OWNER=w%d", i))
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &errs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	by := map[leasefmt.ID]int{}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("worker %d: %v: %s", i, err, errs[i].String())
		}
		if !strings.HasPrefix(errs[i].String(), "empty:") {
			t.Errorf("worker %d ended with %q, want empty:", i, errs[i].String())
		}
		for id, tok := range coreLines(t, outs[i].String()) {
			if prev, dup := by[id]; dup {
				t.Errorf("%s granted to workers %d and %d", id, prev, i)
			}
			if tok != "1" {
				t.Errorf("%s granted with token %s, want 1", id, tok)
			}
			by[id] = i
		}
	}
	if len(by) != len(ids) {
		t.Errorf("%d items granted, want %d", len(by), len(ids))
	}
}

// TestRunNextLoop: the one-line worker loop runs every queued item once,
// completes it, and ends with exit 123 when the queue is empty.
func TestRunNextLoop(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("loop", 6)
	coreMust(t, 0, coreJoin(ids, ""), "add", "--root", root)
	log := filepath.Join(t.TempDir(), "log")
	script := `while "$LEASE" run --root "$ROOT" --next --complete -- sh -c 'echo "$LEASE_ID $LEASE_TOKEN" >> "$LOG"; test -d "$LEASE_STAGE"'; do :; done
"$LEASE" run --root "$ROOT" --next -- true; echo "rc=$?"`
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "LEASE="+procBin, "ROOT="+root, "LOG="+log)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "rc=123") || !strings.Contains(string(out), "empty:") {
		t.Fatalf("loop: %v\n%s\nwant it to end with exit 123 (empty)", err, out)
	}
	data, _ := os.ReadFile(log)
	ran := coreLines(t, string(data))
	if len(ran) != len(ids) || strings.Count(string(data), "\n") != len(ids) {
		t.Errorf("ran %q, want each of the %d items once", data, len(ids))
	}
	for _, id := range ids {
		if rec := coreRecord(t, root, id); rec.Status != leasefmt.Done {
			t.Errorf("%s is %s, want done", id, rec.Status)
		}
	}
	// A failing command releases its item: it stays queued and runs again.
	id := coreID("loop-fail")
	coreMust(t, 0, string(id)+"\n", "add", "--root", root)
	if r := coreLease(t, "", "run", "--root", root, "--next", "--complete", "--", "false"); r.code != 1 {
		t.Fatalf("failing command: %s, want its status 1", r)
	}
	if _, ok := queueEntries(t, root)[id]; !ok {
		t.Fatalf("a released item left the queue")
	}
	if r := coreLease(t, "", "run", "--root", root, "--next", "--complete", "--", "true"); r.code != 0 {
		t.Fatalf("rerun: %s", r)
	}
	if rec := coreRecord(t, root, id); rec.Status != leasefmt.Done || rec.Token != 2 {
		t.Errorf("after the rerun: %s token %d, want done with token 2", rec.Status, rec.Token)
	}
	// Busy without --wait is "not granted" (125), not empty.
	id2 := coreID("loop-busy")
	coreMust(t, 0, string(id2)+"\n", "add", "--root", root)
	coreMust(t, 0, "", "claim", "--root", root, string(id2))
	if r := coreLease(t, "", "run", "--root", root, "--next", "--", "true"); r.code != 125 || !strings.Contains(r.errOut, "busy:") {
		t.Errorf("busy queue: %s, want exit 125 busy", r)
	}
}

func TestStatusSummary(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("sum", 10)
	coreMust(t, 0, coreJoin(ids, ""), "add", "--root", root)
	const t0 = 1764450000
	at := func(s float64) string { return fmt.Sprint(t0 + s) }
	held := coreMust(t, 0, coreJoin(ids[:6], ""), "claim", "--root", root, "--now", at(0), "--ttl", "100", "--owner", "w1").out
	lines := strings.SplitAfter(held, "\n")
	coreMust(t, 0, strings.Join(lines[:2], ""), "complete", "--root", root, "--now", at(1))
	coreMust(t, 0, lines[2], "release", "--root", root, "--now", at(1))
	coreMust(t, 0, "", "claim", "--root", root, "--now", at(50), "--ttl", "10", "--owner", "w2 with spaces", string(ids[6]))
	r := coreMust(t, 0, "", "status", "--summary", "--root", root, "--now", at(70), "--json")
	var c struct {
		Queued, Free, Leased, Expired, Committing, Released, Done, Records int64
		Owners                                                             map[string]int64
	}
	if err := json.Unmarshal([]byte(r.out), &c); err != nil {
		t.Fatal(err)
	}
	// queued: 10 - 2 done; free: 3 never claimed; leased: 3 of w1 live at
	// t0+70 (ttl 100); expired: ids[6] (ttl 10 from t0+50); released 1.
	want := struct{ q, f, l, e, rel, d int64 }{8, 3, 3, 1, 1, 2}
	if c.Queued != want.q || c.Free != want.f || c.Leased != want.l || c.Expired != want.e || c.Released != want.rel || c.Done != want.d {
		t.Errorf("summary %+v, want queued %d free %d leased %d expired %d released %d done %d", c, want.q, want.f, want.l, want.e, want.rel, want.d)
	}
	if len(c.Owners) != 1 || c.Owners["w1"] != 3 {
		t.Errorf("owners %v, want w1: 3", c.Owners)
	}
	r = coreMust(t, 0, "", "status", "--summary", "--root", root, "--now", at(55))
	for _, want := range []string{"queued", "free", "done", "\"w2 with spaces\""} {
		if !strings.Contains(r.out, want) {
			t.Errorf("text summary lacks %q:\n%s", want, r.out)
		}
	}
	coreMust(t, 2, "", "status", "--summary", "--live", "--root", root)
	coreMust(t, 2, "", "status", "--full", "--root", root)
	// The same counts from the tally and from the shards' listings; a
	// table whose tally is not trusted (made before it) is counted from the
	// listings until fsck --repair trusts it.
	summary := func(args ...string) map[string]any {
		t.Helper()
		var m map[string]any
		r := coreMust(t, 0, "", append([]string{"status", "--summary", "--root", root, "--now", at(70), "--json"}, args...)...)
		if err := json.Unmarshal([]byte(r.out), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "duration_s")
		delete(m, "inodes")
		return m
	}
	tally, full := summary(), summary("--full")
	if tally["method"] != "tally" || full["method"] != "listing" {
		t.Fatalf("methods %v and %v, want tally and listing", tally["method"], full["method"])
	}
	delete(tally, "method")
	delete(full, "method")
	if !reflect.DeepEqual(tally, full) {
		t.Fatalf("the tally's summary %v, the listing's %v", tally, full)
	}
	if err := os.Remove(filepath.Join(root, "tally", "TRUSTED")); err != nil {
		t.Fatal(err)
	}
	if m := summary(); m["method"] != "listing" {
		t.Fatalf("an untrusted tally was counted from: %v", m["method"])
	}
	coreMust(t, 0, "", "fsck", "--repair", "--root", root, "--now", at(70))
	if m := summary(); m["method"] != "tally" {
		t.Fatalf("fsck --repair did not trust the tally: %v", m["method"])
	}
}

// TestFsckQueue: fsck reports and repairs what is wrong in queue/, and a
// table without queue/ is clean.
func TestFsckQueue(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	coreMust(t, 0, "", "fsck", "--root", root)
	ids := coreIDs("fsckq", 3)
	coreMust(t, 0, coreJoin(ids, ""), "add", "--root", root)
	coreMust(t, 0, "", "fsck", "--root", root)
	done := coreMust(t, 0, "", "claim", "--root", root, string(ids[0])).out
	coreMust(t, 0, done, "complete", "--root", root)
	q := filepath.Join(root, "queue")
	other := fmt.Sprintf("%02x", (func() int { var s int; fmt.Sscanf(queueShard(ids[1]), "%x", &s); return (s + 1) % 16 })())
	os.MkdirAll(filepath.Join(q, other), 0o755)
	os.Rename(filepath.Join(q, queueShard(ids[1]), string(ids[1])), filepath.Join(q, other, string(ids[1])))
	os.WriteFile(filepath.Join(q, queueShard(ids[0]), string(ids[0])), nil, 0o644)                    // entry of a done item
	os.WriteFile(filepath.Join(q, queueShard(ids[2]), "junk"), []byte("x"), 0o644)                    // not an ID
	os.WriteFile(filepath.Join(q, queueShard(ids[2]), string(coreID("data"))), []byte("data"), 0o644) // not empty
	os.Symlink("/etc/passwd", filepath.Join(q, queueShard(ids[2]), string(coreID("link"))))
	os.Mkdir(filepath.Join(q, "nothex"), 0o755)
	before := coreSnapshot(t, root)
	r := coreMust(t, 4, "", "fsck", "--root", root)
	coreSame(t, "read-only fsck", before, coreSnapshot(t, root))
	if n := strings.Count(r.out, "error queue "); n != 5 {
		t.Errorf("fsck found %d queue errors, want 5 (wrong shard, done, junk, not empty, not a shard dir):\n%s", n, r.out)
	}
	if !strings.Contains(r.out, "error symlink") {
		t.Errorf("fsck did not report the link:\n%s", r.out)
	}
	coreMust(t, 1, "", "fsck", "--repair", "--root", root)
	coreMust(t, 0, "", "fsck", "--root", root)
	got := queueEntries(t, root)
	if len(got) != 2 || got[ids[1]] != queueShard(ids[1]) || got[ids[2]] != queueShard(ids[2]) {
		t.Errorf("queue after repair %v, want %s and %s in their shards", got, ids[1], ids[2])
	}
	if fi, err := os.Lstat("/etc/passwd"); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the link's target was touched")
	}
}
