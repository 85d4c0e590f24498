package commit_test

// The group writer under failure (G9) and in chunks: a failure at any
// write-related call restores every record of the chunk, and a call larger
// than GroupChunkLocks is committed in chunks of whole groups. The grp*
// helpers are in groups_test.go.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/leasefmt"
)

// grpFailAt returns a hook that fails the i-th call (from 0) among the
// write-related ones (create, write, fsync, rename, fsyncdir), and the
// counter of those calls; i < 0 fails none.
func grpFailAt(i int64, fired *atomic.Bool) (seam.Hook, *atomic.Int64) {
	var n atomic.Int64
	return func(op seam.Op, name string) error {
		switch op {
		case seam.OpCreate, seam.OpWrite, seam.OpFsync, seam.OpRename, seam.OpRenameNoReplace, seam.OpSyncDir:
			if n.Add(1)-1 == i {
				fired.Store(true)
				return &fs.PathError{Op: string(op), Path: name, Err: errors.New("injected failure")}
			}
		}
		return nil
	}, &n
}

// restoreCase sets up a table in root and runs one group operation on st,
// returning its results.
type restoreCase struct {
	name  string
	setup func(t *testing.T, root string)
	run   func(st *commit.Store) []commit.GroupResult
	// records is the number of records the operation writes; dirs the
	// distinct directories they are in.
	records, dirs int
}

// TestGroupRestoresEveryRecordOnEachFailure (G9): a failure injected at
// each write-related call of a 4-target group claim and of a renewal of two
// 4-target groups leaves every file byte-identical to before, and no group
// is reported written.
func TestGroupRestoresEveryRecordOnEachFailure(t *testing.T) {
	t.Parallel()
	gid := grpID("group-g9")
	targets := grpIDs("g9", 4)
	const now, ttl = 1000.0, 100.0
	other := grpID("other")
	claimSetup := func(t *testing.T, root string) {
		st := grpOpen(t, root, nil)
		// The manifest exists (expired), two targets exist (expired, one of
		// them in bytes no encoder of ours writes), two are missing.
		grpWriteRecord(t, root, st, &leasefmt.Record{Kind: leasefmt.Group, ID: gid, Status: leasefmt.Leased, Owner: "old",
			Token: 3, ClaimedAt: 10, RenewedAt: 10, ExpiresAt: 20, Targets: []leasefmt.ID{targets[0]},
			Extra: []leasefmt.Field{{Key: "note", Value: []byte(`"kept"`)}}})
		grpWriteRecord(t, root, st, &leasefmt.Record{Kind: leasefmt.Target, ID: targets[0], Status: leasefmt.Released, Owner: "old",
			Token: 3, ClaimedAt: 10, RenewedAt: 10, ExpiresAt: 20, Group: gid})
		odd := fmt.Sprintf("{ \"schema\": \"lease.target/v1\", \"id\": %q, \"status\": \"leased\", \"owner\": \"x\",\n"+
			"  \"token\": 9, \"claimed_at\": 1.50, \"renewed_at\": 1.5, \"expires_at\": 2.0, \"group\": %q, \"x\": [1, 2] }\n", targets[1], other)
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(st.RecordPath(leasefmt.Target, targets[1]))), []byte(odd), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	renewGroups := [][]leasefmt.ID{grpIDs("r1", 4), grpIDs("r2", 4)}
	var renewItems []commit.Item
	renewSetup := func(t *testing.T, root string) {
		st := grpOpen(t, root, nil)
		renewItems = renewItems[:0]
		for _, ts := range renewGroups {
			r, err := at(st, now).ClaimGroup(context.Background(), groups.ID(ts), ts, "holder", ttl)
			if err != nil || r.Outcome != commit.OK {
				t.Fatalf("claim: %v %s %s", err, r.Outcome.Reason(), r.Detail)
			}
			renewItems = append(renewItems, commit.Item{ID: r.ID, Token: r.Token})
		}
	}
	grpDirsOf := func(sets ...[]leasefmt.ID) int {
		st := &leasefmt.Table{WorkShards: 16, TargetShards: 16}
		d := map[string]bool{}
		for _, ts := range sets {
			d[path.Dir(st.RecordPath(leasefmt.Group, groups.ID(ts)))] = true
			for _, id := range ts {
				d[path.Dir(st.RecordPath(leasefmt.Target, id))] = true
			}
		}
		return len(d)
	}
	claimDirs := map[string]bool{}
	{
		st := &leasefmt.Table{WorkShards: 16, TargetShards: 16}
		claimDirs[path.Dir(st.RecordPath(leasefmt.Group, gid))] = true
		for _, id := range targets {
			claimDirs[path.Dir(st.RecordPath(leasefmt.Target, id))] = true
		}
	}
	cases := []restoreCase{
		{name: "claim", setup: claimSetup, records: 5, dirs: len(claimDirs),
			run: func(st *commit.Store) []commit.GroupResult {
				r, err := at(st, now).ClaimGroup(context.Background(), gid, []leasefmt.ID{targets[2], targets[0], targets[3], targets[1]}, "new", ttl)
				if err != nil {
					panic(err)
				}
				return []commit.GroupResult{r}
			}},
		{name: "renew", setup: renewSetup, records: 10, dirs: grpDirsOf(renewGroups...),
			run: func(st *commit.Store) []commit.GroupResult {
				res, err := at(st, now+10).RenewGroups(context.Background(), renewItems, ttl)
				if err != nil {
					panic(err)
				}
				return res
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A clean run counts the calls and proves the operation writes.
			root := t.TempDir()
			tc.setup(t, root)
			var never atomic.Bool
			hook, calls := grpFailAt(-1, &never)
			st := grpOpen(t, root, hook, commit.Options{Writers: 1})
			before := grpSnapshot(t, root)
			for _, r := range tc.run(st) {
				if r.Outcome != commit.OK {
					t.Fatalf("clean run: %s %s %s", r.ID.Short(), r.Outcome.Reason(), r.Detail)
				}
			}
			if len(grpDiff(before, grpSnapshot(t, root))) == 0 {
				t.Fatal("clean run changed nothing")
			}
			n := calls.Load()
			if want := int64(4*tc.records + tc.dirs); n != want {
				t.Fatalf("clean run made %d write-related calls, want %d (4 per record, one fsync per directory)", n, want)
			}
			for i := range n {
				root := t.TempDir()
				tc.setup(t, root)
				before := grpSnapshot(t, root)
				var fired atomic.Bool
				hook, _ := grpFailAt(i, &fired)
				st := grpOpen(t, root, hook, commit.Options{Writers: 1})
				res := tc.run(st)
				if !fired.Load() {
					t.Fatalf("call %d: the failure was not injected", i)
				}
				for _, r := range res {
					if r.Outcome != commit.IOError {
						t.Errorf("call %d failed: group %s is %s (%s), want io-error", i, r.ID.Short(), r.Outcome.Reason(), r.Detail)
					}
				}
				if d := grpDiff(before, grpSnapshot(t, root)); len(d) > 0 {
					t.Errorf("call %d failed: the table changed:\n%s", i, strings.Join(d, "\n"))
				}
			}
		})
	}
}

// TestRenewGroupsInChunks: a call larger than GroupChunkLocks is committed
// in chunks of whole groups in GID order, each fsyncing its directories
// once; a failure in the last chunk restores that chunk, leaves earlier
// chunks renewed, and reports no group as renewed.
func TestRenewGroupsInChunks(t *testing.T) {
	defer func(n int) { *commit.GroupChunkLocks = n }(*commit.GroupChunkLocks)
	*commit.GroupChunkLocks = 10 // two groups of 1+4 locks per chunk
	const now, ttl = 1000.0, 100.0
	var sets [][]leasefmt.ID
	for g := range 6 {
		sets = append(sets, grpIDs(fmt.Sprintf("chunk-%d", g), 4))
	}
	slices.SortFunc(sets, func(a, b []leasefmt.ID) int {
		return strings.Compare(string(groups.ID(a)), string(groups.ID(b)))
	})
	layout := &leasefmt.Table{WorkShards: 16, TargetShards: 16}
	wantDirs := 0
	for c := 0; c < len(sets); c += 2 {
		d := map[string]bool{}
		for _, ts := range sets[c : c+2] {
			d[path.Dir(layout.RecordPath(leasefmt.Group, groups.ID(ts)))] = true
			for _, id := range ts {
				d[path.Dir(layout.RecordPath(leasefmt.Target, id))] = true
			}
		}
		wantDirs += len(d)
	}
	setup := func(t *testing.T, hook seam.Hook) (string, *commit.Store, []commit.Item) {
		root := t.TempDir()
		st := grpOpen(t, root, nil)
		var items []commit.Item
		for _, ts := range sets {
			r, err := at(st, now).ClaimGroup(context.Background(), groups.ID(ts), ts, "me", ttl)
			if err != nil || r.Outcome != commit.OK {
				t.Fatalf("claim: %v %s", err, r.Detail)
			}
			items = append(items, commit.Item{ID: r.ID, Token: r.Token})
		}
		slices.Reverse(items) // input order does not matter
		return root, grpOpen(t, root, hook), items
	}
	t.Run("all renewed", func(t *testing.T) {
		root, _, items := setup(t, nil)
		// Counted per record: under syncfs one syncfs stands for them.
		st := grpOpen(t, root, nil, commit.Options{Sync: new(durable.Record)})
		res, err := at(st, now+10).RenewGroups(context.Background(), items, ttl)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Outcome != commit.OK {
				t.Errorf("group %s: %s %s", r.ID.Short(), r.Outcome.Reason(), r.Detail)
			}
		}
		if got := st.Stats().DirectorySyncs.Load(); got != int64(wantDirs) {
			t.Errorf("%d directory fsyncs, want %d (each chunk's distinct directories once)", got, wantDirs)
		}
	})
	t.Run("last chunk fails", func(t *testing.T) {
		last := groups.ID(sets[len(sets)-1])
		root, st, items := setup(t, func(op seam.Op, name string) error {
			if (op == seam.OpRename || op == seam.OpRenameNoReplace) && strings.Contains(name, string(last)) {
				return errors.New("injected failure")
			}
			return nil
		})
		before := grpSnapshot(t, root)
		res, err := at(st, now+10).RenewGroups(context.Background(), items, ttl)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Outcome != commit.IOError {
				t.Errorf("group %s: %s, want io-error", r.ID.Short(), r.Outcome.Reason())
			}
		}
		after := grpSnapshot(t, root)
		for g, ts := range sets {
			ids := append([]leasefmt.ID{groups.ID(ts)}, ts...)
			for i, id := range ids {
				k := leasefmt.Target
				if i == 0 {
					k = leasefmt.Group
				}
				rel := filepath.FromSlash(layout.RecordPath(k, id))
				changed := before[rel] != after[rel]
				if inLast := g >= len(sets)-2; changed == inLast {
					t.Errorf("group %d record %s: changed %v, want %v (only the failing chunk is restored)", g, id.Short(), changed, !inLast)
				}
			}
		}
	})
}
