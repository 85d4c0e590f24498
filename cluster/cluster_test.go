package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/mpi"
	"github.com/leasetool/lease/mpi/mpitest"
)

func testID(i int) leasefmt.ID {
	s := sha256.Sum256([]byte(fmt.Sprintf("cluster-%d", i)))
	return leasefmt.ID(hex.EncodeToString(s[:]))
}

// table makes a table of 8 work shards and returns a function that opens
// it (a fresh store per call, as each rank has its own).
func table(t *testing.T) (string, func() (*commit.Store, error)) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "table")
	if err := durable.MkdirRoot(root); err != nil {
		t.Fatal(err)
	}
	open := func(create bool) (*commit.Store, error) {
		var tmpl *leasefmt.Table
		if create {
			tmpl = &leasefmt.Table{WorkShards: 8, TargetShards: 4, CreatedAt: 1}
		}
		return commit.Open(root, commit.Options{Create: tmpl, Clock: func() float64 { return 1000 }})
	}
	st, err := open(true)
	if err != nil {
		t.Fatal(err)
	}
	closeStore(st)
	return root, func() (*commit.Store, error) { return open(false) }
}

func items(n int, tok int64) []commit.Item {
	out := make([]commit.Item, n)
	for i := range out {
		out[i] = commit.Item{ID: testID(i), Token: tok}
	}
	return out
}

// onRanks runs f on every rank of an in-process job of n ranks.
func onRanks(t *testing.T, n int, f func(w *mpi.World) error) []error {
	t.Helper()
	ws, _ := mpitest.Worlds(n, 20*time.Second)
	return mpitest.Run(ws, f)
}

// TestBatchAcrossRanks: a claim and a renewal of 40 items over 3 ranks.
// Each rank writes only its shards; rank 0 gets every result in input
// order; the statistics are summed.
func TestBatchAcrossRanks(t *testing.T) {
	_, open := table(t)
	in := items(40, 0)
	var mu sync.Mutex
	ran := map[int][]leasefmt.ID{}
	var merged []commit.Result
	var stats commit.Snapshot
	errs := onRanks(t, 3, func(w *mpi.World) error {
		s, err := Open(w, open, nil)
		if err != nil {
			return err
		}
		res, err := s.Batch(context.Background(), Batch{Kind: leasefmt.Work, Spread: true, Run: func(ctx context.Context, mine []commit.Item) []commit.Result {
			mu.Lock()
			for _, it := range mine {
				ran[w.Rank()] = append(ran[w.Rank()], it.ID)
			}
			mu.Unlock()
			return s.Store.Claim(ctx, mine, "r", 60)
		}}, in)
		if err != nil {
			return err
		}
		if w.Rank() == 0 {
			merged, stats = res, s.Stats(time.Second)
		} else if res != nil {
			return fmt.Errorf("rank %d got results", w.Rank())
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(merged) != len(in) {
		t.Fatalf("%d results, want %d", len(merged), len(in))
	}
	for i, r := range merged {
		if r.ID != in[i].ID || r.Outcome != commit.OK || r.Token != 1 || r.Record == nil || r.Record.ExpiresAt != 1060 {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	for rank, ids := range ran {
		for _, id := range ids {
			if id.Shard(8)%3 != rank {
				t.Errorf("rank %d ran %s of shard %d", rank, id.Short(), id.Shard(8))
			}
		}
	}
	if len(ran) != 3 || stats.Renewals != 40 || stats.Ranks != 3 || stats.Batches != 3 {
		t.Errorf("ranks that ran: %d; stats %+v", len(ran), stats)
	}
}

// TestBatchIOErrorFailsAll: G6 across ranks. Rank 1 meets an I/O error;
// the items the other ranks renewed are not reported as renewed, and
// every result names rank 1's cause.
func TestBatchIOErrorFailsAll(t *testing.T) {
	_, open := table(t)
	in := items(30, 0)
	var merged []commit.Result
	errs := onRanks(t, 3, func(w *mpi.World) error {
		s, err := Open(w, open, nil)
		if err != nil {
			return err
		}
		res, err := s.Batch(context.Background(), Batch{Kind: leasefmt.Work, Spread: true, Run: func(ctx context.Context, mine []commit.Item) []commit.Result {
			res := s.Store.Claim(ctx, mine, "r", 60)
			if w.Rank() == 1 {
				res[0] = commit.Result{Item: mine[0], Outcome: commit.IOError, Detail: "injected", Cause: commit.ErrIO}
			}
			return res
		}}, in)
		if w.Rank() == 0 {
			merged = res
		}
		return err
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, r := range merged {
		if r.Outcome != commit.IOError {
			t.Errorf("result %d is %s, want io-error: one rank's I/O error fails the batch", i, r.Outcome.Reason())
		}
		if r.Detail != "injected" && (!errors.Is(r.Cause, commit.ErrBatchFailed) || !strings.Contains(r.Detail, "rank 1 of 3")) {
			t.Errorf("result %d does not name rank 1's error: %s (%v)", i, r.Detail, r.Cause)
		}
	}
}

// TestBatchFirst: not spread, rank 0 runs a prefix of the input (claim
// --first) and the results are those it tried.
func TestBatchFirst(t *testing.T) {
	_, open := table(t)
	in := items(10, 0)
	var merged []commit.Result
	errs := onRanks(t, 2, func(w *mpi.World) error {
		s, err := Open(w, open, nil)
		if err != nil {
			return err
		}
		res, err := s.Batch(context.Background(), Batch{Kind: leasefmt.Work, Run: func(ctx context.Context, mine []commit.Item) []commit.Result {
			if w.Rank() != 0 {
				return nil
			}
			return s.Store.ClaimFirst(ctx, mine, 3, "r", 60)
		}}, in)
		if w.Rank() == 0 {
			merged = res
		}
		return err
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(merged) != 3 || merged[0].ID != in[0].ID || merged[2].ID != in[2].ID {
		t.Fatalf("claim --first 3 across 2 ranks: %d results %+v", len(merged), merged)
	}
}

// TestOpenSameTable: a rank that opened another table fails every rank
// with one error naming it (the check watch rounds lacked before).
func TestOpenSameTable(t *testing.T) {
	_, open := table(t)
	_, other := table(t)
	errs := onRanks(t, 3, func(w *mpi.World) error {
		o := open
		if w.Rank() == 2 {
			o = other
		}
		_, err := Open(w, o, func(error) int { return 2 })
		return err
	})
	for r, err := range errs {
		var e *Error
		if !errors.As(err, &e) || e.Rank != 2 || e.Code != 2 || !strings.Contains(err.Error(), "every rank must see the same table") {
			t.Errorf("rank %d: %v; want the agreed error naming rank 2", r, err)
		}
	}
}

// TestAgree: one rank's error is every rank's, with its code.
func TestAgree(t *testing.T) {
	errs := onRanks(t, 4, func(w *mpi.World) error {
		var err error
		if w.Rank() == 3 {
			err = errors.New("no lease table at /x")
		}
		return Agree(w, err, func(error) int { return 2 })
	})
	for r, err := range errs {
		var e *Error
		if !errors.As(err, &e) || e.Rank != 3 || e.Code != 2 || err.Error() != `rank 3 of 4 (host "rank3"): no lease table at /x` {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if errs := onRanks(t, 2, func(w *mpi.World) error { return Agree(w, nil, nil) }); errors.Join(errs...) != nil {
		t.Errorf("agreeing on no error: %v", errs)
	}
}

// TestMergeRefusesBadResults: a rank that reports an item out of range or
// twice is a protocol error, not silently skipped or overwritten (the
// watch rounds did both before).
func TestMergeRefusesBadResults(t *testing.T) {
	plan := items(3, 1)
	part := func(is ...int) []byte {
		var wr wireRank
		for _, i := range is {
			wr.Results = append(wr.Results, wireResult{I: i, O: commit.OK, T: 1})
		}
		b, _ := json.Marshal(wr)
		return b
	}
	for name, parts := range map[string][][]byte{
		"out of range": {part(0, 1), part(2, 3)},
		"negative":     {part(-1), part(0, 1, 2)},
		"twice":        {part(0, 1), part(1, 2)},
		"malformed":    {part(0, 1, 2), []byte("{")},
	} {
		if _, _, err := merge(plan, parts, Batch{Kind: leasefmt.Work, Spread: true}, 2); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", name, err)
		}
	}
	res, _, err := merge(plan, [][]byte{part(0, 2), part(1)}, Batch{Kind: leasefmt.Work, Spread: true}, 2)
	if err != nil || len(res) != 3 || res[1].Outcome != commit.OK {
		t.Errorf("a good merge: %v %+v", err, res)
	}
	res, _, err = merge(plan, [][]byte{part(0), part(1)}, Batch{Kind: leasefmt.Work, Spread: true}, 2)
	if err != nil || res[2].Outcome != commit.IOError || res[0].Outcome != commit.IOError {
		t.Errorf("an item no rank reported fails the batch: %v %+v", err, res)
	}
}
