package commit_test

// Census from the listings: done and failed records with their status
// marker are counted without being read; every record the markers cannot
// vouch for (queued, unmarked, rewritten since its marker) is read, so the
// counts stay those of reading every record.

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/leasetool/lease/census"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
)

// readAll counts what every work record says: the census of reading them
// all, as it was before markers.
func readAll(t *testing.T, st *commit.Store, now float64) census.Census {
	t.Helper()
	c := census.Census{Owners: map[string]int64{}, OwnerRenewed: map[string]float64{}, MostFailed: []census.FailedItem{}}
	for sh := range st.Table().WorkShards {
		ents, _ := os.ReadDir(st.Abs(st.ShardDir(leasefmt.Work, sh)))
		for _, e := range ents {
			base, ok := strings.CutSuffix(e.Name(), ".json")
			if !ok {
				continue
			}
			rec, err := st.Read(context.Background(), leasefmt.Work, leasefmt.ID(base))
			if err != nil {
				t.Fatal(err)
			}
			c.Records++
			c.Attempts += rec.Attempts
			watchCount(&c, rec, now)
			if rec.Attempts > 0 && rec.Status != leasefmt.Done && rec.Status != leasefmt.Failed {
				c.Retried++
			}
			switch {
			case rec.Status == leasefmt.Done:
				c.Done++
			case rec.Status == leasefmt.Failed:
				c.Failed++
			case rec.Status == leasefmt.Released:
				c.Released++
			case !rec.Live(now):
				c.Expired++
			case rec.Status == leasefmt.Committing:
				c.Committing++
			default:
				c.Leased++
			}
			if rec.Live(now) {
				c.Owners[rec.Owner]++
			}
		}
		q, _ := os.ReadDir(st.Abs(st.QueueShardDir(sh)))
		for _, e := range q {
			c.Queued++
			if _, err := os.Stat(st.Abs(st.RecordPath(leasefmt.Work, leasefmt.ID(e.Name())))); err != nil {
				c.Free++
			}
		}
	}
	return c
}

func TestCensusCountsMarkedRecordsWithoutReading(t *testing.T) {
	t.Parallel()
	st, log := hookedTable(t, 4)
	ctx := context.Background()
	var items []commit.Item
	for i := range 40 {
		items = append(items, commit.Item{ID: shardID(i%4, i)})
	}
	at(st, 10).Enqueue(ctx, items)
	held := make([]commit.Item, 30)
	for i, r := range at(st, 20).Claim(ctx, items[:30], "w", 1000) {
		held[i] = commit.Item{ID: r.ID, Token: r.Token}
	}
	at(st, 30).Complete(ctx, held[:20])
	f := commit.Failure{ExitStatus: 1}
	at(st, 31).ReleaseFailed(ctx, held[20:24], f, 1) // failed at once
	at(st, 31).ReleaseFailed(ctx, held[24:26], f, 5) // released, one attempt
	at(st, 31).UnqueueFailed(ctx, nil)
	for _, it := range held[20:24] {
		os.Remove(st.Abs(st.QueuePath(it.ID))) // as UnqueueFailed does
	}
	want := readAll(t, st, 40)
	if want.Done != 20 || want.Failed != 4 || want.Released != 2 || want.Leased != 4 || want.Free != 10 {
		t.Fatalf("the table is not what the test built: %+v", want)
	}
	log.reset(nil)
	got, err := census.Listing(ctx, at(st, 40), 2)
	if err != nil {
		t.Fatal(err)
	}
	want.Method = census.MethodListing
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("census\n got %+v\nwant %+v", got, want)
	}
	// Only the 6 records of queued items are read: not one of the 24 done or failed.
	if n := log.count(seam.OpRead); n != 6 {
		t.Errorf("the census read %d records, want the 6 of queued items", n)
	}
}

// A program that knows nothing of markers rewrites records by the rename
// of docs/design.md#durability: a done record made released again without a
// queue entry, and a record completed with no marker made. The listing's
// census reads both and counts what they say. (Such a program breaks the
// tally: lease fsck finds it, see fsck's tests.)
func TestCensusDistrustsMarkersOfRewrittenRecords(t *testing.T) {
	t.Parallel()
	st, log := hookedTable(t, 2)
	ctx := context.Background()
	a, b := shardID(0, 1), shardID(1, 2)
	var held []commit.Item
	for _, r := range at(st, 20).Claim(ctx, []commit.Item{{ID: a}, {ID: b}}, "w", 1000) {
		held = append(held, commit.Item{ID: r.ID, Token: r.Token})
	}
	at(st, 30).Complete(ctx, held)
	marker := st.Abs(st.MarkerPath(&leasefmt.Record{ID: a, Status: leasefmt.Done}))
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no marker after complete: %v", err)
	}
	// The other program: a's record rewritten released (new file, renamed over).
	rec, _ := st.Read(ctx, leasefmt.Work, a)
	rec.Status = leasefmt.Released
	data, err := leasefmt.Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	p := st.Abs(st.RecordPath(leasefmt.Work, a))
	tmp := filepath.Join(filepath.Dir(p), "."+string(a)+".json.tmp.other")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	// And b's marker removed, as an older fsck would.
	os.Remove(st.Abs(st.MarkerPath(&leasefmt.Record{ID: b, Status: leasefmt.Done})))
	log.reset(nil)
	got, err := census.Listing(ctx, at(st, 40), 2)
	if err != nil {
		t.Fatal(err)
	}
	if got.Released != 1 || got.Done != 1 || got.Records != 2 {
		t.Fatalf("census %+v, want a released (rewritten under its marker) and b done (unmarked)", got)
	}
	if n := log.count(seam.OpRead); n != 2 {
		t.Errorf("the census read %d records, want both", n)
	}
}

// lease retry replaces a failed record: its marker goes with it.
func TestRetryRemovesTheMarker(t *testing.T) {
	t.Parallel()
	st, _ := hookedTable(t, 2)
	ctx := context.Background()
	id := shardID(1, 3)
	at(st, 10).Enqueue(ctx, []commit.Item{{ID: id}})
	held := claimOne(t, st, id, 20)
	r := at(st, 21).ReleaseFailed(ctx, []commit.Item{held}, commit.Failure{ExitStatus: 2}, 1)[0]
	if r.Outcome != commit.OK || r.Record.Status != leasefmt.Failed {
		t.Fatalf("fail: %s %+v", r.Outcome.Reason(), r.Record)
	}
	m := st.Abs(st.MarkerPath(r.Record))
	if _, err := os.Stat(m); err != nil {
		t.Fatalf("no marker of the failed record: %v", err)
	}
	if r := at(st, 30).RetryFailed(ctx, []commit.Item{{ID: id}})[0]; r.Outcome != commit.OK {
		t.Fatalf("retry: %s %s", r.Outcome.Reason(), r.Detail)
	}
	if _, err := os.Stat(m); !os.IsNotExist(err) {
		t.Fatalf("the marker of the failed record outlived its retry: %v", err)
	}
	if c, _ := census.Take(ctx, at(st, 31), 1); c.Failed != 0 || c.Released != 1 || c.Queued != 1 {
		t.Fatalf("census after retry: %+v", c)
	}
}
