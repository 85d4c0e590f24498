package commit_test

// Durability tests of the storage engine through the FS seam: every call
// the engine makes is recorded (seam.WithHook over seam.OS on a temp
// dir) and checked against the invariants of docs/design.md#durability (G1–G8). This file
// holds the recording seam and the checks; the tests are in batch_test.go
// (G4, G7), failure_test.go (G5, G6), move_test.go (G8) and claim_test.go.

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
)

// opRenameDone is logged after a rename returned, so that orderings between
// goroutines (a rename finished before its directory's fsync began) can be
// checked; the hook itself sees a call only before it is made.
const opRenameDone seam.Op = "rename-done"

type loggedOp struct {
	op     seam.Op
	name   string
	failed bool // the hook failed the call
}

// opLog records every call through the seam and can fail chosen ones.
type opLog struct {
	mu   sync.Mutex
	ops  []loggedOp
	fail func(op seam.Op, name string) error // nil: fail nothing
	// renamed, when not nil, holds back every injected failure until some
	// rename has finished (closed at the first opRenameDone): with many
	// writers the failure then comes after a rename however the goroutines
	// are scheduled.
	renamed chan struct{}
}

func (l *opLog) hook(op seam.Op, name string) error {
	l.mu.Lock()
	var err error
	if l.fail != nil {
		err = l.fail(op, name)
	}
	l.ops = append(l.ops, loggedOp{op, name, err != nil})
	wait := l.renamed
	l.mu.Unlock()
	if err != nil && wait != nil {
		<-wait
	}
	return err
}

// holdUntilRenamed makes the failures injected from now on wait for a
// finished rename (see opLog.renamed).
func (l *opLog) holdUntilRenamed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renamed = make(chan struct{})
}

// logRenameDone records a finished rename and releases held failures.
func (l *opLog) logRenameDone(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, loggedOp{op: opRenameDone, name: name})
	if l.renamed != nil {
		select {
		case <-l.renamed:
		default:
			close(l.renamed)
		}
	}
}

func (l *opLog) reset(fail func(op seam.Op, name string) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops, l.fail = nil, fail
}

func (l *opLog) snapshot() []loggedOp {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ops)
}

func (l *opLog) count(op seam.Op) int {
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
	seam.FS
	log *opLog
}

// Unwrap lets the engine find the capabilities of the FS below (links).
func (r renameDoneFS) Unwrap() seam.FS { return r.FS }

func (r renameDoneFS) Rename(o, n string) error {
	err := r.FS.Rename(o, n)
	if err == nil {
		r.log.logRenameDone(n)
	}
	return err
}

// optionsOf is a test helper's optional options: the first of opts, or
// none.
func optionsOf(opts []commit.Options) commit.Options {
	if len(opts) == 0 {
		return commit.Options{}
	}
	return opts[0]
}

// hookedTable creates a table of workShards work shards in a temp dir and
// opens it through a logging FS; the log starts empty.
func hookedTable(t *testing.T, workShards int, opts ...commit.Options) (*commit.Store, *opLog) {
	t.Helper()
	root := t.TempDir()
	return openHooked(t, root, workShards, opts...)
}

func openHooked(t *testing.T, root string, workShards int, opts ...commit.Options) (*commit.Store, *opLog) {
	t.Helper()
	log := &opLog{}
	o := optionsOf(opts)
	o.Wrap = func(osfs seam.FS) seam.FS { return seam.WithHook(renameDoneFS{osfs, log}, log.hook) }
	o.Create = &leasefmt.Table{WorkShards: workShards, TargetShards: 4, CreatedAt: 1000}
	st, err := commit.Open(root, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
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
	r, err := st.Read(context.Background(), leasefmt.Work, id)
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
		if o.op != seam.OpRename && o.op != seam.OpRenameNoReplace || o.failed {
			continue
		}
		renamed++
		tmpPrefix := path.Join(path.Dir(o.name), "."+path.Base(o.name)+".tmp.")
		var seq []seam.Op
		for _, p := range ops[:i] {
			if strings.HasPrefix(p.name, tmpPrefix) && !p.failed {
				seq = append(seq, p.op)
			}
		}
		if !slices.Equal(seq, []seam.Op{seam.OpCreate, seam.OpWrite, seam.OpFsync, seam.OpClose}) {
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
		case o.op == seam.OpSyncDir && !o.failed:
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
			if o.op == seam.OpSyncDir && o.name == dir {
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
