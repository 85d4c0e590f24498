package commit_test

// The transient errors of a network filesystem's client (issue 19): a read
// that fails after its open is never "no record", a record read as missing
// is created without replacing and read again when it turns out to exist,
// and ESTALE costs one record a retry, not the batch. The filesystems here
// are the real one (seam.OS on a temp dir) behind a thin wrapper that
// plays the other client.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
)

// otherClient wraps the table's FS. For the records in its plan it can make
// the first reads fail as a lazily opened, replaced file does (ErrVanished),
// hide a record from the first reads (a stale negative cache), write
// another holder's record just before this client's create lands, and fail
// renames with ESTALE before or after they take effect.
type otherClient struct {
	seam.FS
	mu          sync.Mutex
	vanish      map[string]int // record path -> reads to fail with ErrVanished
	hide        map[string]int // record path -> reads to answer fs.ErrNotExist
	createFirst map[string][]byte
	staleBefore map[string]int // renames to fail with ESTALE without renaming
	staleAfter  map[string]int // renames to fail with ESTALE after renaming
	refreshed   []string
}

func newOtherClient(f seam.FS) *otherClient {
	return &otherClient{FS: f, vanish: map[string]int{}, hide: map[string]int{}, createFirst: map[string][]byte{},
		staleBefore: map[string]int{}, staleAfter: map[string]int{}}
}

func (o *otherClient) take(m map[string]int, name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if m[name] > 0 {
		m[name]--
		return true
	}
	return false
}

func (o *otherClient) ReadFile(name string, max int) ([]byte, error) {
	if o.take(o.hide, name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: unix.ENOENT}
	}
	if o.take(o.vanish, name) {
		if _, err := o.FS.ReadFile(name, max); err != nil {
			return nil, err
		}
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: ENOENT", seam.ErrVanished)}
	}
	return o.FS.ReadFile(name, max)
}

func (o *otherClient) rename(old, name string, do func(o, n string) error) error {
	if o.take(o.staleBefore, name) {
		return &fs.PathError{Op: "rename", Path: name, Err: unix.ESTALE}
	}
	o.mu.Lock()
	first, ok := o.createFirst[name]
	delete(o.createFirst, name)
	o.mu.Unlock()
	if ok {
		tmp := path.Join(path.Dir(name), ".other.tmp")
		f, err := o.FS.CreateExcl(tmp)
		if err != nil {
			return err
		}
		f.Write(first)
		f.Close()
		if err := o.FS.Rename(tmp, name); err != nil {
			return err
		}
	}
	if err := do(old, name); err != nil {
		return err
	}
	if o.take(o.staleAfter, name) {
		return &fs.PathError{Op: "rename", Path: name, Err: unix.ESTALE}
	}
	return nil
}

func (o *otherClient) Rename(old, name string) error { return o.rename(old, name, o.FS.Rename) }
func (o *otherClient) RenameNoReplace(old, name string) error {
	return o.rename(old, name, o.FS.RenameNoReplace)
}

func (o *otherClient) Refresh(dir string) {
	o.mu.Lock()
	o.refreshed = append(o.refreshed, dir)
	o.mu.Unlock()
}

// transientTable makes a table of 4 work shards behind an otherClient and a
// log of the calls; retries pause for a millisecond.
func transientTable(t *testing.T) (*commit.Store, *otherClient, *opLog) {
	t.Helper()
	root := t.TempDir()
	var other *otherClient
	log := &opLog{}
	st, err := commit.Open(root, commit.Options{Wrap: func(osfs seam.FS) seam.FS {
		other = newOtherClient(osfs)
		return seam.WithHook(other, log.hook)
	}, Create: &leasefmt.Table{WorkShards: 4, TargetShards: 4, CreatedAt: 1000}, Retry: durable.Retry{Attempts: 4, Backoff: time.Millisecond, MaxBackoff: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log.reset(nil)
	return st, other, log
}

// TestReadAfterOpenIsNeverMissing: a record whose read fails after its
// open (GlusterFS open-behind, replaced through the other mount) is read
// again; the claim gets the next token, never token 1 as for a record that
// does not exist. When the reads keep failing the item is an I/O error and
// nothing is written.
func TestReadAfterOpenIsNeverMissing(t *testing.T) {
	t.Parallel()
	st, other, log := transientTable(t)
	id := shardID(1, 1)
	name := st.RecordPath(leasefmt.Work, id)
	for round, want := range []int64{1, 2, 3} {
		if round > 0 {
			other.vanish[name] = 3 // within the 4 tries
		}
		res := at(st, float64(1000+1000*round)).Claim(context.Background(), []commit.Item{{ID: id}}, fmt.Sprintf("host/w%d", round), 10)
		if r := res[0]; r.Outcome != commit.OK || r.Token != want {
			t.Fatalf("round %d: %s token %d (%s), want ok token %d", round, r.Outcome.Reason(), r.Token, r.Detail, want)
		}
	}
	if got := st.Stats().Retries.Load(); got != 6 {
		t.Errorf("%d retries counted, want 6", got)
	}
	// Reads that never succeed: an I/O error, no write.
	other.vanish[name] = 100
	log.reset(nil)
	res := at(st, 9000).Claim(context.Background(), []commit.Item{{ID: id}}, "host/late", 10)
	if r := res[0]; r.Outcome != commit.IOError || !errors.Is(r.Err(), seam.ErrVanished) || errors.Is(r.Err(), fs.ErrNotExist) {
		t.Fatalf("claim with reads failing after open: %s (%v), want io-error wrapping ErrVanished and not fs.ErrNotExist", r.Outcome.Reason(), r.Err())
	}
	if n := log.count(seam.OpCreate) + log.count(seam.OpRename) + log.count(seam.OpRenameNoReplace); n != 0 {
		t.Errorf("%d writes for a record that could not be read", n)
	}
	other.vanish[name] = 0
	if r := readRecord(t, st, id); r.Token != 3 {
		t.Errorf("record after the failed claim has token %d, want 3", r.Token)
	}
	// Read-only callers see the same: Read is an I/O error, not "none".
	other.vanish[name] = 100
	if r, err := st.Read(context.Background(), leasefmt.Work, id); r != nil || !errors.Is(err, seam.ErrVanished) {
		t.Errorf("Read: %v, %v; want ErrVanished", r, err)
	}
}

// TestCreateNeverReplaces: a record read as missing is moved into place
// without replacing. When another client created it meanwhile, or this
// client's cache hid it, the claim reads it again and decides on it: the
// other holder's record survives and the claim is refused as held.
func TestCreateNeverReplaces(t *testing.T) {
	t.Parallel()
	st, other, log := transientTable(t)
	ids := []leasefmt.ID{shardID(0, 1), shardID(1, 2), shardID(2, 3)}
	theirs := func(id leasefmt.ID) []byte {
		b, err := leasefmt.Encode(&leasefmt.Record{Kind: leasefmt.Work, ID: id, Status: leasefmt.Leased, Owner: "other/node-b", Token: 7,
			ClaimedAt: 990, RenewedAt: 990, ExpiresAt: 5000})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// ids[0]: created by the other client between this client's read and
	// its create. ids[1]: exists, but the first read says it does not.
	other.createFirst[st.RecordPath(leasefmt.Work, ids[0])] = theirs(ids[0])
	if err := st.WriteOne(mustDecode(t, theirs(ids[1]), ids[1])); err != nil {
		t.Fatal(err)
	}
	other.hide[st.RecordPath(leasefmt.Work, ids[1])] = 1
	log.reset(nil)
	res := at(st, 1000).Claim(context.Background(), []commit.Item{{ID: ids[0]}, {ID: ids[1]}, {ID: ids[2]}}, "host/me", 60)
	for i, r := range res[:2] {
		if r.Outcome != commit.Held || r.Token != 7 {
			t.Errorf("%s: %s token %d (%s), want held by token 7", r.ID.Short(), r.Outcome.Reason(), r.Token, r.Detail)
		}
		if got := readRecord(t, st, ids[i]); got.Owner != "other/node-b" || got.Token != 7 {
			t.Errorf("%s: the other client's record was replaced: %+v", ids[i].Short(), got)
		}
	}
	if r := res[2]; r.Outcome != commit.OK || r.Token != 1 {
		t.Errorf("fresh ID: %s token %d, want ok token 1", r.Outcome.Reason(), r.Token)
	}
	if n := log.count(seam.OpRename); n != 0 {
		t.Errorf("%d renames over records that a claim read as missing, want 0 (create without replacing)", n)
	}
	if tmps := tempFiles(t, st.Root()); len(tmps) != 0 {
		t.Errorf("temp files left: %v", tmps)
	}
}

func mustDecode(t *testing.T, b []byte, id leasefmt.ID) *leasefmt.Record {
	t.Helper()
	r, err := leasefmt.Decode(b, leasefmt.Work, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestESTALEPerRecord: in a batch of 139 renewals, an ESTALE from one
// record's rename is retried for that record alone and the batch
// succeeds; a rename that took effect although it answered ESTALE is
// recognised by its bytes and not written twice, and its directory is
// still fsynced; an ESTALE that does not go away fails the batch (G6)
// with that record as the cause.
func TestESTALEPerRecord(t *testing.T) {
	t.Parallel()
	st, other, log := transientTable(t)
	items := spread(139, 4)
	h := held(t, at(st, 1000).Claim(context.Background(), items, "host/w", 60))
	before, after := h[17].ID, h[90].ID
	other.staleBefore[st.RecordPath(leasefmt.Work, before)] = 1
	other.staleAfter[st.RecordPath(leasefmt.Work, after)] = 1
	log.reset(nil)
	res := at(st, 1010).Renew(context.Background(), h, 60)
	for _, r := range res {
		if r.Outcome != commit.OK {
			t.Fatalf("%s: %s %s", r.ID.Short(), r.Outcome.Reason(), r.Detail)
		}
	}
	if got := st.Stats().Retries.Load(); got != 2 {
		t.Errorf("%d retries, want 2 (one per record that met ESTALE)", got)
	}
	renames := map[string]int{}
	for _, o := range log.snapshot() {
		if o.op == seam.OpRename && !o.failed {
			renames[o.name]++
		}
	}
	if n := renames[st.RecordPath(leasefmt.Work, after)]; n != 1 {
		t.Errorf("the record whose rename took effect despite ESTALE was renamed %d times, want 1", n)
	}
	if n := renames[st.RecordPath(leasefmt.Work, before)]; n != 2 {
		t.Errorf("the record whose rename failed with ESTALE was renamed %d times, want 2 (the failed try and the retry)", n)
	}
	checkDirsSynced(t, log.snapshot())
	for _, it := range []leasefmt.ID{before, after} {
		if r := readRecord(t, st, it); r.ExpiresAt != 1070 {
			t.Errorf("%s not renewed: %+v", it.Short(), r)
		}
	}
	if len(other.refreshed) != 2 {
		t.Errorf("the FS was asked to refresh %v, want the two records' directories", other.refreshed)
	}
	// Sticky: the record's tries run out, the batch fails.
	stuck := h[5].ID
	other.staleBefore[st.RecordPath(leasefmt.Work, stuck)] = 100
	res = at(st, 1020).Renew(context.Background(), h, 60)
	for _, r := range res {
		if r.Outcome != commit.IOError {
			t.Fatalf("%s: %s, want io-error (the batch failed)", r.ID.Short(), r.Outcome.Reason())
		}
		if r.ID == stuck && (r.Derived() || !errors.Is(r.Err(), unix.ESTALE)) {
			t.Errorf("the stuck record's error %v does not name ESTALE as its own", r.Err())
		}
		if r.ID != stuck && !r.Derived() {
			t.Errorf("%s: %v, want derived from the stuck record", r.ID.Short(), r.Err())
		}
	}
	if !strings.Contains(res[5].Detail, "stale file handle") {
		t.Errorf("detail %q lacks the ESTALE hint", res[5].Detail)
	}
}
