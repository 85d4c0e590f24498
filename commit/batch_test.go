package commit_test

// Batches through the FS seam: N records in K shards cost N file fsyncs
// and K directory fsyncs (G4), and refused items cost nothing (G7).

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// TestGroupCommitCounts: a batch of N records in K shards makes exactly N
// file fsyncs and K directory fsyncs (G4), each directory after its renames
// (G3), each temp file fsynced before its rename (G1).
func TestGroupCommitCounts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ n, k, shards int }{
		{1, 1, 16}, {2, 1, 16}, {10, 1, 1}, {10, 10, 16}, {16, 16, 16}, {64, 7, 16}, {100, 16, 16}, {90, 3, 256}, {300, 256, 256},
	} {
		t.Run(fmt.Sprintf("N=%d/K=%d", tc.n, tc.k), func(t *testing.T) {
			st, log := hookedTable(t, tc.shards)
			items := spread(tc.n, tc.k)
			wantTally := map[string]int{"claim": 2, "renew": 0}
			check := func(what string, res []commit.Result, files int) {
				t.Helper()
				ops := log.snapshot()
				for _, r := range res {
					if r.Outcome != commit.OK {
						t.Fatalf("%s %s: %s %s", what, r.ID, r.Outcome.Reason(), r.Detail)
					}
				}
				if got := log.count(seam.OpFsync); got != files {
					t.Errorf("%s: %d file fsyncs, want %d", what, got, files)
				}
				synced := checkDirsSynced(t, ops)
				want := dirsOf(st, items)
				// The tally's directories (tally.go) are fsynced once each
				// too: a claim's of the flags of unqueued items (and the
				// tally itself when the flags' directory is made), a
				// complete's of its bucket.
				tally := 0
				for d, n := range synced {
					if d == layout.TallyDir || strings.HasPrefix(d, layout.TallyDir+"/") {
						tally++
						if n != 1 {
							t.Errorf("%s: tally directory %s fsynced %d times", what, d, n)
						}
						delete(synced, d)
					}
				}
				// A claim's held/ names (held.go) are not fsynced; the root
				// is, once, when the first claim makes held/.
				if n := synced[layout.HeldDir]; n != 0 {
					t.Errorf("%s: held/ fsynced %d times, want none", what, n)
				}
				for _, d := range []string{"."} {
					if n, ok := synced[d]; ok && what == "claim" {
						tally++
						if n != 1 {
							t.Errorf("%s: directory %s fsynced %d times", what, d, n)
						}
						delete(synced, d)
					}
				}
				if what == "claim" && tally > wantTally[what]+2 || what != "claim" && tally > wantTally[what] {
					t.Errorf("%s: %d tally directories fsynced, want at most %d", what, tally, wantTally[what])
				}
				if len(synced) != len(want) || log.count(seam.OpSyncDir) != len(want)+tally {
					t.Errorf("%s: %d directory fsyncs of %d directories (%v), want one each of %d", what, log.count(seam.OpSyncDir), len(synced), synced, len(want))
				}
				for d := range want {
					if synced[d] != 1 {
						t.Errorf("%s: directory %s fsynced %d times", what, d, synced[d])
					}
				}
				checkG1(t, ops, true)
			}
			before := st.Stats().Snapshot(0)
			res := at(st, 1000).Claim(context.Background(), items, "host/w1", 60)
			check("claim", res, tc.n)
			if s := st.Stats().Snapshot(0); s.FileSyncs-before.FileSyncs != int64(tc.n) || s.DirectorySyncs-before.DirectorySyncs != int64(tc.k+3) { // + the tally's 2 and the root (held.go)
				t.Errorf("stats: %d file syncs, %d directory syncs; want %d, %d", s.FileSyncs, s.DirectorySyncs, tc.n, tc.k)
			}
			for i, r := range res {
				if r.ID != items[i].ID || r.Token != 1 {
					t.Fatalf("result %d is %s token %d, want %s token 1 (input order)", i, r.ID, r.Token, items[i].ID)
				}
			}
			h := held(t, res)
			log.reset(nil)
			check("renew", at(st, 1010).Renew(context.Background(), h, 60), tc.n)
			for _, it := range h {
				if r := readRecord(t, st, it.ID); r.ExpiresAt != 1070 || r.Token != 1 || r.RenewedAt != 1010 {
					t.Fatalf("after renew %s: %+v", it.ID, r)
				}
			}
			// Complete is one group commit: leased to done.
			log.reset(nil)
			res = at(st, 1020).Complete(context.Background(), h)
			for _, r := range res {
				if r.Outcome != commit.OK || r.Record.Status != leasefmt.Done {
					t.Fatalf("complete %s: %s %s", r.ID, r.Outcome.Reason(), r.Detail)
				}
			}
			// Plus the tally when the bucket is new; the bucket itself is
			// not fsynced (tally.go).
			if f, d := log.count(seam.OpFsync), log.count(seam.OpSyncDir); f != tc.n || d != tc.k+1 {
				t.Errorf("complete: %d file and %d directory fsyncs, want %d and %d", f, d, tc.n, tc.k+1)
			}
			if synced := checkDirsSynced(t, log.snapshot()); synced[layout.TallyBucketDir(1020/layout.TallyBucket*layout.TallyBucket)] != 0 {
				t.Errorf("complete: the tally's bucket fsynced %d times, want none", synced[layout.TallyBucketDir(1020/layout.TallyBucket*layout.TallyBucket)])
			}
			if left := tempFiles(t, st.Root()); len(left) > 0 {
				t.Errorf("temp files left: %v", left)
			}
		})
	}
}

// TestRefusedItemsCostNothing: G7, a stale token, a done, released, missing
// or corrupt record (and a held or expired one) causes no create, write,
// fsync, rename or directory fsync, and the record is left as it was.
func TestRefusedItemsCostNothing(t *testing.T) {
	t.Parallel()
	st, log := hookedTable(t, 16)
	ids := map[string]leasefmt.ID{}
	for i, name := range []string{"leased", "done", "released", "missing", "corrupt", "expired"} {
		ids[name] = shardID(i, i)
	}
	for _, name := range []string{"leased", "done", "released", "corrupt", "expired"} {
		if r := at(st, 1000).Claim(context.Background(), []commit.Item{{ID: ids[name]}}, "host/w1", 60); r[0].Outcome != commit.OK {
			t.Fatal(r[0].Detail)
		}
	}
	at(st, 1001).Complete(context.Background(), []commit.Item{{ID: ids["done"], Token: 1}})
	at(st, 1001).Release(context.Background(), []commit.Item{{ID: ids["released"], Token: 1}})
	corruptPath := st.Abs(st.RecordPath(leasefmt.Work, ids["corrupt"]))
	if err := os.WriteFile(corruptPath, []byte(`{"schema":"lease.work/v1","token":NaN}`), 0o644); err != nil {
		t.Fatal(err)
	}
	exp := readRecord(t, st, ids["expired"])
	exp.ExpiresAt = 1001
	if err := st.WriteOne(exp); err != nil {
		t.Fatal(err)
	}
	before := snapshotTree(t, st.Root())

	writes := []seam.Op{seam.OpCreate, seam.OpWrite, seam.OpFsync, seam.OpClose, seam.OpRename, seam.OpRenameNoReplace, seam.OpRemove, seam.OpMkdir, seam.OpSyncDir}
	for _, tc := range []struct {
		name string
		run  func() []commit.Result
		want commit.Outcome
	}{
		{"stale token", func() []commit.Result {
			return at(st, 1010).Renew(context.Background(), []commit.Item{{ID: ids["leased"], Token: 2}}, 60)
		}, commit.StaleToken},
		{"older token", func() []commit.Result {
			return at(st, 1010).Release(context.Background(), []commit.Item{{ID: ids["expired"], Token: 7}})
		}, commit.StaleToken},
		{"done", func() []commit.Result {
			return at(st, 1010).Renew(context.Background(), []commit.Item{{ID: ids["done"], Token: 1}}, 60)
		}, commit.Done},
		{"released", func() []commit.Result {
			return at(st, 1010).Renew(context.Background(), []commit.Item{{ID: ids["released"], Token: 1}}, 60)
		}, commit.Released},
		{"missing", func() []commit.Result {
			return at(st, 1010).Renew(context.Background(), []commit.Item{{ID: ids["missing"], Token: 1}}, 60)
		}, commit.Missing},
		{"corrupt renew", func() []commit.Result {
			return at(st, 1010).Renew(context.Background(), []commit.Item{{ID: ids["corrupt"], Token: 1}}, 60)
		}, commit.Corrupt},
		{"corrupt claim", func() []commit.Result {
			return at(st, 5000).Claim(context.Background(), []commit.Item{{ID: ids["corrupt"]}}, "host/w2", 60)
		}, commit.Corrupt},
		{"expired", func() []commit.Result {
			return at(st, 1010).Renew(context.Background(), []commit.Item{{ID: ids["expired"], Token: 1}}, 60)
		}, commit.Expired},
		{"held", func() []commit.Result {
			return at(st, 1010).Claim(context.Background(), []commit.Item{{ID: ids["leased"]}}, "host/w2", 60)
		}, commit.Held},
		{"done claim", func() []commit.Result {
			return at(st, 9999).Claim(context.Background(), []commit.Item{{ID: ids["done"]}}, "host/w2", 60)
		}, commit.Done},
		{"complete stale", func() []commit.Result {
			return at(st, 1010).Complete(context.Background(), []commit.Item{{ID: ids["leased"], Token: 9}})
		}, commit.StaleToken},
		{"all at once", func() []commit.Result {
			return at(st, 1010).Renew(context.Background(), []commit.Item{{ID: ids["leased"], Token: 2}, {ID: ids["done"], Token: 1}, {ID: ids["released"], Token: 1},
				{ID: ids["missing"], Token: 1}, {ID: ids["corrupt"], Token: 1}, {ID: ids["expired"], Token: 1}}, 60)
		}, commit.Outcome(-1)},
	} {
		log.reset(nil)
		res := tc.run()
		for _, r := range res {
			if r.Outcome == commit.OK || tc.want >= 0 && r.Outcome != tc.want {
				t.Errorf("%s: %s is %s (%s), want %s", tc.name, r.ID, r.Outcome.Reason(), r.Detail, tc.want.Reason())
			}
		}
		for _, o := range log.snapshot() {
			if slices.Contains(writes, o.op) {
				t.Errorf("%s: G7 violated: %s %s", tc.name, o.op, o.name)
			}
		}
		if after := snapshotTree(t, st.Root()); !after.equal(before) {
			t.Errorf("%s: the table changed: %s", tc.name, after.diff(before))
		}
	}
}
