package worker

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/leasefmt"
)

// The durability budget of one item of lease work (docs/performance.md,
// "Durability budget per item"): the durable syncs (file fsyncs, directory
// fsyncs, syncfs) from the end of one item to the end of the next, which
// is the next item's claim, its staging directory, its work and its
// finish, as the engine's own counters count them.
const (
	// The claim's record (file + shard directory) and the done record
	// (file + shard directory).
	budgetNothing = 4
	// Those, plus what SPEC makes a publish pay: the staged result (one
	// file: the file and its directory, G1), the committing record naming
	// it (file + shard directory, SPEC §2), the move into public/ (the
	// destination directory, then the source, G8).
	budgetOneFile = 10
)

// itemSyncs runs n+1 items of a work loop over a table of its own at a
// fixed time (one tally bucket, no lease running out), each with run, and
// returns the durable syncs of the last n items, per item.
func itemSyncs(t *testing.T, n int, run func(ctx context.Context, h Held, finish func(End) Finished) Ran) float64 {
	t.Helper()
	root := filepath.Join(t.TempDir(), "table")
	if err := durable.MkdirRoot(root); err != nil {
		t.Fatal(err)
	}
	now := float64(int64(leasefmt.Now())/300*300 + 100)
	st, err := commit.Open(root, commit.Options{Clock: func() float64 { return now },
		Create: &leasefmt.Table{WorkShards: 4, TargetShards: 4, CreatedAt: leasefmt.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var its []commit.Item
	for i := 0; i <= n; i++ {
		its = append(its, commit.Item{ID: testID("budget-" + string(rune('a'+i)))})
	}
	for _, r := range st.Enqueue(context.Background(), its) {
		if r.Outcome != commit.OK {
			t.Fatalf("enqueue: %v", r.Detail)
		}
	}
	syncs := func() int64 {
		c := &st.Stats().Counts
		return c.FileSyncs.Load() + c.DirectorySyncs.Load() + c.Syncfs.Load()
	}
	var first, last int64
	l := &Loop{Store: st, Owner: "test", Timing: loopTiming(t), MaxAttempts: 3, Outage: &Outage{}, Run: run,
		Done: func(d Ended) {
			if d.N == 1 {
				first = syncs() // the table's directories made once (held/, the tally's bucket) are the first item's
			}
			last = syncs()
		}}
	if s := l.Work(context.Background()); s.How != EndEmpty || s.Items != n+1 || s.Finishes[HowDone] != n+1 {
		t.Fatalf("work: %+v", s)
	}
	return float64(last-first) / float64(n)
}

// TestDurabilityBudget: an item of lease work that publishes nothing costs
// at most budgetNothing durable syncs, one that publishes a file at most
// budgetOneFile.
func TestDurabilityBudget(t *testing.T) {
	t.Parallel()
	const n = 5
	nothing := itemSyncs(t, n, func(ctx context.Context, h Held, finish func(End) Finished) Ran {
		return Ran{Finished: finish(End{Complete: true, Succeeded: true})}
	})
	if nothing > budgetNothing {
		t.Errorf("an item that publishes nothing: %.2f durable syncs, budget %d", nothing, budgetNothing)
	}
	oneFile := itemSyncs(t, n, func(ctx context.Context, h Held, finish func(End) Finished) Ran {
		if err := os.WriteFile(filepath.Join(h.Stage, "out"), []byte("result"), 0o644); err != nil {
			t.Error(err)
		}
		f := finish(End{Complete: true, Succeeded: true})
		if !f.Published {
			t.Errorf("%s: not published: %+v", h.ID, f)
		}
		return Ran{Finished: f}
	})
	if oneFile > budgetOneFile {
		t.Errorf("an item that publishes one file: %.2f durable syncs, budget %d", oneFile, budgetOneFile)
	}
	t.Logf("durable syncs an item: %.2f publishing nothing, %.2f publishing one file", nothing, oneFile)
}
