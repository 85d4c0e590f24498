package safety

// The queue scenarios (docs/design.md#queue): lease add, claim --next and complete of
// queued items, over the work table with a queue:
//
//	ID 4, 5, 8, 9, 76, 77 queued (76, 77 without a record)
//	ID 3 (done) with a leftover entry, as a complete killed before the
//	removal leaves it

import (
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"path"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

func setupQueue(st *commit.Store, fsys seam.FS) error {
	if err := setupWork(st, fsys); err != nil {
		return err
	}
	for _, r := range st.Enqueue(context.Background(), items(0, 4, 5, 8, 9, 76, 77)) {
		if r.Outcome != commit.OK {
			return errSetup(r)
		}
	}
	// The leftover entry of done ID 3, made as another program would.
	if err := st.Disk().EnsureDir(st.QueueShardDir(TestID(3).Shard(st.Table().WorkShards))); err != nil {
		return err
	}
	f, err := fsys.CreateExcl(st.QueuePath(TestID(3)))
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.SyncDir(st.QueueShardDir(TestID(3).Shard(st.Table().WorkShards)))
}

func errSetup(r commit.Result) error {
	return &setupError{r}
}

type setupError struct{ r commit.Result }

func (e *setupError) Error() string { return "setup " + e.r.ID.Short() + ": " + e.r.Outcome.Reason() }

// ackQueued acknowledges every ID an add reported added.
func ackQueued(r *Run, res []commit.Result) {
	for _, x := range res {
		r.Outcome(x.Outcome)
		if x.Outcome == commit.OK {
			r.Ack(Ack{Op: "add", Queued: x.ID})
		}
	}
}

// QueueScenarios are the queue operations.
func QueueScenarios() []*Scenario {
	w := func(name string, writers int, run func(r *Run)) *Scenario {
		return &Scenario{Name: name, Table: workTable(), Setup: setupQueue, Run: run, Writers: writers, Now: Now}
	}
	return []*Scenario{
		w("add", 1, func(r *Run) {
			// New IDs (with and without records), one queued already, one done.
			ackQueued(r, r.Store.Enqueue(context.Background(), items(0, 6, 7, 78, 79, 1, 2, 4, 3)))
		}),
		w("add/4-writers", 4, func(r *Run) {
			ackQueued(r, r.Store.Enqueue(context.Background(), items(0, 6, 7, 78, 79, 80, 81)))
		}),
		w("claim --next 3", 1, func(r *Run) {
			nx := r.At(Now).ClaimNext(context.Background(), 3, "carol", TTL, rand.New(rand.NewPCG(1, 2)))
			r.AckResults("claim", nx.Results)
		}),
		w("claim --next, complete", 1, func(r *Run) {
			nx := r.At(Now).ClaimNext(context.Background(), 2, "carol", TTL, rand.New(rand.NewPCG(3, 4)))
			r.AckResults("claim", nx.Results)
			var held []commit.Item
			for _, x := range nx.Results {
				if x.Outcome == commit.OK {
					held = append(held, commit.Item{ID: x.ID, Token: x.Token})
				}
			}
			r.AckResults("complete", r.At(Now+1).Complete(context.Background(), held))
		}),
		// One item of lease work, as its loop makes it: the claim from the
		// queue, the staging directory (not fsynced), then leased straight
		// to done (nothing staged) or the publish of what was staged
		// (docs/performance.md, the durability budget).
		w("lease work item", 1, func(r *Run) { workItem(r, nil) }),
		w("lease work item, publishing", 1, func(r *Run) {
			workItem(r, map[string][]byte{"crashes/c": []byte("crash\n")})
		}),
	}
}

// workItem is one item of lease work: claim --next 1, its staging
// directory, files staged there, and its finish (Finish): done with
// nothing staged, the staging directory published as public/ID otherwise.
func workItem(r *Run, files map[string][]byte) {
	nx := r.At(Now).ClaimNext(context.Background(), 1, "carol", TTL, rand.New(rand.NewPCG(5, 6)))
	r.AckResults("claim", nx.Results)
	for _, x := range nx.Results {
		if x.Outcome != commit.OK {
			continue
		}
		it := commit.Item{ID: x.ID, Token: x.Token}
		if _, err := r.Store.MakeStage(it.ID, it.Token); err != nil {
			r.Outcome(commit.IOError)
			return
		}
		if files == nil {
			r.AckResults("complete", r.At(Now+1).Complete(context.Background(), []commit.Item{it}))
			return
		}
		base := layout.StagePath(it.ID, it.Token)
		for rel, data := range files {
			if err := r.FS.Mkdir(path.Join(base, path.Dir(rel))); err != nil && !errors.Is(err, fs.ErrExist) {
				r.Outcome(commit.IOError)
				return
			}
			f, err := r.FS.CreateExcl(path.Join(base, rel))
			if err == nil {
				_, err = f.Write(data)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				r.Outcome(commit.IOError)
				return
			}
		}
		res, _ := r.At(Now+1).CompleteStage(context.Background(), it)
		ackPublishedTree(r, "run --complete", res, files, "", string(it.ID))
		return
	}
}

// queuedInvariant: an ID reported added (or put back by a retry), or
// queued before the operation, still has its entry after recovery unless
// its record is done or failed (docs/lease-format.md: an entry for every
// queued item that is not done or failed).
func (c *checker) queuedInvariant(t *Tree, recs map[recKey]*leasefmt.Record, acks []Ack) []string {
	if c.sc.Table == nil {
		return nil
	}
	n := c.sc.Table.WorkShards
	entry := func(id leasefmt.ID) string {
		return layout.QueueDir + "/" + leasefmt.ShardDirName(id.Shard(n), n) + "/" + string(id)
	}
	var v []string
	want := map[leasefmt.ID]string{}
	for _, a := range acks {
		if a.Queued != "" {
			want[a.Queued] = "reported added by " + a.Op
		}
	}
	c.base.Walk(func(p string, dir bool, _ []byte) {
		if id, ok := queueEntryID(p); ok && !dir {
			if _, seen := want[id]; !seen {
				want[id] = "queued before the operation"
			}
		}
	})
	for id, why := range want {
		if r := recs[recKey{leasefmt.Work, id}]; r != nil && (r.Status == leasefmt.Done || r.Status == leasefmt.Failed) {
			continue // done, or failed until a retry queues it again
		}
		if data, dir, ok := t.Get(entry(id)); !ok || dir || len(data) != 0 {
			v = append(v, "queue/"+id.Short()+": "+why+", not done, but its entry is gone after recovery")
		}
	}
	return v
}

// queueEntryID is the ID of a queue entry path queue/SS/ID.
func queueEntryID(p string) (leasefmt.ID, bool) {
	if len(p) < len(layout.QueueDir)+2+64 || p[:len(layout.QueueDir)+1] != layout.QueueDir+"/" {
		return "", false
	}
	id, err := leasefmt.ParseID(p[len(p)-64:])
	return id, err == nil && p[len(p)-65] == '/'
}
