package commit_test

// The tally's bucket joins the write's group commit: the directory fsync of
// the record's shard and that of its bucket are in flight together, for a
// batch (lease complete) and for a record written on its own (the publish
// of lease run and lease work), so the tally costs the writer one link, not
// one more fsync round trip.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// rendezvous is a hook under which the fsync of a work shard and that of a
// tally bucket each stay in flight, up to a bound, until the other is in
// flight too: met reports whether both ever were at once, which only fsyncs
// issued concurrently can be.
type rendezvous struct {
	mu            sync.Mutex
	armed, met    bool
	shard, bucket int // in flight
}

func (r *rendezvous) hook(op seam.Op, name string) error {
	if op != seam.OpSyncDir {
		return nil
	}
	var mine, other *int
	switch {
	case strings.HasPrefix(name, leasefmt.Work.Dir()+"/"):
		mine, other = &r.shard, &r.bucket
	case strings.HasPrefix(name, layout.TallyDir+"/") && !strings.HasPrefix(name, layout.UnqueuedDir):
		mine, other = &r.bucket, &r.shard
	default:
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.armed {
		return nil
	}
	*mine++
	defer func() { *mine-- }()
	// Returns as soon as the other arrives; the bound only ends a wait
	// for one that never comes (sequential fsyncs), loaded machine or not.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if r.met || *other > 0 {
			r.met = true
			return nil
		}
		r.mu.Unlock()
		time.Sleep(time.Millisecond)
		r.mu.Lock()
	}
	return nil
}

func (r *rendezvous) arm() {
	r.mu.Lock()
	r.armed = true
	r.mu.Unlock()
}

func rendezvousTable(t *testing.T) (*commit.Store, *rendezvous) {
	t.Helper()
	r := &rendezvous{}
	st, err := commit.Open(t.TempDir(),
		commit.Options{Wrap: func(osfs seam.FS) seam.FS { return seam.WithHook(osfs, r.hook) }, Create: &leasefmt.Table{WorkShards: 4, TargetShards: 4, CreatedAt: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	return st, r
}

func TestTallyBucketSyncedWithTheShard(t *testing.T) {
	ctx := context.Background()
	t.Run("complete", func(t *testing.T) {
		st, r := rendezvousTable(t)
		a := claimOne(t, st, shardID(1, 1), 10)
		// The bucket exists before the timed write (its creation, once per
		// bucket span, fsyncs the tally directory first).
		b := claimOne(t, st, shardID(2, 1), 10)
		at(st, 11).Complete(ctx, []commit.Item{b})
		r.arm()
		if res := at(st, 11).Complete(ctx, []commit.Item{a})[0]; res.Outcome != commit.OK {
			t.Fatalf("complete: %s %s", res.Outcome.Reason(), res.Detail)
		}
		if !r.met {
			t.Error("lease complete fsynced the record's shard and its tally bucket one after the other")
		}
	})
	t.Run("published", func(t *testing.T) {
		st, r := rendezvousTable(t)
		a := claimOne(t, st, shardID(1, 1), 10)
		b := claimOne(t, st, shardID(2, 1), 10)
		at(st, 11).Complete(ctx, []commit.Item{b})
		stageTree(t, st, a, afl)
		r.arm()
		if res, err := at(st, 11).CompleteStage(ctx, a); err != nil || res.Outcome != commit.OK {
			t.Fatalf("CompleteStage: %v %s", err, res.Detail)
		}
		if !r.met {
			t.Error("a published result's done record: its shard and its tally bucket fsynced one after the other")
		}
	})
}
