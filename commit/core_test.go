package commit_test

// Durability tests of the storage engine through the FS seam: every call
// the engine makes is recorded (commit.WithHook over commit.OS on a temp
// dir) and checked against the invariants of SPEC §4 (G1–G8).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// opRenameDone is logged after a rename returned, so that orderings between
// goroutines (a rename finished before its directory's fsync began) can be
// checked; the hook itself sees a call only before it is made.
const opRenameDone commit.Op = "rename-done"

type loggedOp struct {
	op     commit.Op
	name   string
	failed bool // the hook failed the call
}

// opLog records every call through the seam and can fail chosen ones.
type opLog struct {
	mu   sync.Mutex
	ops  []loggedOp
	fail func(op commit.Op, name string) error // nil: fail nothing
}

func (l *opLog) hook(op commit.Op, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	if l.fail != nil {
		err = l.fail(op, name)
	}
	l.ops = append(l.ops, loggedOp{op, name, err != nil})
	return err
}

func (l *opLog) reset(fail func(op commit.Op, name string) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops, l.fail = nil, fail
}

func (l *opLog) snapshot() []loggedOp {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ops)
}

func (l *opLog) count(op commit.Op) int {
	n := 0
	for _, o := range l.snapshot() {
		if o.op == op {
			n++
		}
	}
	return n
}

// renameDoneFS logs the completion of every successful rename.
type renameDoneFS struct {
	commit.FS
	log *opLog
}

func (r renameDoneFS) Rename(o, n string) error {
	err := r.FS.Rename(o, n)
	if err == nil {
		r.log.mu.Lock()
		r.log.ops = append(r.log.ops, loggedOp{op: opRenameDone, name: n})
		r.log.mu.Unlock()
	}
	return err
}

// hookedTable creates a table of workShards work shards in a temp dir and
// opens it through a logging FS; the log starts empty.
func hookedTable(t *testing.T, workShards int) (*commit.Store, *opLog) {
	t.Helper()
	root := t.TempDir()
	return openHooked(t, root, workShards)
}

func openHooked(t *testing.T, root string, workShards int) (*commit.Store, *opLog) {
	t.Helper()
	osfs, err := commit.OS(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { osfs.Close() })
	log := &opLog{}
	st, err := commit.Open(root, commit.WithHook(renameDoneFS{osfs, log}, log.hook),
		&leasefmt.Table{WorkShards: workShards, TargetShards: 4, CreatedAt: 1000})
	if err != nil {
		t.Fatal(err)
	}
	log.reset(nil)
	return st, log
}

// shardID is a distinct ID (by i) that falls in shard sh of any table with
// more than sh shards; distinct IDs have distinct lock bytes.
func shardID(sh, i int) leasefmt.ID {
	id, err := leasefmt.ParseID(fmt.Sprintf("%08x%07x%049x", sh, i+1, i+1))
	if err != nil {
		panic(err)
	}
	return id
}

// spread returns n claim items over k shards (item j in shard j%k).
func spread(n, k int) []commit.Item {
	items := make([]commit.Item, n)
	for j := range items {
		items[j] = commit.Item{ID: shardID(j%k, j)}
	}
	return items
}

// held turns granted claim results into renew items.
func held(t *testing.T, res []commit.Result) []commit.Item {
	t.Helper()
	items := make([]commit.Item, len(res))
	for i, r := range res {
		if r.Outcome != commit.OK {
			t.Fatalf("%s: %s %s", r.ID, r.Outcome.Reason(), r.Detail)
		}
		items[i] = commit.Item{ID: r.ID, Token: r.Token}
	}
	return items
}

func dirsOf(st *commit.Store, items []commit.Item) map[string]bool {
	dirs := map[string]bool{}
	for _, it := range items {
		dirs[path.Dir(st.RecordPath(leasefmt.Work, it.ID))] = true
	}
	return dirs
}

func readRecord(t *testing.T, st *commit.Store, id leasefmt.ID) *leasefmt.Record {
	t.Helper()
	r, err := st.Read(leasefmt.Work, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tempFiles lists leftover temp files under root.
func tempFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp.") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// checkG1 checks that every record renamed into place had its temp file
// (.ID.json.tmp.*) written and fsynced before the rename, in the order
// create, write, fsync, close, rename.
func checkG1(t *testing.T, ops []loggedOp, wantRename bool) {
	t.Helper()
	renamed := 0
	for i, o := range ops {
		if o.op != commit.OpRename && o.op != commit.OpRenameNoReplace || o.failed {
			continue
		}
		renamed++
		tmpPrefix := path.Join(path.Dir(o.name), "."+path.Base(o.name)+".tmp.")
		var seq []commit.Op
		for _, p := range ops[:i] {
			if strings.HasPrefix(p.name, tmpPrefix) && !p.failed {
				seq = append(seq, p.op)
			}
		}
		if !slices.Equal(seq, []commit.Op{commit.OpCreate, commit.OpWrite, commit.OpFsync, commit.OpClose}) {
			t.Errorf("G1: rename over %s preceded by %v on its temp file, want create, write, fsync, close", o.name, seq)
		}
	}
	if wantRename && renamed == 0 {
		t.Errorf("G1: no rename seen")
	}
}

// checkDirsSynced checks G3/G5: every directory a rename completed into was
// fsynced after that rename completed, and returns the directories fsynced.
func checkDirsSynced(t *testing.T, ops []loggedOp) map[string]int {
	t.Helper()
	lastRename := map[string]int{}
	synced := map[string]int{}
	for i, o := range ops {
		switch {
		case o.op == opRenameDone:
			lastRename[path.Dir(o.name)] = i
		case o.op == commit.OpSyncDir && !o.failed:
			synced[o.name]++
			if _, ok := lastRename[o.name]; !ok {
				lastRename[o.name] = -1 // fsynced before any rename into it: recorded below
			}
		}
	}
	for dir, at := range lastRename {
		if at < 0 {
			continue
		}
		ok := false
		for _, o := range ops[at+1:] {
			if o.op == commit.OpSyncDir && o.name == dir {
				ok = true
				break
			}
		}
		if !ok {
			t.Errorf("directory %s was renamed into and not fsynced afterwards", dir)
		}
	}
	return synced
}

// TestGroupCommitCounts: a batch of N records in K shards makes exactly N
// file fsyncs and K directory fsyncs (G4), each directory after its renames
// (G3), each temp file fsynced before its rename (G1).
func TestGroupCommitCounts(t *testing.T) {
	for _, tc := range []struct{ n, k, shards int }{
		{1, 1, 16}, {2, 1, 16}, {10, 1, 1}, {10, 10, 16}, {16, 16, 16}, {64, 7, 16}, {100, 16, 16}, {90, 3, 256}, {300, 256, 256},
	} {
		t.Run(fmt.Sprintf("N=%d/K=%d", tc.n, tc.k), func(t *testing.T) {
			st, log := hookedTable(t, tc.shards)
			items := spread(tc.n, tc.k)
			check := func(what string, res []commit.Result, files int) {
				t.Helper()
				ops := log.snapshot()
				for _, r := range res {
					if r.Outcome != commit.OK {
						t.Fatalf("%s %s: %s %s", what, r.ID, r.Outcome.Reason(), r.Detail)
					}
				}
				if got := log.count(commit.OpFsync); got != files {
					t.Errorf("%s: %d file fsyncs, want %d", what, got, files)
				}
				synced := checkDirsSynced(t, ops)
				want := dirsOf(st, items)
				if len(synced) != len(want) || log.count(commit.OpSyncDir) != len(want) {
					t.Errorf("%s: %d directory fsyncs of %d directories (%v), want one each of %d", what, log.count(commit.OpSyncDir), len(synced), synced, len(want))
				}
				for d := range want {
					if synced[d] != 1 {
						t.Errorf("%s: directory %s fsynced %d times", what, d, synced[d])
					}
				}
				checkG1(t, ops, true)
			}
			before := st.Stats.Snapshot(0)
			res := at(st, 1000).Claim(items, "host/w1", 60)
			check("claim", res, tc.n)
			if s := st.Stats.Snapshot(0); s.FileSyncs-before.FileSyncs != int64(tc.n) || s.DirectorySyncs-before.DirectorySyncs != int64(tc.k) {
				t.Errorf("stats: %d file syncs, %d directory syncs; want %d, %d", s.FileSyncs, s.DirectorySyncs, tc.n, tc.k)
			}
			for i, r := range res {
				if r.ID != items[i].ID || r.Token != 1 {
					t.Fatalf("result %d is %s token %d, want %s token 1 (input order)", i, r.ID, r.Token, items[i].ID)
				}
			}
			h := held(t, res)
			log.reset(nil)
			check("renew", at(st, 1010).Renew(h, 60), tc.n)
			for _, it := range h {
				if r := readRecord(t, st, it.ID); r.ExpiresAt != 1070 || r.Token != 1 || r.RenewedAt != 1010 {
					t.Fatalf("after renew %s: %+v", it.ID, r)
				}
			}
			// Complete is two group commits: committing, then done.
			log.reset(nil)
			res = at(st, 1020).Complete(h)
			for _, r := range res {
				if r.Outcome != commit.OK || r.Record.Status != leasefmt.Done {
					t.Fatalf("complete %s: %s %s", r.ID, r.Outcome.Reason(), r.Detail)
				}
			}
			if f, d := log.count(commit.OpFsync), log.count(commit.OpSyncDir); f != 2*tc.n || d != 2*tc.k {
				t.Errorf("complete: %d file and %d directory fsyncs, want %d and %d", f, d, 2*tc.n, 2*tc.k)
			}
			if left := tempFiles(t, st.Root); len(left) > 0 {
				t.Errorf("temp files left: %v", left)
			}
		})
	}
}

// TestRefusedItemsCostNothing: G7, a stale token, a done, released, missing
// or corrupt record (and a held or expired one) causes no create, write,
// fsync, rename or directory fsync, and the record is left as it was.
func TestRefusedItemsCostNothing(t *testing.T) {
	st, log := hookedTable(t, 16)
	ids := map[string]leasefmt.ID{}
	for i, name := range []string{"leased", "done", "released", "missing", "corrupt", "expired"} {
		ids[name] = shardID(i, i)
	}
	for _, name := range []string{"leased", "done", "released", "corrupt", "expired"} {
		if r := at(st, 1000).Claim([]commit.Item{{ID: ids[name]}}, "host/w1", 60); r[0].Outcome != commit.OK {
			t.Fatal(r[0].Detail)
		}
	}
	at(st, 1001).Complete([]commit.Item{{ID: ids["done"], Token: 1}})
	at(st, 1001).Release([]commit.Item{{ID: ids["released"], Token: 1}})
	corruptPath := st.Abs(st.RecordPath(leasefmt.Work, ids["corrupt"]))
	if err := os.WriteFile(corruptPath, []byte(`{"schema":"lease.work/v1","token":NaN}`), 0o644); err != nil {
		t.Fatal(err)
	}
	exp := readRecord(t, st, ids["expired"])
	exp.ExpiresAt = 1001
	if err := st.WriteOne(exp); err != nil {
		t.Fatal(err)
	}
	before := snapshotTree(t, st.Root)

	writes := []commit.Op{commit.OpCreate, commit.OpWrite, commit.OpFsync, commit.OpClose, commit.OpRename, commit.OpRenameNoReplace, commit.OpRemove, commit.OpMkdir, commit.OpSyncDir}
	for _, tc := range []struct {
		name string
		run  func() []commit.Result
		want commit.Outcome
	}{
		{"stale token", func() []commit.Result { return at(st, 1010).Renew([]commit.Item{{ID: ids["leased"], Token: 2}}, 60) }, commit.StaleToken},
		{"older token", func() []commit.Result { return at(st, 1010).Release([]commit.Item{{ID: ids["expired"], Token: 7}}) }, commit.StaleToken},
		{"done", func() []commit.Result { return at(st, 1010).Renew([]commit.Item{{ID: ids["done"], Token: 1}}, 60) }, commit.Done},
		{"released", func() []commit.Result { return at(st, 1010).Renew([]commit.Item{{ID: ids["released"], Token: 1}}, 60) }, commit.Released},
		{"missing", func() []commit.Result { return at(st, 1010).Renew([]commit.Item{{ID: ids["missing"], Token: 1}}, 60) }, commit.Missing},
		{"corrupt renew", func() []commit.Result { return at(st, 1010).Renew([]commit.Item{{ID: ids["corrupt"], Token: 1}}, 60) }, commit.Corrupt},
		{"corrupt claim", func() []commit.Result { return at(st, 5000).Claim([]commit.Item{{ID: ids["corrupt"]}}, "host/w2", 60) }, commit.Corrupt},
		{"expired", func() []commit.Result { return at(st, 1010).Renew([]commit.Item{{ID: ids["expired"], Token: 1}}, 60) }, commit.Expired},
		{"held", func() []commit.Result { return at(st, 1010).Claim([]commit.Item{{ID: ids["leased"]}}, "host/w2", 60) }, commit.Held},
		{"done claim", func() []commit.Result { return at(st, 9999).Claim([]commit.Item{{ID: ids["done"]}}, "host/w2", 60) }, commit.Done},
		{"complete stale", func() []commit.Result { return at(st, 1010).Complete([]commit.Item{{ID: ids["leased"], Token: 9}}) }, commit.StaleToken},
		{"all at once", func() []commit.Result {
			return at(st, 1010).Renew([]commit.Item{{ID: ids["leased"], Token: 2}, {ID: ids["done"], Token: 1}, {ID: ids["released"], Token: 1},
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
		if after := snapshotTree(t, st.Root); !after.equal(before) {
			t.Errorf("%s: the table changed: %s", tc.name, after.diff(before))
		}
	}
}

// failAt fails the first call op on a name containing id.
func failAt(op commit.Op, id leasefmt.ID) func(commit.Op, string) error {
	done := false
	return func(o commit.Op, name string) error {
		if !done && o == op && strings.Contains(name, string(id)) {
			done = true
			return fmt.Errorf("injected %s failure on %s: %w", op, name, errors.ErrUnsupported)
		}
		return nil
	}
}

// TestFailureStillSyncsRenamedDirs: G5 and G6 for a record failing at its
// write, fsync or rename: the directories already renamed into are still
// fsynced, nothing is reported OK, no temp file is left behind.
func TestFailureStillSyncsRenamedDirs(t *testing.T) {
	const n, k = 24, 4
	for _, op := range []commit.Op{commit.OpCreate, commit.OpWrite, commit.OpFsync, commit.OpRename} {
		for _, writers := range []int{1, 64} {
			// Sorted order is (shard, ID): position p is shard p/6.
			for _, pos := range []int{0, 3, 6, 13, n - 1} {
				t.Run(fmt.Sprintf("%s/writers=%d/at=%d", op, writers, pos), func(t *testing.T) {
					st, log := hookedTable(t, k)
					st.Writers = writers
					items := spread(n, k)
					h := held(t, at(st, 1000).Claim(items, "host/w1", 60))
					sorted := slices.Clone(h)
					slices.SortFunc(sorted, func(a, b commit.Item) int {
						if c := a.ID.Shard(k) - b.ID.Shard(k); c != 0 {
							return c
						}
						return strings.Compare(string(a.ID), string(b.ID))
					})
					victim := sorted[pos].ID
					log.reset(failAt(op, victim))
					attempted := st.Stats.Attempted.Load()
					res := at(st, 1010).Renew(h, 60)
					if got := st.Stats.Attempted.Load() - attempted; got != int64(len(h)) {
						t.Errorf("Stats.Attempted grew by %d, want %d: every item, also those not attempted after the failure, counts for progress", got, len(h))
					}
					ops := log.snapshot()
					injected := false
					for _, o := range ops {
						injected = injected || o.failed
					}
					if !injected {
						t.Fatalf("no %s of %s was made", op, victim)
					}
					for _, r := range res {
						if r.Outcome != commit.IOError {
							t.Errorf("%s: %s (%s), want io-error for every record of a failed batch", r.ID, r.Outcome.Reason(), r.Detail)
						}
					}
					checkDirsSynced(t, ops)
					checkG1(t, ops, false)
					if pos > 0 && log.count(opRenameDone) == 0 {
						t.Errorf("no record was renamed before the failure at position %d", pos)
					}
					if left := tempFiles(t, st.Root); len(left) > 0 {
						t.Errorf("temp files left: %v", left)
					}
					if writers == 1 {
						// One writer: records after the victim are not attempted.
						for _, it := range sorted[pos+1:] {
							for _, o := range ops {
								if o.op == commit.OpCreate && strings.Contains(o.name, string(it.ID)) {
									t.Errorf("%s after the failure was still written", it.ID)
								}
							}
						}
					}
					// The victim still holds its old, valid record.
					if r := readRecord(t, st, victim); op != commit.OpRename && r.ExpiresAt != 1060 {
						t.Errorf("victim record changed: %+v", r)
					}
				})
			}
		}
	}
}

// TestFailedDirSyncFailsBatch: G6, a failed directory fsync makes every
// result of the batch an I/O error, even those whose own directory synced.
func TestFailedDirSyncFailsBatch(t *testing.T) {
	const n, k = 20, 5
	for _, writers := range []int{1, 64} {
		for _, bad := range []int{0, 2, k - 1} {
			t.Run(fmt.Sprintf("writers=%d/shard=%d", writers, bad), func(t *testing.T) {
				st, log := hookedTable(t, k)
				st.Writers = writers
				h := held(t, at(st, 1000).Claim(spread(n, k), "host/w1", 60))
				dir := st.ShardDir(leasefmt.Work, bad)
				log.reset(func(op commit.Op, name string) error {
					if op == commit.OpSyncDir && name == dir {
						return errors.New("injected EIO on directory fsync")
					}
					return nil
				})
				before := st.Stats.Snapshot(0)
				res := at(st, 1010).Renew(h, 60)
				for _, r := range res {
					if r.Outcome != commit.IOError {
						t.Errorf("%s: %s (%s), want io-error", r.ID, r.Outcome.Reason(), r.Detail)
					}
				}
				if s := st.Stats.Snapshot(0); s.Renewals != before.Renewals {
					t.Errorf("stats count %d renewals in a failed batch", s.Renewals-before.Renewals)
				}
				checkDirsSynced(t, log.snapshot())
			})
		}
	}
}

// TestCrossDirectoryRefused: G8, the same-directory batch refuses a rename
// between directories before making it.
func TestCrossDirectoryRefused(t *testing.T) {
	st, log := hookedTable(t, 4)
	src := path.Join(commit.StageDir, "result")
	if err := os.WriteFile(st.Abs(src), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := commit.NewSyncBatch(st.FS, nil)
	for _, dst := range []string{path.Join(commit.PublicDir, "result"), "work/00/" + string(shardID(0, 1)) + ".json", "result"} {
		err := b.Replace(src, dst)
		if !errors.Is(err, commit.ErrCrossDirectory) {
			t.Errorf("Replace(%s, %s) = %v, want ErrCrossDirectory", src, dst, err)
		}
		if _, err := os.Lstat(st.Abs(dst)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after a refused Replace: %v", dst, err)
		}
	}
	if data, err := os.ReadFile(st.Abs(src)); err != nil || string(data) != "data" {
		t.Errorf("source after refused Replace: %q, %v", data, err)
	}
	if c := log.count(commit.OpRename) + log.count(commit.OpSyncDir); c != 0 {
		t.Errorf("%d renames or fsyncs for refused Replaces: %v", c, log.snapshot())
	}
	if err := b.Flush(); err != nil {
		t.Errorf("Flush after refusals: %v", err)
	}
	if c := log.count(commit.OpSyncDir); c != 0 {
		t.Errorf("Flush synced %d directories though nothing was renamed", c)
	}
	// Same directory: renamed, and the directory synced once by Flush.
	if err := os.WriteFile(st.Abs("stage/.tmp"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Replace("stage/.tmp", src); err != nil {
		t.Fatal(err)
	}
	if !b.Pending(commit.StageDir) {
		t.Error("stage not pending after a rename into it")
	}
	if err := b.Flush(); err != nil || log.count(commit.OpSyncDir) != 1 || b.Pending(commit.StageDir) {
		t.Errorf("Flush: %v, %d directory fsyncs", err, log.count(commit.OpSyncDir))
	}
}

// TestDurableMove: G8's cross-directory move fsyncs the destination
// directory, then the source directory, and never replaces a file.
func TestDurableMove(t *testing.T) {
	st, log := hookedTable(t, 4)
	write := func(rel, data string) {
		if err := os.WriteFile(st.Abs(rel), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("stage/a", "A")
	if err := st.DurableMove("stage/a", "public/a"); err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, o := range log.snapshot() {
		seq = append(seq, string(o.op)+" "+o.name)
	}
	if want := []string{"rename-noreplace public/a", "fsyncdir public", "fsyncdir stage"}; !slices.Equal(seq, want) {
		t.Errorf("DurableMove made %q, want %q", seq, want)
	}
	if data, err := os.ReadFile(st.Abs("public/a")); err != nil || string(data) != "A" {
		t.Errorf("public/a = %q, %v", data, err)
	}
	if _, err := os.Lstat(st.Abs("stage/a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stage/a still there: %v", err)
	}

	write("stage/b", "new")
	write("public/b", "old")
	log.reset(nil)
	err := st.DurableMove("stage/b", "public/b")
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("DurableMove over an existing name = %v, want fs.ErrExist", err)
	}
	for rel, want := range map[string]string{"stage/b": "new", "public/b": "old"} {
		if data, err := os.ReadFile(st.Abs(rel)); err != nil || string(data) != want {
			t.Errorf("%s = %q, %v; want %q", rel, data, err, want)
		}
	}
	if c := log.count(commit.OpSyncDir); c != 0 {
		t.Errorf("%d directory fsyncs after a refused move", c)
	}

	// A failing destination fsync stops before the source is synced.
	write("stage/c", "C")
	log.reset(func(op commit.Op, name string) error {
		if op == commit.OpSyncDir && name == commit.PublicDir {
			return errors.New("injected EIO")
		}
		return nil
	})
	if err := st.DurableMove("stage/c", "public/c"); err == nil {
		t.Error("DurableMove with a failing fsync succeeded")
	}
	if c := log.count(commit.OpSyncDir); c != 1 {
		t.Errorf("%d directory fsyncs, want the failed destination one only", c)
	}
}

// TestClaimTokens: tokens only grow; a claim of a released or expired
// record gets the next token and keeps unknown keys.
func TestClaimTokens(t *testing.T) {
	st, _ := hookedTable(t, 16)
	id := shardID(3, 1)
	path := st.Abs(st.RecordPath(leasefmt.Work, id))
	claim := func(now float64) commit.Result {
		return at(st, now).Claim([]commit.Item{{ID: id}}, "host/w", 10)[0]
	}
	if r := claim(100); r.Outcome != commit.OK || r.Token != 1 {
		t.Fatalf("first claim: %+v", r)
	}
	if r := claim(105); r.Outcome != commit.Held {
		t.Fatalf("claim of a live lease: %s", r.Outcome.Reason())
	}
	if r := claim(110); r.Outcome != commit.OK || r.Token != 2 {
		t.Fatalf("claim at expiry: %+v", r)
	}
	if r := at(st, 111).Release([]commit.Item{{ID: id, Token: 2}})[0]; r.Outcome != commit.OK || r.Record.Status != leasefmt.Released {
		t.Fatalf("release: %+v", r)
	}
	// Another program adds a key; the next claim keeps it.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), "}\n", `,"x_campaign":{"a":[1,2]}}`+"\n", 1))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := claim(112); r.Outcome != commit.OK || r.Token != 3 {
		t.Fatalf("claim after release: %+v", r)
	}
	data, _ = os.ReadFile(path)
	if !strings.HasSuffix(string(data), `,"x_campaign":{"a":[1,2]}}`+"\n") || !strings.Contains(string(data), `"token":3,`) {
		t.Errorf("record after claim: %s", data)
	}
	if r := at(st, 113).Complete([]commit.Item{{ID: id, Token: 3}})[0]; r.Outcome != commit.OK {
		t.Fatalf("complete: %+v", r)
	}
	if r := claim(1e6); r.Outcome != commit.Done {
		t.Fatalf("claim of done work: %s", r.Outcome.Reason())
	}
}

// TestClaimFirst: never holds more than n, tries in input order.
func TestClaimFirst(t *testing.T) {
	st, _ := hookedTable(t, 4)
	items := spread(10, 4)
	at(st, 100).Claim(items[1:3], "other", 60) // 1 and 2 are held
	res := at(st, 100).ClaimFirst(items, 3, "me", 60)
	var got []leasefmt.ID
	for _, r := range res {
		if r.Outcome == commit.OK {
			got = append(got, r.ID)
		}
	}
	if want := []leasefmt.ID{items[0].ID, items[3].ID, items[4].ID}; !slices.Equal(got, want) {
		t.Errorf("ClaimFirst granted %v, want %v", got, want)
	}
	for _, it := range items[5:] {
		if r := readRecord(t, st, it.ID); r != nil {
			t.Errorf("%s claimed beyond n: %+v", it.ID, r)
		}
	}
}

func TestOutcomeReasonsAndErrors(t *testing.T) {
	for o, want := range map[commit.Outcome]struct {
		reason string
		err    error
	}{
		commit.OK: {"ok", nil}, commit.StaleToken: {"stale-token", commit.ErrStale}, commit.Expired: {"expired", commit.ErrExpired},
		commit.Held: {"held", commit.ErrHeld}, commit.Done: {"done", commit.ErrDone}, commit.Released: {"released", commit.ErrReleased},
		commit.Missing: {"missing", commit.ErrMissing}, commit.Exists: {"exists", commit.ErrExists}, commit.Corrupt: {"corrupt", commit.ErrCorrupt},
		commit.LockTimeout: {"lock-timeout", commit.ErrLockTimeout}, commit.IOError: {"io-error", commit.ErrIO},
	} {
		if o.Reason() != want.reason || o.Err() != want.err {
			t.Errorf("outcome %d: reason %s, error %v; want %s, %v", o, o.Reason(), o.Err(), want.reason, want.err)
		}
		r := commit.Result{Outcome: o}
		if got, ok := commit.OutcomeOf(r.Err()); !ok || got != o {
			t.Errorf("outcome %d: OutcomeOf(Result.Err()) = %d, %v", o, got, ok)
		}
	}
}
