package commit_test

// The queue: Enqueue's two ways of telling done items (a lookup per ID, a
// listing of a shard with many new entries), ClaimNext's answers, Census.

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/leasetool/lease/census"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
)

// TestEnqueueDoneItems: done items are not queued, whether their shard is
// listed (many new entries) or looked up entry by entry; the directory
// fsyncs are one per touched shard.
func TestEnqueueDoneItems(t *testing.T) {
	t.Parallel()
	for _, n := range []int{10, 600} { // below and above the listing threshold
		st, _ := hookedTable(t, 1)
		items := make([]commit.Item, n)
		for i := range items {
			items[i] = commit.Item{ID: shardID(0, i)}
		}
		done := items[:5]
		for _, it := range at(st, 100).Claim(context.Background(), done, "w", 10) {
			if it.Outcome != commit.OK {
				t.Fatal(it.Outcome.Reason())
			}
		}
		held := make([]commit.Item, len(done))
		for i, it := range done {
			held[i] = commit.Item{ID: it.ID, Token: 1}
		}
		at(st, 101).Complete(context.Background(), held)
		before := st.Stats().DirectorySyncs.Load()
		res := at(st, 102).Enqueue(context.Background(), items)
		added := 0
		for i, r := range res {
			switch {
			case i < 5 && r.Outcome != commit.Done:
				t.Errorf("n=%d: done item %d: %s, want done", n, i, r.Outcome.Reason())
			case i >= 5 && r.Outcome != commit.OK:
				t.Errorf("n=%d: item %d: %s %s, want added", n, i, r.Outcome.Reason(), r.Detail)
			case r.Outcome == commit.OK:
				added++
			}
		}
		if _, err := os.Stat(st.Abs(st.QueuePath(done[0].ID))); !os.IsNotExist(err) {
			t.Errorf("n=%d: a done item has a queue entry (%v)", n, err)
		}
		// mkdir queue/ and queue/00 (each fsyncs its parent), then queue/00 once.
		if got := st.Stats().DirectorySyncs.Load() - before; got != 3 {
			t.Errorf("n=%d: %d directory fsyncs, want 3", n, got)
		}
		again := at(st, 103).Enqueue(context.Background(), items[5:7])
		if again[0].Outcome != commit.Queued || again[1].Outcome != commit.Queued {
			t.Errorf("n=%d: enqueued twice: %s %s", n, again[0].Outcome.Reason(), again[1].Outcome.Reason())
		}
		if added != n-5 {
			t.Errorf("n=%d: %d added", n, added)
		}
	}
}

func TestClaimNextAnswers(t *testing.T) {
	t.Parallel()
	st, _ := hookedTable(t, 4)
	rnd := rand.New(rand.NewPCG(1, 2))
	if nx := at(st, 100).ClaimNext(context.Background(), 1, "w", 10, rnd); nx.Answer != commit.Empty {
		t.Fatalf("no queue: %s, want empty", nx.Answer)
	}
	items := spread(8, 4)
	at(st, 100).Enqueue(context.Background(), items)
	got := map[leasefmt.ID]bool{}
	for i := 0; i < 3; i++ {
		nx := at(st, 100).ClaimNext(context.Background(), 3, "w", 10, rnd)
		for _, r := range nx.Results {
			if r.Outcome == commit.OK {
				if got[r.ID] {
					t.Fatalf("%s granted twice", r.ID)
				}
				got[r.ID] = true
			}
		}
	}
	if len(got) != 8 {
		t.Fatalf("%d granted, want all 8", len(got))
	}
	nx := at(st, 105).ClaimNext(context.Background(), 1, "w", 10, rnd)
	if nx.Answer != commit.Busy || nx.Held != 8 || nx.Expiring != 110+st.ClockSkew() {
		t.Fatalf("all held: %s held=%d expiring=%v, want busy, 8, 110+skew", nx.Answer, nx.Held, nx.Expiring)
	}
	// Expired: granted again with token 2.
	nx = at(st, 200).ClaimNext(context.Background(), 1, "w", 10, rnd)
	if nx.Answer != commit.Granted || nx.Results[0].Token != 2 {
		t.Fatalf("after expiry: %s %+v", nx.Answer, nx.Results)
	}
	var all []commit.Item
	for id := range got {
		tok := int64(1)
		if id == nx.Results[0].ID {
			tok = 2
		}
		all = append(all, commit.Item{ID: id, Token: tok})
	}
	at(st, 200).Revoke(context.Background(), all)
	c, err := census.Take(context.Background(), at(st, 200), 4)
	if err != nil || c.Queued != 8 || c.Released != 8 {
		t.Fatalf("census after revoke: %+v %v", c, err)
	}
	for i := range all {
		all[i].Token = 0
	}
	res := at(st, 201).Claim(context.Background(), all, "w", 10)
	for i := range all {
		all[i].Token = res[i].Token
	}
	at(st, 202).Complete(context.Background(), all)
	if nx := at(st, 203).ClaimNext(context.Background(), 1, "w", 10, rnd); nx.Answer != commit.Empty {
		t.Fatalf("all done: %s, want empty", nx.Answer)
	}
	c, err = census.Take(context.Background(), at(st, 203), 4)
	if err != nil || c.Queued != 0 || c.Done != 8 || c.Records != 8 {
		t.Fatalf("census at the end: %+v %v", c, err)
	}
}

// TestEnqueueRepeatedIDs: a later line of an ID is never attempted (one
// create per distinct ID), so the first line is the one reported added
// whatever order the writers take; a repeat of an ID already queued, or of
// one whose record is done, answers as its first line.
func TestEnqueueRepeatedIDs(t *testing.T) {
	t.Parallel()
	st, log := hookedTable(t, 4)
	done, queued := shardID(1, 900), shardID(2, 901)
	if r := at(st, 100).Claim(context.Background(), []commit.Item{{ID: done}}, "w", 10)[0]; r.Outcome != commit.OK {
		t.Fatal(r.Outcome.Reason())
	}
	at(st, 101).Complete(context.Background(), []commit.Item{{ID: done, Token: 1}})
	at(st, 101).Enqueue(context.Background(), []commit.Item{{ID: queued}})
	items := spread(64, 4)
	for _, id := range []leasefmt.ID{items[3].ID, items[40].ID, done, queued, items[3].ID, done, queued, items[40].ID} {
		items = append(items, commit.Item{ID: id})
	}
	log.reset(nil)
	res := at(st, 102).Enqueue(context.Background(), items)
	creates := map[string]int{}
	for _, o := range log.snapshot() {
		if o.op == seam.OpCreate {
			creates[o.name]++
		}
	}
	if len(creates) != 66 { // the 64 new IDs, done's and queued's
		t.Errorf("creates of %d names, want 66", len(creates))
	}
	for name, c := range creates {
		if c != 1 {
			t.Errorf("%s: created %d times, want once", name, c)
		}
	}
	want := func(i int, o commit.Outcome) {
		t.Helper()
		if res[i].Outcome != o || res[i].ID != items[i].ID {
			t.Errorf("line %d (%s): %s %s, want %s", i, items[i].ID, res[i].Outcome.Reason(), res[i].Detail, o.Reason())
		}
	}
	for i := range 64 {
		want(i, commit.OK)
	}
	for i, o := range []commit.Outcome{commit.Queued, commit.Queued, commit.Done, commit.Queued, commit.Queued, commit.Done, commit.Queued, commit.Queued} {
		want(64+i, o)
	}
}
