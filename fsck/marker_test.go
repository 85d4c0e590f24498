package fsck_test

// Status markers (docs/design.md#statistics): a marker that is its record's
// file is no finding; one left by a rewrite is debris a repair removes; a
// done record that another program finished without one gets one.

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasetool/lease/census"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/fsck"
	"github.com/leasetool/lease/leasefmt"
)

func checkMarkers(t *testing.T, root string, repair bool) (*fsck.Summary, []*fsck.Finding) {
	t.Helper()
	fsys, err := seam.OS(root)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	var found []*fsck.Finding
	sum, err := fsck.Check(context.Background(), root, fsys, fsck.Options{Repair: repair, Now: 2000}, func(f *fsck.Finding) { found = append(found, f) })
	if err != nil {
		t.Fatal(err)
	}
	return sum, found
}

func TestMarkersCheckedAndRepaired(t *testing.T) {
	root := filepath.Join(t.TempDir(), "table")
	durable.MkdirRoot(root)
	st, err := commit.Open(root, commit.Options{Create: &leasefmt.Table{WorkShards: 2, TargetShards: 2, CreatedAt: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	a, _ := leasefmt.ParseID("00000000aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	b, _ := leasefmt.ParseID("00000001bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	var held []commit.Item
	for _, r := range st.At(1500).Claim(ctx, []commit.Item{{ID: a}, {ID: b}}, "w", 100) {
		held = append(held, commit.Item{ID: r.ID, Token: r.Token})
	}
	for _, r := range st.At(1510).Complete(ctx, held) {
		if r.Outcome != commit.OK {
			t.Fatalf("complete: %s %s", r.Outcome.Reason(), r.Detail)
		}
	}
	if sum, found := checkMarkers(t, root, false); len(found) != 0 || sum.Exit() != 0 {
		t.Fatalf("a table with fresh markers: exit %d, %v", sum.Exit(), found)
	}
	// Another program rewrites a (new file, renamed over) and finishes b
	// again without a marker (its marker removed).
	ma := st.Abs(st.MarkerPath(&leasefmt.Record{ID: a, Status: leasefmt.Done}))
	mb := st.Abs(st.MarkerPath(&leasefmt.Record{ID: b, Status: leasefmt.Done}))
	pa := st.Abs(st.RecordPath(leasefmt.Work, a))
	data, _ := os.ReadFile(pa)
	os.WriteFile(pa+".new", data, 0o644)
	if err := os.Rename(pa+".new", pa); err != nil {
		t.Fatal(err)
	}
	os.Remove(mb)
	sum, found := checkMarkers(t, root, false)
	found = nonTally(found) // the tally's own findings of a's rewrite: tally_test.go
	if len(found) != 1 || found[0].Kind != fsck.KindMarker || found[0].ID != a || sum.Exit() != 0 {
		t.Fatalf("want one marker notice for a, exit 0: exit %d, %v", sum.Exit(), found)
	}
	sum, found = checkMarkers(t, root, true)
	found = nonTally(found)
	if len(found) != 1 || !found[0].Repaired || sum.Marked < 1 {
		t.Fatalf("repair: marked %d, %v", sum.Marked, found)
	}
	// Both records have a marker of their own now: b's made by this repair,
	// a's by this one too or, when the listing put a's record before its
	// stale marker, by the next.
	marked := sum.Marked
	sum, found = checkMarkers(t, root, true)
	if len(found) != 0 || marked+sum.Marked != 2 {
		t.Fatalf("second repair: marked %d+%d, %v", marked, sum.Marked, found)
	}
	for _, m := range []string{ma, mb} {
		mfi, err1 := os.Stat(m)
		rfi, err2 := os.Stat(m[:len(m)-len(".done.0")] + ".json")
		if err1 != nil || err2 != nil || !os.SameFile(mfi, rfi) {
			t.Errorf("%s is not its record's file: %v %v", filepath.Base(m), err1, err2)
		}
	}
	if c, _ := census.Take(ctx, st.At(2000), 1); c.Done != 2 {
		t.Fatalf("census %+v", c)
	}
}

func nonTally(found []*fsck.Finding) []*fsck.Finding {
	var out []*fsck.Finding
	for _, f := range found {
		if f.Kind != fsck.KindTally {
			out = append(out, f)
		}
	}
	return out
}
