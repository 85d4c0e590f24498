package commands_test

// Attempts and the failed state through the commands: lease release
// --failed counts, keeps the exit status and stderr tail and fails the item
// at max_attempts; claims, claim --next and add refuse it; lease status
// and --summary show it; lease retry ID and --failed put it back; bad
// input changes nothing.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/leasefmt"
)

func TestReleaseFailedAndRetry(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	id := coreID("poison")
	coreMust(t, 0, string(id)+"\n", "add", "--root", root)
	errLog := filepath.Join(t.TempDir(), "err.log")
	os.WriteFile(errLog, []byte(strings.Repeat("noise\n", 2000)+"\x1b[31m==1==ERROR: AddressSanitizer: SEGV\x1b[0m\n"), 0o644)
	for attempt := 1; attempt <= 2; attempt++ {
		held := coreMust(t, 0, "", "claim", "--root", root, "--next", "1").out
		r := coreMust(t, 0, held, "release", "--root", root, "--failed=139", "--stderr", errLog, "--max-attempts", "2")
		if r.out != held {
			t.Fatalf("attempt %d: release --failed printed %q, want the line released %q", attempt, r.out, held)
		}
		rec := coreRecord(t, root, id)
		want := leasefmt.Released
		if attempt == 2 {
			want = leasefmt.Failed
		}
		if rec.Status != want || rec.Attempts != int64(attempt) || rec.ExitStatus != 139 ||
			!strings.HasSuffix(rec.StderrTail, "\n==1==ERROR: AddressSanitizer: SEGV") || len(rec.StderrTail) > leasefmt.MaxTail {
			t.Fatalf("attempt %d: record %+v", attempt, rec)
		}
	}
	if _, ok := queueEntries(t, root)[id]; ok {
		t.Error("a failed item keeps its queue entry")
	}
	// Claims refuse it with the reason word failed; the queue is empty.
	r := coreMust(t, 1, "", "claim", "--root", root, string(id))
	if reasons := coreReasons(t, r.errOut); reasons[id] != "failed" {
		t.Errorf("claim of a failed item: %s", r)
	}
	coreMust(t, 1, "", "claim", "--root", root, "--next", "1")
	coreMust(t, 0, string(id)+"\n", "add", "--root", root)
	if _, ok := queueEntries(t, root)[id]; ok {
		t.Error("add queued a failed item")
	}
	// status shows it, with its attempts; the summary counts it.
	st := coreMust(t, 0, "", "status", "--root", root, "--json")
	var j struct {
		Status     string `json:"status"`
		Attempts   int    `json:"attempts"`
		ExitStatus int    `json:"exit_status"`
		StderrTail string `json:"stderr_tail"`
	}
	if err := json.Unmarshal([]byte(st.out), &j); err != nil || j.Status != "failed" || j.Attempts != 2 || j.ExitStatus != 139 || !strings.Contains(j.StderrTail, "SEGV") {
		t.Errorf("status --json: %s (%v)", st.out, err)
	}
	wide := coreMust(t, 0, "", "status", "--root", root, "-o", "wide").out
	if !strings.Contains(wide, "ATTEMPTS") || !strings.Contains(wide, " failed ") || !strings.Contains(wide, " 139 ") {
		t.Errorf("status -o wide:\n%s", wide)
	}
	sum := coreMust(t, 0, "", "status", "--root", root, "--summary", "--json").out
	if !strings.Contains(sum, `"failed":1,`) || !strings.Contains(sum, `"attempts":2,`) {
		t.Errorf("status --summary: %s", sum)
	}
	text := coreMust(t, 0, "", "status", "--root", root, "--summary").out
	if !strings.Contains(text, "failed              1") {
		t.Errorf("status --summary:\n%s", text)
	}
	// retry --failed puts it back: released, attempts cleared, queued.
	r = coreMust(t, 0, "", "retry", "--root", root, "--failed")
	if r.out != string(id)+" 2\n" {
		t.Errorf("retry --failed printed %q", r.out)
	}
	rec := coreRecord(t, root, id)
	if rec.Status != leasefmt.Released || rec.Attempts != 0 || rec.ExitStatus != 0 || rec.StderrTail != "" {
		t.Errorf("after retry: %+v", rec)
	}
	if _, ok := queueEntries(t, root)[id]; !ok {
		t.Error("retry did not queue the item")
	}
	// Not failed any more: retry refuses it (exit 1, reason released).
	r = coreMust(t, 1, "", "retry", "--root", root, string(id))
	if coreReasons(t, r.errOut)[id] != "released" {
		t.Errorf("retry of a released item: %s", r)
	}
	held := coreMust(t, 0, "", "claim", "--root", root, "--next", "1").out
	if held != string(id)+" 3\n" {
		t.Errorf("claim after retry: %q", held)
	}
}

// TestReleaseFailedRefusals: bad --failed values, --stderr without
// --failed and a missing --stderr file are usage errors that write nothing.
func TestReleaseFailedRefusals(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	id := coreID("refused")
	held := coreMust(t, 0, "", "claim", "--root", root, string(id)).out
	before := coreSnapshot(t, root)
	for _, args := range [][]string{
		{"--failed=0"}, {"--failed=256"}, {"--failed=x"}, {"--failed=-1"},
		{"--stderr", "/dev/null"},
		{"--failed", "--stderr", filepath.Join(t.TempDir(), "missing")},
		{"--failed", "--max-attempts", "-1"},
	} {
		coreMust(t, 2, held, append([]string{"release", "--root", root}, args...)...)
	}
	coreMust(t, 2, "", "retry", "--root", root, "--failed", string(id))
	coreSame(t, "refused release --failed", before, coreSnapshot(t, root))
	// --failed without a status keeps none; max_attempts 0 never fails.
	coreMust(t, 0, held, "release", "--root", root, "--failed", "--max-attempts", "0")
	if rec := coreRecord(t, root, id); rec.Status != leasefmt.Released || rec.Attempts != 1 || rec.ExitStatus != 0 {
		t.Errorf("release --failed: %+v", rec)
	}
}

// TestFsckFailedItems: a failed record is valid (a clean table stays
// clean); the queue entry of a failed item is an error fsck removes.
func TestFsckFailedItems(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	id := coreID("fsck-failed")
	coreMust(t, 0, string(id)+"\n", "add", "--root", root)
	held := coreMust(t, 0, "", "claim", "--root", root, string(id)).out
	coreMust(t, 0, held, "release", "--root", root, "--failed=1", "--max-attempts", "1")
	if rec := coreRecord(t, root, id); rec.Status != leasefmt.Failed {
		t.Fatalf("record %+v, want failed", rec)
	}
	coreMust(t, 0, "", "fsck", "--root", root)
	// The entry a release killed before its removal would leave.
	entry := filepath.Join(root, "queue", queueShard(id), string(id))
	if err := os.WriteFile(entry, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before := coreSnapshot(t, root)
	r := coreMust(t, 4, "", "fsck", "--root", root)
	coreSame(t, "read-only fsck", before, coreSnapshot(t, root))
	if !strings.Contains(r.out, "error queue") || !strings.Contains(r.out, "failed item") {
		t.Errorf("fsck of a failed item's entry:\n%s", r.out)
	}
	coreMust(t, 1, "", "fsck", "--repair", "--root", root)
	if _, err := os.Stat(entry); !os.IsNotExist(err) {
		t.Errorf("repair left the entry (%v)", err)
	}
	coreMust(t, 0, "", "fsck", "--root", root)
	if rec := coreRecord(t, root, id); rec.Status != leasefmt.Failed {
		t.Errorf("repair changed the failed record: %+v", rec)
	}
}

// TestClaimFirstPassesOverFailed: claim --first takes the next candidate
// after a failed one, silently, as after a done one.
func TestClaimFirstPassesOverFailed(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	bad, good := coreID("first-failed"), coreID("first-free")
	held := coreMust(t, 0, "", "claim", "--root", root, string(bad)).out
	coreMust(t, 0, held, "release", "--root", root, "--failed=2", "--max-attempts", "1")
	r := coreMust(t, 0, string(bad)+"\n"+string(good)+"\n", "claim", "--root", root, "--first", "1", "-")
	if r.out != string(good)+" 1\n" || r.errOut != "" {
		t.Errorf("claim --first past a failed item: %s", r)
	}
}
