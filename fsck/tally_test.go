package fsck_test

// The tally (docs/design.md#statistics): on a trusted table a finished
// record without its link, a link of nothing and an unfinished record
// neither queued nor flagged are errors a repair fixes; a table whose tally
// nothing trusts (made before it) gets it built and trusted by a repair,
// after which the summary counts from it, the same counts as the listing's.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/leasetool/lease/census"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/fsck"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

func tallyFindings(found []*fsck.Finding) []*fsck.Finding {
	var out []*fsck.Finding
	for _, f := range found {
		if f.Kind == fsck.KindTally {
			out = append(out, f)
		}
	}
	return out
}

func sameCensus(t *testing.T, st *commit.Store, wantMethod string) {
	t.Helper()
	ctx := context.Background()
	got, err := census.Take(ctx, st.At(2000), 2)
	if err != nil {
		t.Fatal(err)
	}
	want, err := census.Listing(ctx, st.At(2000), 2)
	if err != nil {
		t.Fatal(err)
	}
	if got.Method != wantMethod {
		t.Fatalf("census by %s, want %s", got.Method, wantMethod)
	}
	got.Method = want.Method
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("census\n got %+v\nwant %+v", got, want)
	}
}

func TestTallyCheckedAndRepaired(t *testing.T) {
	root := filepath.Join(t.TempDir(), "table")
	durable.MkdirRoot(root)
	st, err := commit.Open(root, commit.Options{Create: &leasefmt.Table{WorkShards: 2, TargetShards: 2, CreatedAt: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	ids := make([]leasefmt.ID, 4)
	var items []commit.Item
	for i := range ids {
		ids[i], _ = leasefmt.ParseID(fmt.Sprintf("%08x%056x", i, i+1))
		items = append(items, commit.Item{ID: ids[i]})
	}
	st.At(1400).Enqueue(ctx, items[:3]) // ids[3] is claimed by name, unqueued
	var held []commit.Item
	for _, r := range st.At(1500).Claim(ctx, items, "w", 100) {
		if r.Outcome != commit.OK {
			t.Fatalf("claim %s: %s", r.ID, r.Detail)
		}
		held = append(held, commit.Item{ID: r.ID, Token: r.Token})
	}
	st.At(1510).Complete(ctx, held[:2])
	if sum, found := checkMarkers(t, root, false); len(found) != 0 || sum.Exit() != 0 || !sum.Trusted {
		t.Fatalf("a fresh table: exit %d, trusted %v, %v", sum.Exit(), sum.Trusted, found)
	}
	sameCensus(t, st, census.MethodTally)

	// Damage: a done record's link removed, a link of nothing planted, the
	// flag of the unqueued leased item removed.
	r0, _ := st.Read(ctx, leasefmt.Work, ids[0])
	os.Remove(st.Abs(layout.TallyPath(r0)))
	stale := &leasefmt.Record{ID: ids[2], Status: leasefmt.Done, RenewedAt: 1510}
	if err := os.Link(st.Abs(st.RecordPath(leasefmt.Work, ids[2])), st.Abs(layout.TallyPath(stale))); err != nil {
		t.Fatal(err)
	}
	os.Remove(st.Abs(layout.UnqueuedFlag(ids[3])))
	sum, found := checkMarkers(t, root, false)
	if tf := tallyFindings(found); len(tf) != 3 || sum.Exit() != 4 {
		t.Fatalf("want 3 tally errors, exit 4: exit %d, %v", sum.Exit(), found)
	}
	sum, found = checkMarkers(t, root, true)
	for _, f := range tallyFindings(found) {
		if !f.Repaired {
			t.Fatalf("not repaired: %v", f)
		}
	}
	if len(tallyFindings(found)) != 3 || sum.Exit() != 1 || !sum.Trusted {
		t.Fatalf("repair: exit %d, trusted %v, %v", sum.Exit(), sum.Trusted, found)
	}
	if sum, found := checkMarkers(t, root, false); len(found) != 0 || sum.Exit() != 0 {
		t.Fatalf("after the repair: exit %d, %v", sum.Exit(), found)
	}
	sameCensus(t, st, census.MethodTally)

	// A table from before the tally: no tally at all. Nothing is wrong;
	// a repair builds it and trusts it.
	if err := os.RemoveAll(st.Abs(layout.TallyDir)); err != nil {
		t.Fatal(err)
	}
	st.Close() // its handles of the tally's directories are of the ones removed
	if st, err = commit.Open(root, commit.Options{}); err != nil {
		t.Fatal(err)
	}
	sameCensus(t, st, census.MethodListing)
	if sum, found := checkMarkers(t, root, false); len(found) != 0 || sum.Exit() != 0 || sum.Trusted {
		t.Fatalf("an old table: exit %d, trusted %v, %v", sum.Exit(), sum.Trusted, found)
	}
	sum, found = checkMarkers(t, root, true)
	if len(found) != 0 || sum.Exit() != 0 || !sum.Trusted || sum.Tallied != 3 {
		t.Fatalf("repair of an old table: exit %d, trusted %v, tallied %d, %v", sum.Exit(), sum.Trusted, sum.Tallied, found)
	}
	sameCensus(t, st, census.MethodTally)
}
