package safety

// The scenarios the Explorer runs: the test IDs and clocks, the starting
// work table and its staged results, the helpers the scenarios share, and
// the work-lease scenarios; the abandoned-publish, group and fsck
// scenarios are in scenarios_abandoned.go, scenarios_groups.go and
// scenarios_fsck.go.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
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
	// HeldTTL makes the leases renewed by the scenarios live until 2050,
	// so that a renewal at Now (until 2100) extends them.
	HeldTTL = 1050.0
)

// The starting table of the work scenarios (4 work shards):
//
//	ID 0  held by alice, token 3, live until 6000
//	ID 1  expired (bob, token 1)
//	ID 2  released (token 1)
//	ID 3  done (token 1)
//	ID 4-7 no record
//	ID 8-11 held by bob, token 1, live until 2050
//	ID 12-43 held by erin, token 1, live until 2050 (the big batches)
//	ID 44-75 no record (the big claims)
//	stage/ID0.3/result.bin staged by alice (token 3 of ID 0)
//	stage/ID4.1/other.bin  staged by the next holder of ID 4 (token 1)
func workTable() *leasefmt.Table {
	return &leasefmt.Table{WorkShards: 4, TargetShards: 4, CreatedAt: T0}
}

// staged is a result staged by the holder of one token (docs/design.md#staging).
type staged struct {
	id    int
	token int64
	name  string
	data  []byte
}

func (s staged) path() string { return path.Join(layout.StagePath(TestID(s.id), s.token), s.name) }

// Staged results of the starting table.
var stagedFiles = []staged{
	{0, 3, "result.bin", []byte("fuzzer findings: 3 crashes\n")},
	{4, 1, "other.bin", []byte("another result\n")},
}

// stagedData is the content staged as name.
func stagedData(name string) []byte {
	for _, s := range stagedFiles {
		if s.name == name {
			return s.data
		}
	}
	return nil
}

// stageFile writes a staged result through fsys, as a holder's command
// would (not durably: lease complete --publish fsyncs it).
func stageFile(st *commit.Store, fsys seam.FS, s staged) error {
	if _, err := st.MakeStage(TestID(s.id), s.token); err != nil {
		return err
	}
	f, err := fsys.CreateExcl(s.path())
	if err != nil {
		return err
	}
	if _, err := f.Write(s.data); err != nil {
		return err
	}
	return f.Close()
}

func one(st *commit.Store, id leasefmt.ID, f func([]commit.Item) []commit.Result, tok int64) error {
	res := f([]commit.Item{{ID: id, Token: tok}})
	if res[0].Outcome != commit.OK {
		return fmt.Errorf("setup %s: %s %s", id.Short(), res[0].Outcome.Reason(), res[0].Detail)
	}
	return nil
}

func claimAt(st *commit.Store, id leasefmt.ID, owner string, now, ttl float64) error {
	return one(st, id, func(it []commit.Item) []commit.Result { return at(st, now).Claim(context.Background(), it, owner, ttl) }, 0)
}

func setupWork(st *commit.Store, fsys seam.FS) error {
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
	if err := one(st, id(2), func(it []commit.Item) []commit.Result { return at(st, T0+1).Release(context.Background(), it) }, 1); err != nil {
		return err
	}
	if err := claimAt(st, id(3), "bob", T0, 10); err != nil {
		return err
	}
	if err := one(st, id(3), func(it []commit.Item) []commit.Result { return at(st, T0+1).Complete(context.Background(), it) }, 1); err != nil {
		return err
	}
	for i := 8; i < 12; i++ {
		if err := claimAt(st, id(i), "bob", T0, HeldTTL); err != nil {
			return err
		}
	}
	var big []commit.Item
	for i := 12; i < 44; i++ {
		big = append(big, commit.Item{ID: id(i)})
	}
	for _, r := range at(st, T0).Claim(context.Background(), big, "erin", HeldTTL) {
		if r.Outcome != commit.OK {
			return fmt.Errorf("setup %s: %s", r.ID.Short(), r.Outcome.Reason())
		}
	}
	for _, s := range stagedFiles {
		if err := stageFile(st, fsys, s); err != nil {
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
	res, _ := r.At(Now).CompletePublish(context.Background(), it, name)
	r.Outcome(res.Outcome)
	if res.Outcome == commit.OK {
		r.Ack(Ack{Op: op, Record: res.Record, Published: name, PublishedData: stagedData(name)})
	}
}

// WorkScenarios are the work-lease operations: init, claim, renew-batch,
// release, complete and complete --publish, alone and in sequence.
func WorkScenarios() []*Scenario {
	w := func(name string, writers int, run func(r *Run)) *Scenario {
		return &Scenario{Name: name, Table: workTable(), Setup: setupWork, Run: run, Writers: writers, Now: Now}
	}
	scs := []*Scenario{
		{Name: "init", Now: Now, Reinit: workTable(), Run: func(r *Run) {
			t := workTable()
			if _, err := commit.Open(Root, commit.Options{FS: r.FS, Create: t}); err == nil {
				r.Ack(Ack{Op: "init", Table: t})
			} else {
				r.Outcome(commit.IOError)
			}
		}},
		w("claim", 1, func(r *Run) {
			r.AckResults("claim", r.At(Now).Claim(context.Background(), items(0, 4, 5, 1, 2, 0, 3, 6), "carol", TTL))
		}),
		w("claim/4-writers", 4, func(r *Run) {
			r.AckResults("claim", r.At(Now).Claim(context.Background(), items(0, 4, 5, 6, 7, 1, 2), "carol", TTL))
		}),
		w("claim --first 2", 1, func(r *Run) {
			r.AckResults("claim --first", r.At(Now).ClaimFirst(context.Background(), items(0, 0, 4, 5, 6), 2, "carol", TTL))
		}),
		w("renew-batch", 1, func(r *Run) {
			r.AckResults("renew-batch", r.At(Now).Renew(context.Background(), itemsTok(8, 1, 9, 1, 10, 1, 11, 1, 0, 2, 1, 1), TTL))
		}),
		w("renew-batch/4-writers", 4, func(r *Run) {
			r.AckResults("renew-batch", r.At(Now).Renew(context.Background(), itemsTok(8, 1, 9, 1, 10, 1, 11, 1, 0, 3), TTL))
		}),
		w("release", 1, func(r *Run) {
			r.AckResults("release", r.At(Now).Release(context.Background(), itemsTok(8, 1, 9, 1, 0, 1)))
		}),
		w("complete", 1, func(r *Run) {
			r.AckResults("complete", r.At(Now).Complete(context.Background(), itemsTok(8, 1, 10, 1, 1, 1)))
		}),
		w("complete --publish", 1, func(r *Run) {
			publishRun(r, "complete --publish", commit.Item{ID: TestID(0), Token: 3}, "result.bin")
		}),
		w("claim/32", 1, func(r *Run) {
			r.AckResults("claim", r.At(Now).Claim(context.Background(), span(44, 76, 0), "carol", TTL))
		}),
		w("renew-batch/32", 1, func(r *Run) {
			r.AckResults("renew-batch", r.At(Now).Renew(context.Background(), span(12, 44, 1), TTL))
		}),
		w("renew-batch/32/8-writers", 8, func(r *Run) {
			r.AckResults("renew-batch", r.At(Now).Renew(context.Background(), span(12, 44, 1), TTL))
		}),
		w("release/16", 1, func(r *Run) {
			r.AckResults("release", r.At(Now).Release(context.Background(), span(12, 28, 1)))
		}),
		w("complete/16", 1, func(r *Run) {
			r.AckResults("complete", r.At(Now).Complete(context.Background(), span(28, 44, 1)))
		}),
		w("claim+renew+complete --publish", 1, func(r *Run) {
			res := r.At(Now).Claim(context.Background(), items(0, 4), "dave", TTL)
			r.AckResults("claim", res)
			if res[0].Outcome != commit.OK {
				return // a script stops at the first failure
			}
			rn := r.At(Now+10).Renew(context.Background(), []commit.Item{{ID: TestID(4), Token: res[0].Token}}, TTL)
			r.AckResults("renew-batch", rn)
			if rn[0].Outcome != commit.OK {
				return
			}
			publishRun(r, "complete --publish", commit.Item{ID: TestID(4), Token: res[0].Token}, "other.bin")
		}),
	}
	scs = append(scs, syncfsVariants(scs, "renew-batch", "renew-batch/32/8-writers", "claim/32", "claim+renew+complete --publish")...)
	// The pipelined chunks of the two-pass order: 32 records in chunks of
	// 8, so a chunk's renames overlap the next chunk's temp files.
	for _, c := range syncfsVariants(scs, "renew-batch/32/8-writers", "claim/32") {
		c.Name, c.SyncfsChunk = strings.TrimSuffix(c.Name, "/syncfs")+"/syncfs-chunks-of-8", 8
		scs = append(scs, c)
	}
	return scs
}

// syncfsVariants copies the named scenarios of scs to run under sync =
// syncfs (issue 41), named NAME/syncfs.
func syncfsVariants(scs []*Scenario, names ...string) []*Scenario {
	var out []*Scenario
	for _, name := range names {
		for _, sc := range scs {
			if sc.Name == name {
				c := *sc
				c.Name, c.Syncfs = name+"/syncfs", true
				out = append(out, &c)
			}
		}
	}
	if len(out) != len(names) {
		panic("syncfsVariants: a name is not a scenario")
	}
	return out
}
