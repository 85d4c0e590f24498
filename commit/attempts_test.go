package commit_test

// Attempts and the failed state: ReleaseFailed counts, fails at
// max_attempts and dequeues; claims, renewals and the queue refuse a
// failed item; RetryFailed puts it back, durably queued.

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/leasetool/lease/census"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

func claimOne(t *testing.T, st *commit.Store, id leasefmt.ID, now float64) commit.Item {
	t.Helper()
	r := at(st, now).Claim(context.Background(), []commit.Item{{ID: id}}, "w", 100)[0]
	if r.Outcome != commit.OK {
		t.Fatalf("claim %s: %s %s", id.Short(), r.Outcome.Reason(), r.Detail)
	}
	return commit.Item{ID: id, Token: r.Token}
}

func TestReleaseFailedCountsAndFails(t *testing.T) {
	t.Parallel()
	st, log := hookedTable(t, 2)
	id := shardID(1, 7)
	if r := at(st, 10).Enqueue(context.Background(), []commit.Item{{ID: id}}); r[0].Outcome != commit.OK {
		t.Fatal(r[0].Outcome.Reason())
	}
	f := commit.Failure{ExitStatus: 139, Stderr: []byte("\x1b[1mSegmentation fault\x1b[0m\r\n")}
	for attempt := int64(1); attempt <= 3; attempt++ {
		held := claimOne(t, st, id, float64(100*attempt))
		log.reset(nil)
		r := at(st, float64(100*attempt+1)).ReleaseFailed(context.Background(), []commit.Item{held}, f, 3)[0]
		if r.Outcome != commit.OK {
			t.Fatalf("attempt %d: %s %s", attempt, r.Outcome.Reason(), r.Detail)
		}
		rec, err := st.Read(context.Background(), leasefmt.Work, id)
		if err != nil {
			t.Fatal(err)
		}
		want := leasefmt.Released
		if attempt == 3 {
			want = leasefmt.Failed
		}
		if rec.Status != want || rec.Attempts != attempt || rec.ExitStatus != 139 || rec.StderrTail != "Segmentation fault" {
			t.Fatalf("attempt %d: record %+v, want %s with %d attempts, exit 139 and the escaped tail", attempt, rec, want, attempt)
		}
		if log.count(seam.OpSyncDir) == 0 {
			t.Errorf("attempt %d: the release was reported before any directory fsync", attempt)
		}
		_, err = os.Stat(st.Abs(st.QueuePath(id)))
		if queued := err == nil; queued != (attempt < 3) {
			t.Errorf("attempt %d: queued=%v (%v)", attempt, queued, err)
		}
	}
	// A failed item refuses claims, renewals, revokes and a second release.
	if r := at(st, 1e6).Claim(context.Background(), []commit.Item{{ID: id}}, "w", 10)[0]; r.Outcome != commit.Failed || !strings.Contains(r.Detail, "lease retry") {
		t.Errorf("claim of a failed item: %s %s", r.Outcome.Reason(), r.Detail)
	}
	if r := at(st, 301).Renew(context.Background(), []commit.Item{{ID: id, Token: 3}}, 10)[0]; r.Outcome != commit.Failed {
		t.Errorf("renew of a failed item: %s", r.Outcome.Reason())
	}
	if r := at(st, 301).Revoke(context.Background(), []commit.Item{{ID: id}})[0]; r.Outcome != commit.Failed {
		t.Errorf("revoke of a failed item: %s", r.Outcome.Reason())
	}
	if r := at(st, 301).Enqueue(context.Background(), []commit.Item{{ID: id}})[0]; r.Outcome != commit.Failed {
		t.Errorf("add of a failed item: %s %s", r.Outcome.Reason(), r.Detail)
	}
	if _, err := os.Stat(st.Abs(st.QueuePath(id))); !os.IsNotExist(err) {
		t.Errorf("add of a failed item left a queue entry (%v)", err)
	}
	if nx := at(st, 1e6).ClaimNext(context.Background(), 1, "w", 10, rand.New(rand.NewPCG(1, 1))); nx.Answer != commit.Empty {
		t.Errorf("claim --next with only a failed item: %s", nx.Answer)
	}
	cen, err := census.Take(context.Background(), at(st, 1e6), 2)
	if err != nil || cen.Failed != 1 || cen.Attempts != 3 || cen.Queued != 0 {
		t.Errorf("census: %+v, %v; want 1 failed, 3 attempts, nothing queued", cen, err)
	}
	ids, err := st.FailedIDs(context.Background())
	if err != nil || len(ids) != 1 || ids[0] != id {
		t.Errorf("FailedIDs = %v, %v", ids, err)
	}

	// Retry: released, attempts reset, token kept, queued durably (the
	// queue shard directory fsynced before the record is written).
	log.reset(nil)
	r := at(st, 400).RetryFailed(context.Background(), []commit.Item{{ID: id}})[0]
	if r.Outcome != commit.OK || r.Token != 3 {
		t.Fatalf("retry: %s %s token %d", r.Outcome.Reason(), r.Detail, r.Token)
	}
	syncedQueue, renamedRecord := -1, -1
	for i, o := range log.snapshot() {
		if o.op == seam.OpSyncDir && strings.HasPrefix(o.name, layout.QueueDir+"/") && syncedQueue < 0 {
			syncedQueue = i
		}
		if o.op == seam.OpRename && strings.HasSuffix(o.name, id.FileName()) {
			renamedRecord = i
		}
	}
	if syncedQueue < 0 || renamedRecord < 0 || syncedQueue > renamedRecord {
		t.Errorf("retry: queue directory fsync at %d, record rename at %d: the entry must be durable first", syncedQueue, renamedRecord)
	}
	rec, _ := st.Read(context.Background(), leasefmt.Work, id)
	if rec.Status != leasefmt.Released || rec.Attempts != 0 || rec.ExitStatus != 0 || rec.StderrTail != "" {
		t.Errorf("after retry: %+v", rec)
	}
	nx := at(st, 500).ClaimNext(context.Background(), 1, "w", 10, rand.New(rand.NewPCG(1, 1)))
	if nx.Answer != commit.Granted || nx.Results[0].Token != 4 {
		t.Errorf("claim --next after retry: %s %+v", nx.Answer, nx.Results)
	}
	// Retry of items that are not failed changes nothing.
	other := shardID(0, 3)
	claimOne(t, st, other, 600)
	for _, r := range at(st, 601).RetryFailed(context.Background(), []commit.Item{{ID: id}, {ID: other}, {ID: shardID(0, 4)}}) {
		if r.Outcome == commit.OK {
			t.Errorf("retry of %s that is not failed: ok", r.ID.Short())
		}
	}
}

// TestReleaseFailedUnlimited: max_attempts 0 counts but never fails.
func TestReleaseFailedUnlimited(t *testing.T) {
	t.Parallel()
	st, _ := hookedTable(t, 1)
	id := shardID(0, 1)
	for a := 1; a <= 5; a++ {
		held := claimOne(t, st, id, float64(a*10))
		if r := at(st, float64(a*10+1)).ReleaseFailed(context.Background(), []commit.Item{held}, commit.Failure{}, 0)[0]; r.Outcome != commit.OK || r.Record.Status != leasefmt.Released || r.Record.Attempts != int64(a) {
			t.Fatalf("attempt %d: %s %+v", a, r.Outcome.Reason(), r.Record)
		}
	}
}

// TestReleaseFailedFenced: a stale token counts nothing and writes nothing.
func TestReleaseFailedFenced(t *testing.T) {
	t.Parallel()
	st, log := hookedTable(t, 1)
	id := shardID(0, 2)
	claimOne(t, st, id, 10)
	log.reset(nil)
	r := at(st, 11).ReleaseFailed(context.Background(), []commit.Item{{ID: id, Token: 9}}, commit.Failure{ExitStatus: 1}, 3)[0]
	if r.Outcome != commit.StaleToken {
		t.Errorf("stale token: %s", r.Outcome.Reason())
	}
	if n := log.count(seam.OpRename) + log.count(seam.OpSyncDir); n != 0 {
		t.Errorf("a refused release wrote: %d renames and fsyncs", n)
	}
}
