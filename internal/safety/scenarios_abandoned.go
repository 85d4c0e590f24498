package safety

// The abandoned-publish scenarios: claims that settle a publish whose
// holder was killed before or after the move into public/, and batches
// whose clock moves while they run.

import (
	"context"
	"fmt"
	"path"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// Abandoned publishes (docs/design.md#records), for the claims that settle them:
//
//	ID 80 committing (bob, token 1, expired) publishing r80.bin, already
//	      moved to public/: a publisher killed between the move and done
//	ID 81 committing (bob, token 1, expired) publishing r81.bin, still
//	      staged: a publisher killed before the move
//	ID 84 committing (bob, token 1, live until 2050) publishing r84.bin,
//	      already moved: a complete killed after the move whose lease run
//	      then releases
var (
	staged84  = staged{84, 1, "r84.bin", []byte("result of 84\n")}
	staged80  = staged{80, 1, "r80.bin", []byte("result of 80\n")}
	staged81  = staged{81, 1, "r81.bin", []byte("result of 81, first holder\n")}
	staged81b = staged{81, 2, "r81.bin", []byte("result of 81, second holder\n")}
)

func setupAbandoned(st *commit.Store, fsys seam.FS) error {
	if err := setupWork(st, fsys); err != nil {
		return err
	}
	for _, s := range []staged{staged80, staged81, staged84} {
		ttl := 10.0
		if s.id == 84 {
			ttl = HeldTTL
		}
		if err := claimAt(st, TestID(s.id), "bob", T0, ttl); err != nil {
			return err
		}
		if err := stageFile(st, fsys, s); err != nil {
			return err
		}
		if err := fsys.SyncFile(s.path()); err != nil {
			return err
		}
		res := at(st, T0+2).Apply(context.Background(), leasefmt.Work, items(1, s.id), commit.CommittingDecision(s.name, 0))
		if res[0].Outcome != commit.OK {
			return fmt.Errorf("setup committing: %s %s", res[0].Outcome.Reason(), res[0].Detail)
		}
	}
	if err := st.Disk().Move(staged80.path(), path.Join(layout.PublicDir, staged80.name)); err != nil {
		return err
	}
	return st.Disk().Move(staged84.path(), path.Join(layout.PublicDir, staged84.name))
}

// lateClock is the clock of a batch whose input arrived late and whose
// filesystem is slow: half a second passes per call through the seam, so
// a 4 s lease written early in the batch is over before its directory is
// fsynced at the end.
func lateClock(calls int) float64 { return Now + float64(calls)*0.5 }

// AbandonedScenarios are claims that meet abandoned publishes, and
// batches whose clock moves while they run.
func AbandonedScenarios() []*Scenario {
	a := func(name string, run func(r *Run)) *Scenario {
		return &Scenario{Name: name, Table: workTable(), Setup: setupAbandoned, Run: run, Writers: 1, Now: Now}
	}
	return []*Scenario{
		a("claim/abandoned publish, moved", func(r *Run) {
			r.AckResults("claim", r.At(Now).Claim(context.Background(), items(0, 80), "carol", TTL))
		}),
		a("claim/abandoned publish, staged, then publish", func(r *Run) {
			res := r.At(Now).Claim(context.Background(), items(0, 81), "carol", TTL)
			r.AckResults("claim", res)
			if res[0].Outcome != commit.OK {
				return
			}
			if err := stageFile(r.Store, r.FS, staged81b); err != nil {
				r.Outcome(commit.IOError)
				return
			}
			pub, _ := r.At(Now+1).CompletePublish(context.Background(), commit.Item{ID: TestID(81), Token: res[0].Token}, staged81b.name)
			r.Outcome(pub.Outcome)
			if pub.Outcome == commit.OK {
				r.Ack(Ack{Op: "complete --publish", Record: pub.Record, Published: staged81b.name, PublishedData: staged81b.data})
			}
		}),
		a("release/abandoned publish, moved", func(r *Run) {
			// lease run releasing after its complete was killed past the move
			r.AckResults("release", r.At(Now).Release(context.Background(), itemsTok(84, 1)))
		}),
		a("release/abandoned publish, staged", func(r *Run) {
			r.AckResults("release", r.At(Now).Release(context.Background(), itemsTok(81, 1)))
		}),
		{Name: "claim/8, late clock", Table: workTable(), Setup: setupWork, Writers: 1, Now: Now, Clock: lateClock,
			Run: func(r *Run) { r.AckResults("claim", r.Store.Claim(context.Background(), span(44, 52, 0), "carol", 4)) }},
		{Name: "renew-batch/8, late clock", Table: workTable(), Setup: setupWork, Writers: 1, Now: Now, Clock: lateClock,
			Run: func(r *Run) { r.AckResults("renew-batch", r.Store.Renew(context.Background(), span(12, 20, 1), 4)) }},
	}
}
