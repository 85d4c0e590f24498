package safety

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// TestID is the i-th ID of the test tables: a SHA-256 digest, as in use.
func TestID(i int) leasefmt.ID {
	s := sha256.Sum256([]byte(fmt.Sprintf("lease-safety-%d", i)))
	return leasefmt.ID(hex.EncodeToString(s[:]))
}

// The clocks of the scenarios: the starting table is built before T0 and
// operations run at Now.
const (
	T0  = 1000.0
	Now = 2000.0
	TTL = 100.0
)

// The starting table of the work scenarios (4 work shards):
//
//	ID 0  held by alice, token 3, live until 6000
//	ID 1  expired (bob, token 1)
//	ID 2  released (token 1)
//	ID 3  done (token 1)
//	ID 4-7 no record
//	ID 8-11 held by bob, token 1, live until 6000
//	ID 12-43 held by erin, token 1, live until 6000 (the big batches)
//	ID 44-75 no record (the big claims)
//	stage/result.bin, stage/other.bin staged results
func workTable() *leasefmt.Table {
	return &leasefmt.Table{WorkShards: 4, TargetShards: 4, CreatedAt: T0}
}

// Staged results of the starting table.
var stagedFiles = map[string][]byte{
	"result.bin": []byte("fuzzer findings: 3 crashes\n"),
	"other.bin":  []byte("another result\n"),
}

func one(st *commit.Store, id leasefmt.ID, f func([]commit.Item) []commit.Result, tok int64) error {
	res := f([]commit.Item{{ID: id, Token: tok}})
	if res[0].Outcome != commit.OK {
		return fmt.Errorf("setup %s: %s %s", id.Short(), res[0].Outcome.Reason(), res[0].Detail)
	}
	return nil
}

func claimAt(st *commit.Store, id leasefmt.ID, owner string, now, ttl float64) error {
	return one(st, id, func(it []commit.Item) []commit.Result { return st.Claim(it, owner, now, ttl) }, 0)
}

func setupWork(st *commit.Store, fsys commit.FS) error {
	st.Writers = 1
	id := TestID
	for _, t := range []float64{100, 200} {
		if err := claimAt(st, id(0), "alice", t, 1); err != nil {
			return err
		}
	}
	if err := claimAt(st, id(0), "alice", T0, 5000); err != nil {
		return err
	}
	if err := claimAt(st, id(1), "bob", T0, 10); err != nil {
		return err
	}
	if err := claimAt(st, id(2), "bob", T0, 10); err != nil {
		return err
	}
	if err := one(st, id(2), func(it []commit.Item) []commit.Result { return st.Release(it, T0+1) }, 1); err != nil {
		return err
	}
	if err := claimAt(st, id(3), "bob", T0, 10); err != nil {
		return err
	}
	if err := one(st, id(3), func(it []commit.Item) []commit.Result { return st.Complete(it, T0+1) }, 1); err != nil {
		return err
	}
	for i := 8; i < 12; i++ {
		if err := claimAt(st, id(i), "bob", T0, 5000); err != nil {
			return err
		}
	}
	var big []commit.Item
	for i := 12; i < 44; i++ {
		big = append(big, commit.Item{ID: id(i)})
	}
	for _, r := range st.Claim(big, "erin", T0, 5000) {
		if r.Outcome != commit.OK {
			return fmt.Errorf("setup %s: %s", r.ID.Short(), r.Outcome.Reason())
		}
	}
	for name, data := range stagedFiles {
		f, err := fsys.CreateExcl(path.Join(commit.StageDir, name))
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

func items(tok int64, ids ...int) []commit.Item {
	out := make([]commit.Item, len(ids))
	for i, n := range ids {
		out[i] = commit.Item{ID: TestID(n), Token: tok}
	}
	return out
}

func span(from, to int, tok int64) []commit.Item {
	var out []commit.Item
	for i := from; i < to; i++ {
		out = append(out, commit.Item{ID: TestID(i), Token: tok})
	}
	return out
}

func itemsTok(pairs ...int64) []commit.Item {
	var out []commit.Item
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, commit.Item{ID: TestID(int(pairs[i])), Token: pairs[i+1]})
	}
	return out
}

// publishRun completes id with token tok publishing name, as `lease
// complete --publish` does, and acknowledges what it reports.
func publishRun(r *Run, op string, it commit.Item, name string) {
	res, _ := r.Store.CompletePublish(it, name, Now)
	r.Outcome(res.Outcome)
	if res.Outcome == commit.OK {
		r.Ack(Ack{Op: op, Record: res.Record, Published: name, PublishedData: stagedFiles[name]})
	}
}

// WorkScenarios are the work-lease operations: init, claim, renew-batch,
// release, complete and complete --publish, alone and in sequence.
func WorkScenarios() []*Scenario {
	w := func(name string, writers int, run func(r *Run)) *Scenario {
		return &Scenario{Name: name, Table: workTable(), Setup: setupWork, Run: run, Writers: writers, Now: Now}
	}
	return []*Scenario{
		{Name: "init", Now: Now, Run: func(r *Run) {
			t := workTable()
			if _, err := commit.Open(Root, r.FS, t); err == nil {
				r.Ack(Ack{Op: "init", Table: t})
			} else {
				r.Outcome(commit.IOError)
			}
		}},
		w("claim", 1, func(r *Run) {
			r.AckResults("claim", r.Store.Claim(items(0, 4, 5, 1, 2, 0, 3, 6), "carol", Now, TTL))
		}),
		w("claim/4-writers", 4, func(r *Run) {
			r.AckResults("claim", r.Store.Claim(items(0, 4, 5, 6, 7, 1, 2), "carol", Now, TTL))
		}),
		w("claim --first 2", 1, func(r *Run) {
			r.AckResults("claim --first", r.Store.ClaimFirst(items(0, 0, 4, 5, 6), 2, "carol", Now, TTL))
		}),
		w("renew-batch", 1, func(r *Run) {
			r.AckResults("renew-batch", r.Store.Renew(itemsTok(8, 1, 9, 1, 10, 1, 11, 1, 0, 2, 1, 1), Now, TTL))
		}),
		w("renew-batch/4-writers", 4, func(r *Run) {
			r.AckResults("renew-batch", r.Store.Renew(itemsTok(8, 1, 9, 1, 10, 1, 11, 1, 0, 3), Now, TTL))
		}),
		w("release", 1, func(r *Run) {
			r.AckResults("release", r.Store.Release(itemsTok(8, 1, 9, 1, 0, 1), Now))
		}),
		w("complete", 1, func(r *Run) {
			r.AckResults("complete", r.Store.Complete(itemsTok(8, 1, 10, 1, 1, 1), Now))
		}),
		w("complete --publish", 1, func(r *Run) {
			publishRun(r, "complete --publish", commit.Item{ID: TestID(0), Token: 3}, "result.bin")
		}),
		w("claim/32", 1, func(r *Run) {
			r.AckResults("claim", r.Store.Claim(span(44, 76, 0), "carol", Now, TTL))
		}),
		w("renew-batch/32", 1, func(r *Run) {
			r.AckResults("renew-batch", r.Store.Renew(span(12, 44, 1), Now, TTL))
		}),
		w("renew-batch/32/8-writers", 8, func(r *Run) {
			r.AckResults("renew-batch", r.Store.Renew(span(12, 44, 1), Now, TTL))
		}),
		w("release/16", 1, func(r *Run) {
			r.AckResults("release", r.Store.Release(span(12, 28, 1), Now))
		}),
		w("complete/16", 1, func(r *Run) {
			r.AckResults("complete", r.Store.Complete(span(28, 44, 1), Now))
		}),
		w("claim+renew+complete --publish", 1, func(r *Run) {
			res := r.Store.Claim(items(0, 4), "dave", Now, TTL)
			r.AckResults("claim", res)
			if res[0].Outcome != commit.OK {
				return // a script stops at the first failure
			}
			rn := r.Store.Renew([]commit.Item{{ID: TestID(4), Token: res[0].Token}}, Now+10, TTL)
			r.AckResults("renew-batch", rn)
			if rn[0].Outcome != commit.OK {
				return
			}
			publishRun(r, "complete --publish", commit.Item{ID: TestID(4), Token: res[0].Token}, "other.bin")
		}),
	}
}
