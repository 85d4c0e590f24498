package commit_test

// Census from the tally: the same counts as reading every record, through
// every change an item goes through, without listing the work shards; cold
// buckets are counted from the checkpoint with one stat each, and a bucket
// changed since (lease retry) is listed again.

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/leasetool/lease/census"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// bothCensuses checks that the tally's census and the listing's agree with
// reading every record at now, and returns the log of the tally's.
func bothCensuses(t *testing.T, st *commit.Store, log *opLog, now float64) []loggedOp {
	t.Helper()
	ctx := context.Background()
	want := readAll(t, st, now)
	listing, err := census.Listing(ctx, at(st, now), 2)
	if err != nil {
		t.Fatal(err)
	}
	log.reset(nil)
	tally, err := census.Take(ctx, at(st, now), 2)
	if err != nil {
		t.Fatal(err)
	}
	ops := log.snapshot()
	if tally.Method != census.MethodTally || listing.Method != census.MethodListing {
		t.Fatalf("methods %q and %q", tally.Method, listing.Method)
	}
	want.Method = census.MethodTally
	if !reflect.DeepEqual(tally, want) {
		t.Fatalf("at %v the tally's census\n got %+v\nwant %+v", now, tally, want)
	}
	want.Method = census.MethodListing
	if !reflect.DeepEqual(listing, want) {
		t.Fatalf("at %v the listing's census\n got %+v\nwant %+v", now, listing, want)
	}
	for _, op := range ops {
		if op.op == seam.OpReadDir && strings.HasPrefix(op.name, leasefmt.Work.Dir()+"/") {
			t.Fatalf("the tally's census listed the work shard %s", op.name)
		}
	}
	return ops
}

func listed(ops []loggedOp, prefix string) int {
	n := 0
	for _, op := range ops {
		if op.op == seam.OpReadDir && strings.HasPrefix(op.name, prefix) {
			n++
		}
	}
	return n
}

func TestTallyCensusFollowsEveryChange(t *testing.T) {
	SetTallyQuiet(t, 0)
	st, log := hookedTable(t, 4)
	ctx := context.Background()
	var items []commit.Item
	for i := range 40 {
		items = append(items, commit.Item{ID: shardID(i%4, i)})
	}
	at(st, 1000).Enqueue(ctx, items[:36]) // 36..39 are claimed by name, never queued
	bothCensuses(t, st, log, 1001)
	var held []commit.Item
	for _, r := range at(st, 1010).Claim(ctx, items[:40], "w", 100) {
		if r.Outcome != commit.OK {
			t.Fatalf("claim %s: %s", r.ID, r.Detail)
		}
		held = append(held, commit.Item{ID: r.ID, Token: r.Token})
	}
	for _, id := range []leasefmt.ID{items[36].ID, items[39].ID} {
		if _, err := os.Stat(st.Abs(layout.UnqueuedFlag(id))); err != nil {
			t.Fatalf("no flag for %s, claimed by name without a queue entry: %v", id, err)
		}
	}
	if _, err := os.Stat(st.Abs(layout.UnqueuedFlag(items[0].ID))); !os.IsNotExist(err) {
		t.Fatalf("a queued item got a flag: %v", err)
	}
	bothCensuses(t, st, log, 1020)
	at(st, 1030).Complete(ctx, held[:20])
	at(st, 1031).Complete(ctx, held[36:38]) // unqueued items done
	f := commit.Failure{ExitStatus: 1}
	at(st, 1040).ReleaseFailed(ctx, held[20:24], f, 1) // failed at once
	at(st, 1041).ReleaseFailed(ctx, held[24:26], f, 5) // released, one attempt
	bothCensuses(t, st, log, 1050)                     // failed items still queued
	at(st, 1060).UnqueueFailed(ctx, nil)
	bothCensuses(t, st, log, 1070)
	bothCensuses(t, st, log, 1200) // the leases expired
	// Later: the bucket of 900..1199 is cold; the first census lists and
	// keeps it, the next only stats it.
	cold := layout.TallyBucketDir(900)
	ops := bothCensuses(t, st, log, 2000)
	if n := listed(ops, cold); n == 0 {
		t.Fatalf("the first census after the bucket settled did not list it")
	}
	if _, err := os.Stat(st.Abs(layout.CheckpointFile)); err != nil {
		t.Fatalf("no checkpoint: %v", err)
	}
	ops = bothCensuses(t, st, log, 2001)
	if n := listed(ops, cold); n != 0 {
		t.Fatalf("a cold bucket was listed again (%d), not counted from the checkpoint", n)
	}
	// lease retry of a failed item changes its cold bucket: listed again.
	if r := at(st, 2100).RetryFailed(ctx, []commit.Item{{ID: held[20].ID}})[0]; r.Outcome != commit.OK {
		t.Fatalf("retry: %s", r.Detail)
	}
	ops = bothCensuses(t, st, log, 2101)
	if n := listed(ops, cold); n != 1 {
		t.Fatalf("the bucket the retry changed was listed %d times, want once", n)
	}
	// Done again, in a new bucket: counted once.
	h := claimOne(t, st, held[20].ID, 2200)
	at(st, 2210).Complete(ctx, []commit.Item{h})
	bothCensuses(t, st, log, 2220)
	bothCensuses(t, st, log, 5000)
	// A checkpoint that cannot be read is only a cache lost.
	if err := os.WriteFile(st.Abs(layout.CheckpointFile), []byte("{garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	bothCensuses(t, st, log, 5001)
}

// A record met in the queue that is finished (its queue entry not yet
// removed) is counted from its bucket when it has its link, from the
// record when it has none (a crash between the two): never twice.
func TestTallyCensusCountsAStaleQueueEntryOnce(t *testing.T) {
	st, log := hookedTable(t, 2)
	ctx := context.Background()
	a, b := shardID(0, 1), shardID(1, 2)
	at(st, 1000).Enqueue(ctx, []commit.Item{{ID: a}, {ID: b}})
	var held []commit.Item
	for _, r := range at(st, 1010).Claim(ctx, []commit.Item{{ID: a}, {ID: b}}, "w", 100) {
		held = append(held, commit.Item{ID: r.ID, Token: r.Token})
	}
	at(st, 1020).Complete(ctx, held)
	for _, id := range []leasefmt.ID{a, b} {
		if f, err := os.Create(st.Abs(st.QueuePath(id))); err == nil { // entries back, as a crash leaves them
			f.Close()
		}
	}
	rb, _ := st.Read(ctx, leasefmt.Work, b)
	if err := os.Remove(st.Abs(layout.TallyPath(rb))); err != nil {
		t.Fatal(err)
	}
	bothCensuses(t, st, log, 1030)
}

// A writer that cannot keep the tally (here: its bucket cannot be made)
// untrusts it, and the census reads the table instead.
func TestTallyUntrustedWhenALinkFails(t *testing.T) {
	st, log := hookedTable(t, 2)
	ctx := context.Background()
	id := shardID(0, 1)
	at(st, 1000).Enqueue(ctx, []commit.Item{{ID: id}})
	h := claimOne(t, st, id, 1010)
	log.reset(func(op seam.Op, name string) error {
		if op == seam.OpMkdir && strings.HasPrefix(name, layout.TallyDir+"/") {
			return os.ErrPermission
		}
		return nil
	})
	if r := at(st, 1020).Complete(ctx, []commit.Item{h})[0]; r.Outcome != commit.OK {
		t.Fatalf("complete: %s", r.Detail)
	}
	log.reset(nil)
	if ok, _ := st.TallyTrusted(); ok {
		t.Fatal("the tally is still trusted without the link of a done record")
	}
	c, err := census.Take(ctx, at(st, 1030), 2)
	if err != nil || c.Method != census.MethodListing || c.Done != 1 {
		t.Fatalf("census %+v %v, want the listing's, 1 done", c, err)
	}
}

// A result published with the record done (lease run --complete, lease work,
// complete --publish) is in the tally like any other done record.
func TestTallyCountsPublishedResults(t *testing.T) {
	st, log := hookedTable(t, 4)
	a := claimOne(t, st, shardID(1, 1), 10)
	stageTree(t, st, a, afl)
	if r, err := at(st, 11).CompleteStage(context.Background(), a); err != nil || r.Outcome != commit.OK {
		t.Fatalf("CompleteStage: %v %s", err, r.Detail)
	}
	rec, _ := st.Read(context.Background(), leasefmt.Work, a.ID)
	if _, err := os.Lstat(st.Abs(layout.TallyPath(rec))); err != nil {
		t.Fatalf("a published done record is not in the tally: %v", err)
	}
	bothCensuses(t, st, log, 20)
}

// A finisher that makes its link while a census runs, after the census
// counted the record from the queue (no link yet) and before it listed the
// bucket: the item is still counted once. (lease status --watch saw done
// go from 130 to 129: the census before had counted such an item twice.)
func TestTallyCensusLinkMadeDuringTheCensus(t *testing.T) {
	st, log := hookedTable(t, 2)
	ctx := context.Background()
	a, b := shardID(0, 1), shardID(1, 2)
	at(st, 1000).Enqueue(ctx, []commit.Item{{ID: a}, {ID: b}})
	var held []commit.Item
	for _, r := range at(st, 1010).Claim(ctx, []commit.Item{{ID: a}, {ID: b}}, "w", 100) {
		held = append(held, commit.Item{ID: r.ID, Token: r.Token})
	}
	at(st, 1020).Complete(ctx, held)
	// b as a finisher leaves it between its record and its link: the
	// queue entry still there, no link.
	if f, err := os.Create(st.Abs(st.QueuePath(b))); err == nil {
		f.Close()
	}
	rb, _ := st.Read(ctx, leasefmt.Work, b)
	link := st.Abs(layout.TallyPath(rb))
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	// The finisher goes on when the census starts on the tally's buckets.
	linked := false
	log.reset(func(op seam.Op, name string) error {
		if op == seam.OpReadDir && name == layout.TallyDir && !linked {
			linked = true
			if err := os.Link(st.Abs(st.RecordPath(leasefmt.Work, b)), link); err != nil {
				t.Error(err)
			}
		}
		return nil
	})
	c, err := census.Take(ctx, at(st, 1030), 2)
	log.reset(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !linked {
		t.Fatal("the census did not list the tally")
	}
	if c.Method != census.MethodTally || c.Done != 2 || c.Records != 2 {
		t.Fatalf("census %s done %d records %d, want the tally's, 2 done (a, and b once)", c.Method, c.Done, c.Records)
	}
	if got := readAll(t, st, 1030); got.Done != 2 {
		t.Fatalf("reading every record: done %d", got.Done)
	}
}
