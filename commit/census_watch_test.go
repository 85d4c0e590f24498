package commit_test

// What a census gathers for lease status --watch: each owner's last
// renewal and the items that failed most, the same whether a record is
// counted from its status marker or read.

import (
	"context"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/leasetool/lease/census"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// watchCount adds rec to the watch's fields of c the plain way: every
// item with attempts kept and sorted, cut to MostFailedK.
func watchCount(c *census.Census, rec *leasefmt.Record, now float64) {
	live := rec.Live(now)
	if live && rec.RenewedAt >= c.OwnerRenewed[rec.Owner] {
		c.OwnerRenewed[rec.Owner] = rec.RenewedAt
	}
	if rec.Attempts == 0 {
		return
	}
	state := string(rec.Status)
	if !live && (rec.Status == leasefmt.Leased || rec.Status == leasefmt.Committing) {
		state = "expired"
	}
	c.MostFailed = append(c.MostFailed, census.FailedItem{ID: rec.ID, Attempts: rec.Attempts, State: state})
	sort.Slice(c.MostFailed, func(i, j int) bool {
		a, b := c.MostFailed[i], c.MostFailed[j]
		if a.Attempts != b.Attempts {
			return a.Attempts > b.Attempts
		}
		return a.ID < b.ID
	})
	if len(c.MostFailed) > census.MostFailedK {
		c.MostFailed = c.MostFailed[:census.MostFailedK]
	}
}

// failTimes claims id and releases it failed n times (max_attempts
// maxAttempts), from time t on; it returns the time after.
func failTimes(t *testing.T, st *commit.Store, id leasefmt.ID, n, maxAttempts int, tm float64) float64 {
	t.Helper()
	for range n {
		held := claimOne(t, st, id, tm)
		if r := at(st, tm+1).ReleaseFailed(context.Background(), []commit.Item{held}, commit.Failure{ExitStatus: 3}, maxAttempts)[0]; r.Outcome != commit.OK {
			t.Fatalf("release failed %s: %s %s", id.Short(), r.Outcome.Reason(), r.Detail)
		}
		tm += 2
	}
	return tm
}

// TestCensusMostFailedWithAndWithoutMarkers: more items with attempts than
// the list holds, spread over the states (failed, done after failures,
// released, leased, expired) and over shards, with ties; the census gives
// the list of reading every record, from the markers' names and again
// once every marker is removed (so every record is read).
func TestCensusMostFailedWithAndWithoutMarkers(t *testing.T) {
	t.Parallel()
	st, log := hookedTable(t, 4)
	ctx := context.Background()
	var items []commit.Item
	for i := range 30 {
		items = append(items, commit.Item{ID: shardID(i%4, i)})
	}
	at(st, 10).Enqueue(ctx, items)
	tm := 20.0
	for i, it := range items[:24] {
		n := 1 + i%5 // 1..5 attempts: ties across shards
		switch {
		case i < 8: // failed at its last attempt
			tm = failTimes(t, st, it.ID, n, n, tm)
		case i < 14: // done after its failures
			tm = failTimes(t, st, it.ID, n, 0, tm)
			held := claimOne(t, st, it.ID, tm)
			if r := at(st, tm+1).Complete(ctx, []commit.Item{held})[0]; r.Outcome != commit.OK {
				t.Fatalf("complete: %s", r.Outcome.Reason())
			}
			tm += 2
		case i < 20: // released, to be tried again
			tm = failTimes(t, st, it.ID, n, 0, tm)
		default: // leased again after its failures (ttl 100: expired by 1000)
			tm = failTimes(t, st, it.ID, n, 0, tm)
			claimOne(t, st, it.ID, tm)
			tm += 2
		}
	}
	for _, it := range items[:8] {
		os.Remove(st.Abs(st.QueuePath(it.ID))) // as UnqueueFailed does
	}
	var marked census.Census
	for _, now := range []float64{tm + 10, 1000} { // the leases live, then expired
		want := readAll(t, st, now)
		if len(want.MostFailed) != census.MostFailedK || want.MostFailed[0].Attempts != 5 {
			t.Fatalf("the table is not what the test built: %+v", want.MostFailed)
		}
		log.reset(nil)
		var err error
		if marked, err = census.Listing(ctx, at(st, now), 2); err != nil {
			t.Fatal(err)
		}
		if n := log.count(seam.OpRead); n != 10 {
			t.Errorf("the census read %d records, want the 10 of queued items (the 14 done and failed from their markers)", n)
		}
		// The tally's census: the same lists, from the buckets' names
		// and the records of the queued items.
		if tally, err := census.Take(ctx, at(st, now), 2); err != nil || tally.Method != census.MethodTally ||
			!reflect.DeepEqual(tally.MostFailed, want.MostFailed) || !reflect.DeepEqual(tally.OwnerRenewed, want.OwnerRenewed) {
			t.Errorf("the tally's census at %g: %v\n got %+v %v\nwant %+v %v", now, err, tally.MostFailed, tally.OwnerRenewed, want.MostFailed, want.OwnerRenewed)
		}
		if !reflect.DeepEqual(marked.MostFailed, want.MostFailed) || !reflect.DeepEqual(marked.OwnerRenewed, want.OwnerRenewed) {
			t.Errorf("census at %g with markers:\n got %+v %v\nwant %+v %v", now, marked.MostFailed, marked.OwnerRenewed, want.MostFailed, want.OwnerRenewed)
		}
		if now < 1000 && (len(marked.OwnerRenewed) != 1 || marked.OwnerRenewed["w"] != tm-2) {
			t.Errorf("owner renewals %v, want w's last claim at %g", marked.OwnerRenewed, tm-2)
		}
	}
	// Every marker removed: each record is read, and the answer is the same.
	for sh := range 4 {
		ents, _ := os.ReadDir(st.Abs(st.ShardDir(leasefmt.Work, sh)))
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".json") {
				if _, _, _, ok := layout.ParseMarkerName(e.Name()); ok {
					os.Remove(st.Abs(st.ShardDir(leasefmt.Work, sh)) + "/" + e.Name())
				}
			}
		}
	}
	log.reset(nil)
	bare, err := census.Listing(ctx, at(st, 1000), 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := log.count(seam.OpRead); n != 24 {
		t.Errorf("without markers the census read %d records, want all 24", n)
	}
	all := readAll(t, st, 1000)
	all.Method = census.MethodListing
	if !reflect.DeepEqual(bare, marked) || !reflect.DeepEqual(bare, all) {
		t.Errorf("census without markers:\n got %+v\nwant %+v", bare, marked)
	}
}
