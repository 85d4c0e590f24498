package commit_test

// The input store: each content written to a temp file, fsynced, moved to
// input/SS/ID without replacing, each touched directory fsynced once
// before anything is reported stored; a content that changed since it was
// hashed leaves nothing behind.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
)

func content(data string) commit.Content {
	sum := sha256.Sum256([]byte(data))
	return commit.Content{ID: leasefmt.ID(hex.EncodeToString(sum[:])), Name: "mem:" + data,
		Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(data)), nil }}
}

func TestStoreInputs(t *testing.T) {
	t.Parallel()
	st, log := hookedTable(t, 2)
	cs := []commit.Content{content("a"), content("b"), content("c"), content("d")}
	for _, r := range st.StoreInputs(context.Background(), cs) {
		if r.Outcome != commit.OK {
			t.Fatalf("%s: %s %s", r.ID.Short(), r.Outcome.Reason(), r.Detail)
		}
	}
	shards := map[string]bool{}
	for _, c := range cs {
		got, err := os.ReadFile(st.Abs(st.InputPath(c.ID)))
		if err != nil || string(got) != strings.TrimPrefix(c.Name, "mem:") {
			t.Errorf("%s: %q, %v", st.InputPath(c.ID), got, err)
		}
		shards[st.InputShardDir(c.ID.Shard(2))] = true
		if h, err := commit.HashFile(st.FS(), st.InputPath(c.ID)); err != nil || h != c.ID {
			t.Errorf("HashFile = %s, %v", h, err)
		}
	}
	// G1: each temp fsynced before its rename; G4: one fsync per shard
	// directory, after the renames into it.
	synced := map[string]bool{}
	dirSyncs := map[string]int{}
	for _, o := range log.snapshot() {
		switch o.op {
		case seam.OpFsync:
			synced[o.name] = true
		case seam.OpRenameNoReplace:
			if len(synced) == 0 {
				t.Errorf("rename to %s before any file fsync", o.name)
			}
		case seam.OpSyncDir:
			dirSyncs[o.name]++
		}
	}
	for d := range shards {
		if dirSyncs[d] != 1 {
			t.Errorf("%s fsynced %d times, want once", d, dirSyncs[d])
		}
	}
	// Stored again: nothing written, reported stored.
	log.reset(nil)
	if r := st.StoreInputs(context.Background(), cs[:1])[0]; r.Outcome != commit.OK || log.count(seam.OpCreate) != 0 {
		t.Errorf("storing again: %s, %d creates", r.Outcome.Reason(), log.count(seam.OpCreate))
	}
	// A content that changed since it was hashed: refused, no temp left.
	bad := content("e")
	bad.Open = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("changed")), nil }
	r := st.StoreInputs(context.Background(), []commit.Content{bad})[0]
	if r.Outcome != commit.IOError || !errors.Is(r.Cause, commit.ErrContentChanged) {
		t.Errorf("a changed content: %s %v", r.Outcome.Reason(), r.Cause)
	}
	ents, _ := os.ReadDir(st.Abs(st.InputShardDir(bad.ID.Shard(2))))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || e.Name() == string(bad.ID) {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
