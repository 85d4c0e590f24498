package commit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// grpID is a realistic ID: the SHA-256 of a name.
func grpID(name string) leasefmt.ID {
	sum := sha256.Sum256([]byte(name))
	return leasefmt.ID(hex.EncodeToString(sum[:]))
}

func grpIDs(prefix string, n int) []leasefmt.ID {
	out := make([]leasefmt.ID, n)
	for i := range out {
		out[i] = grpID(fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// grpOpen opens (creating) a table of 16 shards at root on the kernel
// filesystem, through hook when it is not nil.
func grpOpen(t testing.TB, root string, hook commit.Hook) *commit.Store {
	t.Helper()
	osfs, err := commit.OS(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { osfs.Close() })
	var f commit.FS = osfs
	if hook != nil {
		f = commit.WithHook(osfs, hook)
	}
	st, err := commit.Open(root, f, &leasefmt.Table{WorkShards: 16, TargetShards: 16, CreatedAt: 1})
	if err != nil {
		t.Fatal(err)
	}
	st.LockTimeout = 2 * time.Second
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

func TestGroupIDHashesSortedTargetsJoinedByNewline(t *testing.T) {
	a, b, c := grpID("a"), grpID("b"), grpID("c")
	ids := []leasefmt.ID{a, b, c}
	slices.Sort(ids)
	want := sha256.Sum256([]byte(string(ids[0]) + "\n" + string(ids[1]) + "\n" + string(ids[2])))
	for _, order := range [][]leasefmt.ID{{a, b, c}, {c, b, a}, {b, c, a}} {
		if got := commit.GroupID(order); string(got) != hex.EncodeToString(want[:]) {
			t.Errorf("GroupID(%v) = %s, want %x", order, got, want)
		}
	}
	one := sha256.Sum256([]byte(a))
	if got := commit.GroupID([]leasefmt.ID{a}); string(got) != hex.EncodeToString(one[:]) {
		t.Errorf("GroupID of one target = %s, want the digest of the bare ID (no newline) %x", got, one)
	}
}

// grpFailAt returns a hook that fails the i-th call (from 0) among the
// write-related ones (create, write, fsync, rename, fsyncdir), and the
// counter of those calls; i < 0 fails none.
func grpFailAt(i int64, fired *atomic.Bool) (commit.Hook, *atomic.Int64) {
	var n atomic.Int64
	return func(op commit.Op, name string) error {
		switch op {
		case commit.OpCreate, commit.OpWrite, commit.OpFsync, commit.OpRename, commit.OpRenameNoReplace, commit.OpSyncDir:
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
			r, err := at(st, now).ClaimGroup(commit.GroupID(ts), ts, "holder", ttl)
			if err != nil || r.Outcome != commit.OK {
				t.Fatalf("claim: %v %s %s", err, r.Outcome.Reason(), r.Detail)
			}
			renewItems = append(renewItems, commit.Item{ID: r.ID, Token: r.Token})
		}
	}
	grpDirsOf := func(groups ...[]leasefmt.ID) int {
		st := &commit.Store{Table: &leasefmt.Table{WorkShards: 16, TargetShards: 16}}
		d := map[string]bool{}
		for _, ts := range groups {
			d[path.Dir(st.RecordPath(leasefmt.Group, commit.GroupID(ts)))] = true
			for _, id := range ts {
				d[path.Dir(st.RecordPath(leasefmt.Target, id))] = true
			}
		}
		return len(d)
	}
	claimDirs := map[string]bool{}
	{
		st := &commit.Store{Table: &leasefmt.Table{WorkShards: 16, TargetShards: 16}}
		claimDirs[path.Dir(st.RecordPath(leasefmt.Group, gid))] = true
		for _, id := range targets {
			claimDirs[path.Dir(st.RecordPath(leasefmt.Target, id))] = true
		}
	}
	cases := []restoreCase{
		{name: "claim", setup: claimSetup, records: 5, dirs: len(claimDirs),
			run: func(st *commit.Store) []commit.GroupResult {
				r, err := at(st, now).ClaimGroup(gid, []leasefmt.ID{targets[2], targets[0], targets[3], targets[1]}, "new", ttl)
				if err != nil {
					panic(err)
				}
				return []commit.GroupResult{r}
			}},
		{name: "renew", setup: renewSetup, records: 10, dirs: grpDirsOf(renewGroups...),
			run: func(st *commit.Store) []commit.GroupResult {
				res, err := at(st, now+10).RenewGroups(renewItems, ttl)
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
			st := grpOpen(t, root, hook)
			st.Writers = 1
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
				st := grpOpen(t, root, hook)
				st.Writers = 1
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
	defer func(n int) { commit.GroupChunkLocks = n }(commit.GroupChunkLocks)
	commit.GroupChunkLocks = 10 // two groups of 1+4 locks per chunk
	const now, ttl = 1000.0, 100.0
	var sets [][]leasefmt.ID
	for g := range 6 {
		sets = append(sets, grpIDs(fmt.Sprintf("chunk-%d", g), 4))
	}
	slices.SortFunc(sets, func(a, b []leasefmt.ID) int {
		return strings.Compare(string(commit.GroupID(a)), string(commit.GroupID(b)))
	})
	layout := &commit.Store{Table: &leasefmt.Table{WorkShards: 16, TargetShards: 16}}
	wantDirs := 0
	for c := 0; c < len(sets); c += 2 {
		d := map[string]bool{}
		for _, ts := range sets[c : c+2] {
			d[path.Dir(layout.RecordPath(leasefmt.Group, commit.GroupID(ts)))] = true
			for _, id := range ts {
				d[path.Dir(layout.RecordPath(leasefmt.Target, id))] = true
			}
		}
		wantDirs += len(d)
	}
	setup := func(t *testing.T, hook commit.Hook) (string, *commit.Store, []commit.Item) {
		root := t.TempDir()
		st := grpOpen(t, root, nil)
		var items []commit.Item
		for _, ts := range sets {
			r, err := at(st, now).ClaimGroup(commit.GroupID(ts), ts, "me", ttl)
			if err != nil || r.Outcome != commit.OK {
				t.Fatalf("claim: %v %s", err, r.Detail)
			}
			items = append(items, commit.Item{ID: r.ID, Token: r.Token})
		}
		slices.Reverse(items) // input order does not matter
		return root, grpOpen(t, root, hook), items
	}
	t.Run("all renewed", func(t *testing.T) {
		_, st, items := setup(t, nil)
		res, err := at(st, now+10).RenewGroups(items, ttl)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Outcome != commit.OK {
				t.Errorf("group %s: %s %s", r.ID.Short(), r.Outcome.Reason(), r.Detail)
			}
		}
		if got := st.Stats.DirectorySyncs.Load(); got != int64(wantDirs) {
			t.Errorf("%d directory fsyncs, want %d (each chunk's distinct directories once)", got, wantDirs)
		}
	})
	t.Run("last chunk fails", func(t *testing.T) {
		last := commit.GroupID(sets[len(sets)-1])
		root, st, items := setup(t, func(op commit.Op, name string) error {
			if (op == commit.OpRename || op == commit.OpRenameNoReplace) && strings.Contains(name, string(last)) {
				return errors.New("injected failure")
			}
			return nil
		})
		before := grpSnapshot(t, root)
		res, err := at(st, now+10).RenewGroups(items, ttl)
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
			ids := append([]leasefmt.ID{commit.GroupID(ts)}, ts...)
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

// TestClaimGroupTokenAndRecords: one token for the group, larger than every
// earlier token of the manifest and of each target; targets carry the
// group, unknown keys survive.
func TestClaimGroupTokenAndRecords(t *testing.T) {
	root := t.TempDir()
	st := grpOpen(t, root, nil)
	ts := grpIDs("tok", 3)
	gid := commit.GroupID(ts)
	grpWriteRecord(t, root, st, &leasefmt.Record{Kind: leasefmt.Target, ID: ts[1], Status: leasefmt.Leased, Owner: "a",
		Token: 41, ClaimedAt: 1, RenewedAt: 1, ExpiresAt: 2, Group: grpID("elsewhere"),
		Extra: []leasefmt.Field{{Key: "k", Value: []byte(`{"v":1}`)}}})
	grpWriteRecord(t, root, st, &leasefmt.Record{Kind: leasefmt.Group, ID: gid, Status: leasefmt.Released, Owner: "b",
		Token: 7, ClaimedAt: 1, RenewedAt: 1, ExpiresAt: 1, Targets: ts[:1]})
	r, err := at(st, 100).ClaimGroup(gid, ts, "me", 10)
	if err != nil || r.Outcome != commit.OK {
		t.Fatalf("claim: %v %s %s", err, r.Outcome.Reason(), r.Detail)
	}
	if r.Token != 42 {
		t.Errorf("token %d, want 42 (one more than the largest earlier token of group and targets)", r.Token)
	}
	m, err := st.Read(leasefmt.Group, gid)
	if err != nil || m == nil {
		t.Fatalf("manifest: %v", err)
	}
	if !slices.Equal(m.Targets, grpSorted(ts)) || m.Token != 42 || m.Owner != "me" || m.ExpiresAt != 110 || m.Status != leasefmt.Leased {
		t.Errorf("manifest %+v", m)
	}
	targets := map[leasefmt.ID]*leasefmt.Record{}
	for _, id := range ts {
		tr, err := st.Read(leasefmt.Target, id)
		if err != nil || tr == nil {
			t.Fatalf("target %s: %v", id.Short(), err)
		}
		targets[id] = tr
	}
	if d := commit.CheckGroup(m, targets); len(d) > 0 {
		t.Errorf("CheckGroup after a claim: %v", d)
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
	root := t.TempDir()
	st := grpOpen(t, root, nil)
	st.LockTimeout = 300 * time.Millisecond
	a := leasefmt.ID(strings.Repeat("7", 63) + "1")
	b := leasefmt.ID(strings.Repeat("7", 63) + "2")
	if a.LockOffset() != b.LockOffset() || a.Shard(16) != b.Shard(16) {
		t.Fatal("test IDs do not share a lock byte")
	}
	r, err := at(st, 100).ClaimGroup(commit.GroupID([]leasefmt.ID{a, b}), []leasefmt.ID{b, a}, "me", 10)
	if err != nil || r.Outcome != commit.OK {
		t.Fatalf("claim of two targets sharing a lock byte: %v %s %s", err, r.Outcome.Reason(), r.Detail)
	}
	res, err := at(st, 105).RenewGroups([]commit.Item{{ID: r.ID, Token: r.Token}}, 10)
	if err != nil || res[0].Outcome != commit.OK {
		t.Fatalf("renew: %v %s %s", err, res[0].Outcome.Reason(), res[0].Detail)
	}
}

// TestRenewGroupsChecksTargets: a group is renewed only when every target
// carries its lease; otherwise nothing of it is written.
func TestRenewGroupsChecksTargets(t *testing.T) {
	ts := grpIDs("chk", 3)
	gid := commit.GroupID(ts)
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
			r, err := at(st, 100).ClaimGroup(gid, ts, "me", 50)
			if err != nil || r.Outcome != commit.OK {
				t.Fatalf("claim: %v %s", err, r.Detail)
			}
			if r.Token < 2 {
				// Make "older token" possible: claim again after expiry.
				if r, err = at(st, 200).ClaimGroup(gid, ts, "me", 50); err != nil || r.Outcome != commit.OK {
					t.Fatalf("claim: %v %s", err, r.Detail)
				}
			}
			tr, _ := st.Read(leasefmt.Target, ts[1])
			if d := tc.damage(tr); d == nil {
				os.Remove(filepath.Join(root, filepath.FromSlash(st.RecordPath(leasefmt.Target, ts[1]))))
			} else {
				grpWriteRecord(t, root, st, d)
			}
			before := grpSnapshot(t, root)
			res, err := at(st, 210).RenewGroups([]commit.Item{{ID: gid, Token: r.Token}}, 50)
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

func TestCheckGroup(t *testing.T) {
	ts := grpIDs("cg", 2)
	gid := commit.GroupID(ts)
	man := func() *leasefmt.Record {
		return &leasefmt.Record{Kind: leasefmt.Group, ID: gid, Status: leasefmt.Leased, Owner: "o", Token: 5,
			ClaimedAt: 10, RenewedAt: 10, ExpiresAt: 20, Targets: slices.Clone(grpSorted(ts))}
	}
	tgt := func(id leasefmt.ID) *leasefmt.Record {
		return &leasefmt.Record{Kind: leasefmt.Target, ID: id, Status: leasefmt.Leased, Owner: "o", Token: 5,
			ClaimedAt: 10, RenewedAt: 10, ExpiresAt: 20, Group: gid}
	}
	s := grpSorted(ts)
	cases := []struct {
		name  string
		edit  func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record)
		wants string // substring of the one disagreement; "" for none
	}{
		{"agree", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) {}, ""},
		{"released together", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) {
			for _, r := range append([]*leasefmt.Record{m}, tm[s[0]], tm[s[1]]) {
				r.Status, r.ExpiresAt = leasefmt.Released, 15
			}
		}, ""},
		{"superseded after expiry", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) {
			tm[s[0]].Token, tm[s[0]].Group, tm[s[0]].ClaimedAt, tm[s[0]].ExpiresAt = 9, grpID("h"), 20, 30
		}, ""},
		{"superseded while held", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) {
			tm[s[0]].Token, tm[s[0]].Group, tm[s[0]].ClaimedAt = 9, grpID("h"), 19.5
		}, "while group"},
		{"missing", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { delete(tm, s[1]) }, "has no record"},
		{"older token", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { tm[s[1]].Token = 4 }, "older"},
		{"newer token of the group", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { tm[s[1]].Token = 6 }, "newer"},
		{"expiry", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { tm[s[1]].ExpiresAt = 25 }, "expires_at"},
		{"status", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { tm[s[1]].Status = leasefmt.Released }, "status"},
		{"owner", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { tm[s[1]].Owner = "p" }, "owner"},
		{"other group same token", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { tm[s[1]].Group = grpID("h") }, "group"},
		{"unlisted member", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) {
			x := tgt(grpID("stray"))
			tm[x.ID] = x
		}, "does not list it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := man()
			tm := map[leasefmt.ID]*leasefmt.Record{ts[0]: tgt(ts[0]), ts[1]: tgt(ts[1])}
			tc.edit(m, tm)
			got := commit.CheckGroup(m, tm)
			switch {
			case tc.wants == "" && len(got) > 0:
				t.Errorf("disagreements %q, want none", got)
			case tc.wants != "" && (len(got) != 1 || !strings.Contains(got[0], tc.wants)):
				t.Errorf("disagreements %q, want one containing %q", got, tc.wants)
			}
			// CheckTarget, from the target's side, agrees on targets that
			// name the group.
			for id, tr := range tm {
				if tr.Group != gid {
					continue
				}
				named := len(got) > 0 && strings.Contains(got[0], string(id))
				if d := commit.CheckTarget(tr, m); (len(d) > 0) != named {
					t.Errorf("CheckTarget(%s) = %q, but CheckGroup = %q", id.Short(), d, got)
				}
			}
		})
	}
}

func TestCheckGroupInputRefusesOversizeManifest(t *testing.T) {
	gid := grpID("big")
	if err := commit.CheckGroupInput(gid, grpIDs("big", 40), "me", 10); err != nil {
		t.Fatalf("40 targets: %v", err)
	}
	err := commit.CheckGroupInput(gid, grpIDs("big", 60), "me", 10)
	if !errors.Is(err, commit.ErrGroupInput) {
		t.Fatalf("60 targets: %v, want ErrGroupInput", err)
	}
	for _, ttl := range []float64{0, -1, math.Inf(1), math.NaN()} {
		if err := commit.CheckGroupInput(gid, grpIDs("t", 2), "me", ttl); !errors.Is(err, commit.ErrGroupInput) {
			t.Errorf("ttl %v: %v, want ErrGroupInput", ttl, err)
		}
	}
	if err := commit.CheckGroupInput(gid, []leasefmt.ID{grpID("x"), grpID("x")}, "me", 10); !errors.Is(err, commit.ErrGroupInput) {
		t.Errorf("duplicate targets: %v, want ErrGroupInput", err)
	}
}

// BenchmarkGroups claims (one invocation per group, as group-claim does)
// and renews (one invocation for all) 256 groups of 4 targets over 16
// target shards, reporting groups/s; each invocation must fsync each
// directory it touched exactly once.
func BenchmarkGroups(b *testing.B) {
	const groups, per, ttl = 256, 4, 100.0
	sets := make([][]leasefmt.ID, groups)
	for g := range sets {
		sets[g] = grpIDs(fmt.Sprintf("bench-%d", g), per)
	}
	layout := &commit.Store{Table: &leasefmt.Table{WorkShards: 16, TargetShards: 16}}
	grpDirsOf := func(sets ...[]leasefmt.ID) int64 {
		d := map[string]bool{}
		for _, ts := range sets {
			d[path.Dir(layout.RecordPath(leasefmt.Group, commit.GroupID(ts)))] = true
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
				before := st.Stats.DirectorySyncs.Load()
				r, err := at(st, now).ClaimGroup(commit.GroupID(ts), ts, "bench", ttl)
				if err != nil || r.Outcome != commit.OK {
					b.Fatalf("claim: %v %s %s", err, r.Outcome.Reason(), r.Detail)
				}
				if got, want := st.Stats.DirectorySyncs.Load()-before, grpDirsOf(ts); got != want {
					b.Fatalf("claim made %d directory fsyncs, want %d (distinct directories touched)", got, want)
				}
			}
		}
		b.ReportMetric(float64(groups*b.N)/b.Elapsed().Seconds(), "groups/s")
	})
	b.Run("renew", func(b *testing.B) {
		st := open(b)
		items := make([]commit.Item, groups)
		for g, ts := range sets {
			r, err := at(st, 1000).ClaimGroup(commit.GroupID(ts), ts, "bench", 1e9)
			if err != nil || r.Outcome != commit.OK {
				b.Fatalf("claim: %v %s", err, r.Detail)
			}
			items[g] = commit.Item{ID: r.ID, Token: r.Token}
		}
		want := grpDirsOf(sets...)
		now := 1000.0
		for b.Loop() {
			now++
			before := st.Stats.DirectorySyncs.Load()
			res, err := at(st, now).RenewGroups(items, 1e9)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range res {
				if r.Outcome != commit.OK {
					b.Fatalf("renew %s: %s %s", r.ID.Short(), r.Outcome.Reason(), r.Detail)
				}
			}
			if got := st.Stats.DirectorySyncs.Load() - before; got != want {
				b.Fatalf("renew of %d groups made %d directory fsyncs, want %d (distinct directories touched)", groups, got, want)
			}
		}
		b.ReportMetric(float64(groups*b.N)/b.Elapsed().Seconds(), "groups/s")
		b.ReportMetric(float64(want), "dirs/invocation")
	})
}
