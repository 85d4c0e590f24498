package safety

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leasetool/lease/commit/seam"
)

// TestSyncfsScenariosTakeTheBarrier: the scenarios run under sync = syncfs
// (issue 41) make their records durable by syncfs on the Recorder, not by
// per-record fsyncs, so the crash exploration of them explores the
// barrier's order (content, syncfs, renames, syncfs) and not the default's.
func TestSyncfsScenariosTakeTheBarrier(t *testing.T) {
	t.Parallel()
	n := 0
	for _, sc := range WorkScenarios() {
		if !sc.Syncfs {
			continue
		}
		n++
		run, _, err := Record(sc, nil)
		if err != nil {
			t.Fatal(err)
		}
		ops := map[seam.Op]int{}
		for _, c := range run.Rec.Calls() {
			ops[c.Op]++
		}
		if ops[seam.OpSyncfs] == 0 {
			t.Errorf("%s: no syncfs among %d calls", sc.Name, len(run.Rec.Calls()))
		}
		if sc.SyncfsChunk > 0 {
			// 32 records in chunks of 8, the first a quarter chunk: 2 + 8 +
			// 8 + 8 + 6, one syncfs each and one after the last rename.
			if sc.SyncfsChunk != 8 || ops[seam.OpSyncfs] != 6 {
				t.Errorf("%s: %d syncfs in chunks of %d, want 6 in chunks of 8", sc.Name, ops[seam.OpSyncfs], sc.SyncfsChunk)
			}
		}
		if strings.HasPrefix(sc.Name, "renew-batch") || strings.HasPrefix(sc.Name, "claim/") {
			if ops[seam.OpFsync] != 0 || ops[seam.OpSyncDir] != 0 {
				t.Errorf("%s: %d file and %d directory fsyncs under the barrier, want none", sc.Name, ops[seam.OpFsync], ops[seam.OpSyncDir])
			}
		}
		t.Logf("%s: exit %d, %d calls, %d syncfs, %d fsync, %d directory fsyncs", sc.Name, run.Exit(), len(run.Rec.Calls()), ops[seam.OpSyncfs], ops[seam.OpFsync], ops[seam.OpSyncDir])
	}
	if n < 4 {
		t.Errorf("%d scenarios run under sync = syncfs, want at least 4", n)
	}
}

// TestSyncfsCrashStates explores the crash states of every scenario run
// under sync = syncfs (the two-pass order of commit/twopass.go: temp
// files, syncfs, renames, syncfs) in the sample too, where TestCrashStates
// takes every third scenario, and checks the invariants after recovery.
// Outside the sample TestCrashStates explores them all already.
func TestSyncfsCrashStates(t *testing.T) {
	t.Parallel()
	if !isSample() {
		t.Log("explored by TestCrashStates (every scenario outside the sample)")
		return
	}
	x := sampleBudget(explorer())
	var rows []string
	var tally Tally
	for _, sc := range WorkScenarios() {
		if !sc.Syncfs {
			continue
		}
		res, err := x.Explore(sc)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		if res.States == 0 {
			t.Errorf("%s: no crash state explored", sc.Name)
		}
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | %d | %d | %d |", res.Scenario, res.Calls, res.CrashPoints, res.States, res.Acks, len(res.Violations)))
		tally.Add(res.Violations...)
	}
	report(t, &tally)
	t.Logf("syncfs crash states (budget %d per crash point):\n| operation | calls | crash points | distinct states | acks | violations |\n|---|---|---|---|---|---|\n%s", x.Budget, strings.Join(rows, "\n"))
}
