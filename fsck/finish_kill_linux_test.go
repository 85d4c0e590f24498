package fsck_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// TestKilledFinishLeavesOnlyDebris kills a real finisher (lease complete,
// retried or not, and lease release --failed at max_attempts) with SIGKILL
// after its record
// was renamed done (or failed) and before its link in the tally, at a
// deterministic point (strace's syscall injection: the first linkat of
// the marker, or the first linkat into the tally's bucket); then the
// campaign goes on without a repair: the next claim from the queue meets
// the finished item's entry and drops it, the items it claimed are
// completed. The summary must count every item, and lease fsck (no
// repair) must exit 0: the claim that dropped the entry made the link the
// dead finisher did not (issue 36, point 6).
func TestKilledFinishLeavesOnlyDebris(t *testing.T) {
	testenv.NeedTools(t, "strace")
	if out, err := exec.Command("strace", "-f", "-o", "/dev/null", "true").CombinedOutput(); err != nil {
		testenv.Missing(t, "strace", "strace cannot trace here: "+strings.TrimSpace(string(out)))
	}
	const now = "2000000000" // --now: the tally's bucket is known (tally/1999999800)
	const bucket = "1999999800"
	for _, finish := range []string{"complete", "complete-retried", "fail"} {
		for _, point := range []string{"marker", "tally"} {
			t.Run(finish+"/"+point, func(t *testing.T) {
				t.Parallel()
				root := filepath.Join(t.TempDir(), "t")
				lease := func(stdin string, args ...string) (string, string, int) {
					t.Helper()
					return runBin(t, stdin, append([]string{args[0], "--root", root, "--now", now}, args[1:]...)...)
				}
				if _, e, code := runBin(t, "", "init", "--root", root); code != 0 {
					t.Fatalf("init: exit %d: %s", code, e)
				}
				items := ids("finish-kill", 3)
				var in strings.Builder
				for _, id := range items {
					in.WriteString(string(id) + "\n")
				}
				if _, e, code := lease(in.String(), "add"); code != 0 {
					t.Fatalf("add: exit %d: %s", code, e)
				}
				held, e, code := lease("", "claim", "--next", "1")
				if code != 0 {
					t.Fatalf("claim: exit %d: %s", code, e)
				}
				id := leasefmt.ID(strings.Fields(held)[0])

				// The finisher, killed at its crash point.
				args := []string{"-f", "-o", "/dev/null", "-e", "trace=linkat"}
				if point == "tally" {
					// Only the linkat whose directory is the bucket counts.
					args = append(args, "-P", filepath.Join(root, layout.TallyDir, bucket))
				}
				args = append(args, "-e", "inject=linkat:signal=KILL:when=1", leaseBin(t))
				if finish != "fail" {
					args = append(args, "complete")
				} else {
					args = append(args, "release", "--failed", "--max-attempts", "1")
				}
				cmd := exec.Command("strace", append(args, "--root", root, "--now", now)...)
				cmd.Stdin = strings.NewReader(held)
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				// strace dies of its tracee's signal.
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !errors.As(err, &ee) || !ok || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("the finisher was not killed at its linkat: %v\n%s", err, out)
				}
				want := leasefmt.Done
				if finish == "fail" {
					want = leasefmt.Failed
				}
				st, e, _ := lease("", "status", "--json", string(id))
				var rec struct{ Status leasefmt.Status }
				if err := json.Unmarshal([]byte(st), &rec); err != nil || rec.Status != want {
					t.Fatalf("after the kill the record is %q (%v, %s), want %s", st, err, e, want)
				}
				tally := filepath.Join(root, layout.TallyDir, bucket, layout.MarkerName(id, want, map[bool]int64{true: 1}[finish == "fail"]))
				if _, err := os.Lstat(tally); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("the crash point was missed: %s exists (%v)", tally, err)
				}

				if finish == "complete-retried" {
					// The finisher's retry (its worker, a job script)
					// succeeds again, drops the entry, and makes the link.
					if out, e, code := lease(held, "complete"); code != 0 || out != held {
						t.Fatalf("complete retried: exit %d, %q, %s", code, out, e)
					}
				}
				// The campaign goes on, without a repair: the next claim
				// meets the finished item's entry; the rest is completed.
				got, e, code := lease("", "claim", "--next", "5")
				if code != 0 || strings.Count(got, "\n") != 2 {
					t.Fatalf("claim after the kill: exit %d, %q, %s", code, got, e)
				}
				if _, e, code := lease(got, "complete"); code != 0 {
					t.Fatalf("complete: exit %d: %s", code, e)
				}
				sum, e, code := lease("", "status", "--summary", "--json")
				var c struct{ Queued, Done, Failed int64 }
				if err := json.Unmarshal([]byte(sum), &c); err != nil || code != 0 {
					t.Fatalf("summary: exit %d, %v: %s %s", code, err, sum, e)
				}
				wantDone, wantFailed := int64(3), int64(0)
				if finish == "fail" {
					wantDone, wantFailed = 2, 1
				}
				if c.Queued != 0 || c.Done != wantDone || c.Failed != wantFailed {
					t.Errorf("summary after the campaign: queued %d, done %d, failed %d; want 0, %d, %d", c.Queued, c.Done, c.Failed, wantDone, wantFailed)
				}
				if out, e, code := lease("", "fsck"); code != 0 {
					t.Errorf("fsck after the campaign: exit %d, want 0\n%s%s", code, out, e)
				}
			})
		}
	}
}
