package safety

// The campaign scenarios: releases that count an attempt and fail an item
// (its queue entry removed under the lock), lease retry (the entry made
// durable before the record), whole results (a staged directory under its
// name, the whole staging directory as public/ID/), and claims that settle
// an abandoned whole-directory publish. Over the queue table, plus:
//
//	ID 90 held by dana, token 3, 2 attempts counted, queued
//	ID 91 failed (3 attempts, token 3), not queued
//	ID 92 held by dana, token 1, its staging directory made (the run
//	      writes what a fuzzer leaves there, not durably, as a command
//	      would: crashes/id:000000,sig:11,..., crashes/id:000001,sig:06,...,
//	      fuzzer_stats, the names every instance uses; then publishes it)
//	ID 93 held by dana, token 1, stage/93.1/findings/{a,deep/b}
//	ID 94 committing "." (dana, token 1, expired), already moved to
//	      public/94/: a lease run killed between the move and done
//	ID 95 committing "." (dana, token 1, expired), still staged: killed
//	      before the move

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// fuzzerTree is what a fuzzer leaves in its staging directory.
var fuzzerTree = map[string][]byte{
	"crashes/id:000000,sig:11,src:000000,time:12,execs:40,op:havoc,rep:2": []byte("crash one\n"),
	"crashes/id:000001,sig:06,src:000000,time:20,execs:77,op:havoc,rep:4": []byte("crash two\n"),
	"fuzzer_stats": []byte("execs_done : 1234\n"),
}

// stageTree writes files (paths below the staging directory of token of
// id) through fsys as a command does: plain mkdir and writes, no fsync (in
// a Setup, what it writes is durable all the same).
func stageTree(st *commit.Store, fsys seam.FS, id int, token int64, files map[string][]byte) error {
	base := layout.StagePath(TestID(id), token)
	if _, err := st.MakeStage(TestID(id), token); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for rel := range files {
		names = append(names, rel)
	}
	sort.Strings(names) // one call order
	for _, rel := range names {
		if d := path.Dir(rel); d != "." {
			if err := fsys.Mkdir(path.Join(base, d)); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
		if err := stageFile(st, fsys, staged{id, token, rel, files[rel]}); err != nil {
			return err
		}
	}
	return nil
}

func setupCampaign(st *commit.Store, fsys seam.FS) error {
	if err := setupQueue(st, fsys); err != nil {
		return err
	}
	fail := func(id int, tok int64, max int) error {
		r := at(st, T0+1).ReleaseFailed(context.Background(), items(tok, id), commit.Failure{ExitStatus: 139, Stderr: []byte("Segmentation fault")}, max)
		if r[0].Outcome != commit.OK {
			return errSetup(r[0])
		}
		return nil
	}
	for tok := int64(1); tok <= 2; tok++ {
		if err := claimAt(st, TestID(90), "dana", T0, 10); err != nil {
			return err
		}
		if err := fail(90, tok, 3); err != nil {
			return err
		}
	}
	if err := claimAt(st, TestID(90), "dana", T0, HeldTTL); err != nil {
		return err
	}
	if r := st.Enqueue(context.Background(), items(0, 90)); r[0].Outcome != commit.OK {
		return errSetup(r[0])
	}
	for tok := int64(1); tok <= 3; tok++ {
		if err := claimAt(st, TestID(91), "dana", T0, 10); err != nil {
			return err
		}
		if err := fail(91, tok, 3); err != nil {
			return err
		}
	}
	for _, id := range []int{92, 93} {
		if err := claimAt(st, TestID(id), "dana", T0, HeldTTL); err != nil {
			return err
		}
	}
	if _, err := st.MakeStage(TestID(92), 1); err != nil {
		return err
	}
	if err := stageTree(st, fsys, 93, 1, map[string][]byte{"findings/a": []byte("finding a\n"), "findings/deep/b": []byte("finding b\n")}); err != nil {
		return err
	}
	for _, id := range []int{94, 95} {
		if err := claimAt(st, TestID(id), "dana", T0, 10); err != nil {
			return err
		}
		if err := stageTree(st, fsys, id, 1, map[string][]byte{"crashes/c": []byte(fmt.Sprintf("crash of %d\n", id))}); err != nil {
			return err
		}
		res := at(st, T0+2).Apply(context.Background(), leasefmt.Work, items(1, id), commit.CommittingDecision(leasefmt.PublishStage, 0))
		if res[0].Outcome != commit.OK {
			return errSetup(res[0])
		}
	}
	return st.Disk().Move(layout.StagePath(TestID(94), 1), path.Join(layout.PublicDir, string(TestID(94))))
}

// ackPublishedTree acknowledges a whole-directory publish: every file
// staged below stage/ID.TOKEN/from is in public/to/.
func ackPublishedTree(r *Run, op string, res commit.Result, files map[string][]byte, from, to string) {
	r.Outcome(res.Outcome)
	if res.Outcome != commit.OK {
		return
	}
	out := map[string][]byte{}
	for rel, data := range files {
		if below, ok := strings.CutPrefix(rel, from); ok || from == "" {
			if from == "" {
				below = rel
			}
			out[path.Join(to, strings.TrimPrefix(below, "/"))] = data
		}
	}
	r.Ack(Ack{Op: op, Record: res.Record, PublishedFiles: out})
}

// releaseFailed is lease release --failed: the records, reported, then
// the best-effort removal of the failed items' queue entries.
func releaseFailed(r *Run, held []commit.Item, f commit.Failure, max int) {
	st := r.At(Now)
	res := st.ReleaseFailedRecords(context.Background(), held, f, max)
	r.AckResults("release --failed", res)
	r.BestEffort(func() { st.UnqueueFailed(context.Background(), res) })
}

// CampaignScenarios are the operations of a fuzzing campaign's loop.
func CampaignScenarios() []*Scenario {
	w := func(name string, run func(r *Run)) *Scenario {
		return &Scenario{Name: name, Table: workTable(), Setup: setupCampaign, Run: run, Writers: 1, Now: Now}
	}
	return []*Scenario{
		w("release --failed", func(r *Run) {
			// 90 reaches max_attempts (failed, dequeued); 8 counts its first.
			releaseFailed(r, itemsTok(90, 3, 8, 1), commit.Failure{ExitStatus: 1, Stderr: []byte("boom\n")}, 3)
		}),
		w("release --failed/8, max_attempts 1", func(r *Run) {
			releaseFailed(r, span(12, 20, 1), commit.Failure{ExitStatus: 134}, 1)
		}),
		w("retry", func(r *Run) {
			res := r.At(Now).RetryFailed(context.Background(), items(0, 91, 3, 90))
			for _, x := range res {
				r.Outcome(x.Outcome)
				if x.Outcome == commit.OK {
					r.Ack(Ack{Op: "retry", Record: x.Record, Queued: x.ID})
				}
			}
		}),
		w("run --complete, whole staging directory", func(r *Run) {
			if err := stageTree(r.Store, r.FS, 92, 1, fuzzerTree); err != nil {
				r.Outcome(commit.IOError)
				return
			}
			res, _ := r.At(Now).CompleteStage(context.Background(), commit.Item{ID: TestID(92), Token: 1})
			ackPublishedTree(r, "run --complete", res, fuzzerTree, "", string(TestID(92)))
		}),
		w("complete --publish directory", func(r *Run) {
			res, _ := r.At(Now).CompletePublish(context.Background(), commit.Item{ID: TestID(93), Token: 1}, "findings")
			ackPublishedTree(r, "complete --publish", res, map[string][]byte{"findings/a": []byte("finding a\n"), "findings/deep/b": []byte("finding b\n")}, "findings", "findings")
		}),
		w("claim/abandoned directory publish, moved", func(r *Run) {
			r.AckResults("claim", r.At(Now).Claim(context.Background(), items(0, 94), "carol", TTL))
		}),
		w("claim/abandoned directory publish, staged", func(r *Run) {
			r.AckResults("claim", r.At(Now).Claim(context.Background(), items(0, 95), "carol", TTL))
		}),
	}
}
