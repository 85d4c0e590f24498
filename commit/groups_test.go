package commit_test

// Group leases: the group ID, claims (one token, shared lock bytes),
// renewals that check their targets, the grp* helpers and the benchmark;
// the writer under failure and in chunks is tested in groupwrite_test.go,
// the pure rules (ID, input, checks) in package groups.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/leasefmt"
)

// grpID and grpIDs are realistic IDs (testenv.ID: the SHA-256 of a name).
var grpID, grpIDs = testenv.ID, testenv.IDs

// grpOpen opens (creating) a table of 16 shards at root on the kernel
// filesystem, through hook when it is not nil.
func grpOpen(t testing.TB, root string, hook seam.Hook, opts ...commit.Options) *commit.Store {
	t.Helper()
	o := optionsOf(opts)
	o.Create = &leasefmt.Table{WorkShards: 16, TargetShards: 16, CreatedAt: 1}
	if o.LockTimeout == 0 {
		o.LockTimeout = 2 * time.Second
	}
	if hook != nil {
		o.Wrap = func(f seam.FS) seam.FS { return seam.WithHook(f, hook) }
	}
	st, err := commit.Open(root, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// grpSnapshot is every directory and file under root with its bytes.
func grpSnapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		data, err := os.ReadFile(p)
		out[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func grpDiff(before, after map[string]string) []string {
	var diffs []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			diffs = append(diffs, "removed "+k)
		} else if v != w {
			diffs = append(diffs, fmt.Sprintf("changed %s:\n  was %q\n  now %q", k, v, w))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, "added "+k)
		}
	}
	sort.Strings(diffs)
	return diffs
}

func grpWriteRecord(t testing.TB, root string, st *commit.Store, r *leasefmt.Record) {
	t.Helper()
	data, err := leasefmt.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(st.RecordPath(r.Kind, r.ID))), data, 0o666); err != nil {
		t.Fatal(err)
	}
}

// TestClaimGroupTokenAndRecords: one token for the group, larger than every
// earlier token of the manifest and of each target; targets carry the
// group, unknown keys survive.
func TestClaimGroupTokenAndRecords(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	st := grpOpen(t, root, nil)
	ts := grpIDs("tok", 3)
	gid := groups.ID(ts)
	grpWriteRecord(t, root, st, &leasefmt.Record{Kind: leasefmt.Target, ID: ts[1], Status: leasefmt.Leased, Owner: "a",
		Token: 41, ClaimedAt: 1, RenewedAt: 1, ExpiresAt: 2, Group: grpID("elsewhere"),
		Extra: []leasefmt.Field{{Key: "k", Value: []byte(`{"v":1}`)}}})
	grpWriteRecord(t, root, st, &leasefmt.Record{Kind: leasefmt.Group, ID: gid, Status: leasefmt.Released, Owner: "b",
		Token: 7, ClaimedAt: 1, RenewedAt: 1, ExpiresAt: 1, Targets: ts[:1]})
	r, err := at(st, 100).ClaimGroup(context.Background(), gid, ts, "me", 10)
	if err != nil || r.Outcome != commit.OK {
		t.Fatalf("claim: %v %s %s", err, r.Outcome.Reason(), r.Detail)
	}
	if r.Token != 42 {
		t.Errorf("token %d, want 42 (one more than the largest earlier token of group and targets)", r.Token)
	}
	m, err := st.Read(context.Background(), leasefmt.Group, gid)
	if err != nil || m == nil {
		t.Fatalf("manifest: %v", err)
	}
	if !slices.Equal(m.Targets, grpSorted(ts)) || m.Token != 42 || m.Owner != "me" || m.ExpiresAt != 110 || m.Status != leasefmt.Leased {
		t.Errorf("manifest %+v", m)
	}
	targets := map[leasefmt.ID]*leasefmt.Record{}
	for _, id := range ts {
		tr, err := st.Read(context.Background(), leasefmt.Target, id)
		if err != nil || tr == nil {
			t.Fatalf("target %s: %v", id.Short(), err)
		}
		targets[id] = tr
	}
	if d := groups.Check(m, targets); len(d) > 0 {
		t.Errorf("groups.Check after a claim: %v", d)
	}
	if x := targets[ts[1]].Extra; len(x) != 1 || x[0].Key != "k" {
		t.Errorf("unknown key of the old target record lost: %+v", x)
	}
}

func grpSorted(ids []leasefmt.ID) []leasefmt.ID {
	c := slices.Clone(ids)
	slices.Sort(c)
	return c
}

// TestClaimGroupSharedLockByte: two targets of one shard whose first 15 hex
// digits agree share a lock byte; a claim of both must not wait for the
// byte it already holds.
func TestClaimGroupSharedLockByte(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	st := grpOpen(t, root, nil)
	st.SetLockTimeout(300 * time.Millisecond)
	a := leasefmt.ID(strings.Repeat("7", 63) + "1")
	b := leasefmt.ID(strings.Repeat("7", 63) + "2")
	if a.LockOffset() != b.LockOffset() || a.Shard(16) != b.Shard(16) {
		t.Fatal("test IDs do not share a lock byte")
	}
	r, err := at(st, 100).ClaimGroup(context.Background(), groups.ID([]leasefmt.ID{a, b}), []leasefmt.ID{b, a}, "me", 10)
	if err != nil || r.Outcome != commit.OK {
		t.Fatalf("claim of two targets sharing a lock byte: %v %s %s", err, r.Outcome.Reason(), r.Detail)
	}
	res, err := at(st, 105).RenewGroups(context.Background(), []commit.Item{{ID: r.ID, Token: r.Token}}, 10)
	if err != nil || res[0].Outcome != commit.OK {
		t.Fatalf("renew: %v %s %s", err, res[0].Outcome.Reason(), res[0].Detail)
	}
}

// TestRenewGroupsChecksTargets: a group is renewed only when every target
// carries its lease; otherwise nothing of it is written.
func TestRenewGroupsChecksTargets(t *testing.T) {
	t.Parallel()
	ts := grpIDs("chk", 3)
	gid := groups.ID(ts)
	cases := []struct {
		name   string
		damage func(tr *leasefmt.Record) *leasefmt.Record
		want   commit.Outcome
	}{
		{"agrees", func(tr *leasefmt.Record) *leasefmt.Record { return tr }, commit.OK},
		{"taken by a later lease", func(tr *leasefmt.Record) *leasefmt.Record {
			tr.Token, tr.Group, tr.Owner = tr.Token+1, grpID("thief"), "thief"
			return tr
		}, commit.StaleToken},
		{"older token", func(tr *leasefmt.Record) *leasefmt.Record {
			tr.Token--
			return tr
		}, commit.Corrupt},
		{"other expiry", func(tr *leasefmt.Record) *leasefmt.Record {
			tr.ExpiresAt += 5
			return tr
		}, commit.Corrupt},
		{"other owner", func(tr *leasefmt.Record) *leasefmt.Record {
			tr.Owner = "someone"
			return tr
		}, commit.Corrupt},
		{"missing", func(tr *leasefmt.Record) *leasefmt.Record { return nil }, commit.Corrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			st := grpOpen(t, root, nil)
			r, err := at(st, 100).ClaimGroup(context.Background(), gid, ts, "me", 50)
			if err != nil || r.Outcome != commit.OK {
				t.Fatalf("claim: %v %s", err, r.Detail)
			}
			if r.Token < 2 {
				// Make "older token" possible: claim again after expiry.
				if r, err = at(st, 200).ClaimGroup(context.Background(), gid, ts, "me", 50); err != nil || r.Outcome != commit.OK {
					t.Fatalf("claim: %v %s", err, r.Detail)
				}
			}
			tr, _ := st.Read(context.Background(), leasefmt.Target, ts[1])
			if d := tc.damage(tr); d == nil {
				os.Remove(filepath.Join(root, filepath.FromSlash(st.RecordPath(leasefmt.Target, ts[1]))))
			} else {
				grpWriteRecord(t, root, st, d)
			}
			before := grpSnapshot(t, root)
			res, err := at(st, 210).RenewGroups(context.Background(), []commit.Item{{ID: gid, Token: r.Token}}, 50)
			if err != nil {
				t.Fatal(err)
			}
			if got := res[0].Outcome; got != tc.want {
				t.Fatalf("renew: %s (%s), want %s", got.Reason(), res[0].Detail, tc.want.Reason())
			}
			if tc.want == commit.OK {
				return
			}
			if len(res[0].Issues) != 1 || res[0].Issues[0].Target != ts[1] {
				t.Errorf("issues %+v, want one naming target %s", res[0].Issues, ts[1].Short())
			}
			if d := grpDiff(before, grpSnapshot(t, root)); len(d) > 0 {
				t.Errorf("a refused renewal wrote:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

// BenchmarkGroups claims (one invocation per group, as group-claim does)
// and renews (one invocation for all) 256 groups of 4 targets over 16
// target shards, reporting groups/s; each invocation must fsync each
// directory it touched exactly once.
func BenchmarkGroups(b *testing.B) {
	const ngroups, per, ttl = 256, 4, 100.0
	sets := make([][]leasefmt.ID, ngroups)
	for g := range sets {
		sets[g] = grpIDs(fmt.Sprintf("bench-%d", g), per)
	}
	layout := &leasefmt.Table{WorkShards: 16, TargetShards: 16}
	grpDirsOf := func(sets ...[]leasefmt.ID) int64 {
		d := map[string]bool{}
		for _, ts := range sets {
			d[path.Dir(layout.RecordPath(leasefmt.Group, groups.ID(ts)))] = true
			for _, id := range ts {
				d[path.Dir(layout.RecordPath(leasefmt.Target, id))] = true
			}
		}
		return int64(len(d))
	}
	open := func(b *testing.B) *commit.Store {
		root := b.TempDir()
		if dir := os.Getenv("LEASE_BENCH_DIR"); dir != "" {
			var err error
			if root, err = os.MkdirTemp(dir, "bench-groups-"); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(root) })
		}
		return grpOpen(b, root, nil)
	}
	b.Run("claim", func(b *testing.B) {
		st := open(b)
		now := 1000.0
		for b.Loop() {
			now += 2 * ttl // every earlier claim has expired
			for _, ts := range sets {
				before := st.Stats().DirectorySyncs.Load()
				r, err := at(st, now).ClaimGroup(context.Background(), groups.ID(ts), ts, "bench", ttl)
				if err != nil || r.Outcome != commit.OK {
					b.Fatalf("claim: %v %s %s", err, r.Outcome.Reason(), r.Detail)
				}
				if got, want := st.Stats().DirectorySyncs.Load()-before, grpDirsOf(ts); got != want {
					b.Fatalf("claim made %d directory fsyncs, want %d (distinct directories touched)", got, want)
				}
			}
		}
		b.ReportMetric(float64(ngroups*b.N)/b.Elapsed().Seconds(), "groups/s")
	})
	b.Run("renew", func(b *testing.B) {
		st := open(b)
		items := make([]commit.Item, ngroups)
		for g, ts := range sets {
			r, err := at(st, 1000).ClaimGroup(context.Background(), groups.ID(ts), ts, "bench", 1e9)
			if err != nil || r.Outcome != commit.OK {
				b.Fatalf("claim: %v %s", err, r.Detail)
			}
			items[g] = commit.Item{ID: r.ID, Token: r.Token}
		}
		want := grpDirsOf(sets...)
		now := 1000.0
		for b.Loop() {
			now++
			before := st.Stats().DirectorySyncs.Load()
			res, err := at(st, now).RenewGroups(context.Background(), items, 1e9)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range res {
				if r.Outcome != commit.OK {
					b.Fatalf("renew %s: %s %s", r.ID.Short(), r.Outcome.Reason(), r.Detail)
				}
			}
			if got := st.Stats().DirectorySyncs.Load() - before; got != want {
				b.Fatalf("renew of %d groups made %d directory fsyncs, want %d (distinct directories touched)", ngroups, got, want)
			}
		}
		b.ReportMetric(float64(ngroups*b.N)/b.Elapsed().Seconds(), "groups/s")
		b.ReportMetric(float64(want), "dirs/invocation")
	})
}
