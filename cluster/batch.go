package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// Batch is one batch run across the ranks of a session.
type Batch struct {
	// Kind is the kind of the items' records (for the shard of an item).
	Kind leasefmt.Kind
	// Spread: rank r runs the items of the shards s with s % size == r;
	// otherwise rank 0 runs them all (claim --first, whose items depend on
	// each other), and the results are those of the items it tried.
	Spread bool
	// Records: send each result's record to rank 0 in full (--json);
	// otherwise a result's Record holds only its kind, ID, status, token
	// and expires_at.
	Records bool
	// Run runs this rank's items, in the order given, with the context of
	// Session.Batch.
	Run func(ctx context.Context, items []commit.Item) []commit.Result
}

// wire forms of what a batch exchanges.
type wireResult struct {
	I int            `json:"i"`
	O commit.Outcome `json:"o"`
	T int64          `json:"t,omitempty"`
	D string         `json:"d,omitempty"`
	P string         `json:"p"`
	L int64          `json:"l,omitempty"`
	R string         `json:"r,omitempty"` // the record, with Records
	S string         `json:"s,omitempty"` // status, without Records
	E float64        `json:"e,omitempty"` // expires_at, without Records
	// C is the cause kind: "" none or an error of the item's own, "n" not
	// attempted, "b" batch failed (see commit.Result.Derived).
	C string `json:"c,omitempty"`
	// F: the cause is a full filesystem (ENOSPC), which rank 0's report
	// says once for every record it failed.
	F bool `json:"f,omitempty"`
}

type wireRank struct {
	Results []wireResult    `json:"results"`
	Stats   commit.Snapshot `json:"stats"`
	Lat     []float64       `json:"lat"`
	// CollS is the time this rank spent in collectives before the gather
	// of the results completed.
	CollS float64 `json:"coll_s"`
	Host  string  `json:"host"`
	Err   string  `json:"err,omitempty"` // the batch could not be decoded
}

// Batch runs b over items (rank 0's; ignored on the other ranks) and
// returns, on rank 0, the results in input order (nil on the other ranks).
// An I/O error of any rank fails the whole batch (G6 across ranks, by the
// engine's rule commit.FailBatch): every result reported OK becomes an I/O
// error whose cause wraps commit.ErrBatchFailed and names the rank and its
// error. An error is
// returned only when a collective failed or a rank sent a malformed
// message; every rank returns the same one. ctx bounds the waits of this
// rank's engine calls (b.Run); the collectives are bounded by the world's
// own timeout (mpi_timeout), which no context can shorten.
func (s *Session) Batch(ctx context.Context, b Batch, items []commit.Item) ([]commit.Result, error) {
	w := s.w
	payload, _ := json.Marshal(items)
	if err := s.coll.time(func() (err error) { payload, err = w.Bcast(0, payload); return err }); err != nil {
		return nil, err
	}
	// A rank that cannot decode the batch says so in its part of the
	// gather, so that nobody waits for it.
	var plan []commit.Item
	out := wireRank{Host: w.Host()}
	if err := json.Unmarshal(payload, &plan); err != nil {
		out.Err = fmt.Sprintf("a batch of %d bytes: %v", len(payload), err)
		plan = nil
	}
	n := s.Store.Table().Shards(b.Kind)
	var mine []commit.Item
	var index []int
	for i, it := range plan {
		if b.Spread && it.ID.Shard(n)%w.Size() == w.Rank() || !b.Spread && w.Rank() == 0 {
			mine = append(mine, it)
			index = append(index, i)
		}
	}
	var res []commit.Result
	if len(mine) > 0 {
		res = b.Run(ctx, mine)
	}
	out.CollS = s.coll.d.Seconds()
	for j, r := range res {
		if j >= len(index) {
			break
		}
		out.Results = append(out.Results, toWire(index[j], r, b.Records))
	}
	snap := s.Store.Stats().Snapshot(0)
	out.Stats, out.Lat = snap, snap.Latencies
	data, _ := json.Marshal(out)
	var parts [][]byte
	if err := s.coll.time(func() (err error) { parts, err = w.Gather(0, data); return err }); err != nil {
		return nil, err
	}
	var merged []commit.Result
	var mergeErr error
	if w.Rank() == 0 {
		merged, s.last, mergeErr = merge(plan, parts, b, w.Size())
		s.round = s.last.round(s.prev)
		s.prev = s.last.perRank
	}
	if err := Agree(w, mergeErr, nil); err != nil {
		return nil, err
	}
	return merged, nil
}

func toWire(i int, r commit.Result, records bool) wireResult {
	x := wireResult{I: i, O: r.Outcome, T: r.Token, D: r.Detail, P: r.Path, L: int64(r.Latency)}
	switch {
	case errors.Is(r.Cause, commit.ErrNotAttempted):
		x.C = "n"
	case errors.Is(r.Cause, commit.ErrBatchFailed):
		x.C = "b"
	}
	x.F = errors.Is(r.Cause, unix.ENOSPC)
	if r.Record != nil {
		if records {
			if data, err := leasefmt.Encode(r.Record); err == nil {
				x.R = string(data)
			}
		} else {
			x.S, x.E = string(r.Record.Status), r.Record.ExpiresAt
		}
	}
	return x
}

// merge is rank 0's part: it puts the gathered results back in input
// order, refusing results out of range or reported twice, and applies G6
// across ranks. It also returns the ranks' statistics, summed.
func merge(plan []commit.Item, parts [][]byte, b Batch, size int) ([]commit.Result, rankStats, error) {
	merged := make([]commit.Result, len(plan))
	filled := make([]bool, len(plan))
	from := make([]int, len(plan))
	var st rankStats
	hosts := make([]string, len(parts))
	for r, p := range parts {
		var wr wireRank
		if err := json.Unmarshal(p, &wr); err != nil {
			return nil, st, fmt.Errorf("%w: rank %d sent results of %d bytes: %v", ErrProtocol, r, len(p), err)
		}
		if wr.Err != "" {
			return nil, st, fmt.Errorf("%w: rank %d could not decode %s", ErrProtocol, r, wr.Err)
		}
		hosts[r] = wr.Host
		st.add(r, wr)
		for _, x := range wr.Results {
			if x.I < 0 || x.I >= len(plan) || filled[x.I] {
				return nil, st, fmt.Errorf("%w: rank %d reported item %d, which is out of range (%d items) or was reported already", ErrProtocol, r, x.I, len(plan))
			}
			merged[x.I], filled[x.I], from[x.I] = fromWire(plan[x.I], x, b.Kind), true, r
		}
	}
	// G6 across ranks: the cause named is the first error a rank met
	// itself, not one of the items its batch then gave up.
	var cause error
	for pass := 0; pass < 2 && cause == nil; pass++ {
		for i := range merged {
			r := merged[i]
			if filled[i] && r.Outcome == commit.IOError && (pass == 1 || !r.Derived()) {
				cause = &Error{Rank: from[i], Size: size, Host: hosts[from[i]], Msg: r.Detail}
				break
			}
		}
	}
	for i := range merged {
		if !filled[i] && b.Spread {
			merged[i] = commit.Result{Item: plan[i], Outcome: commit.IOError, Detail: "no rank reported this item", Cause: commit.ErrIO}
			filled[i] = true
			if cause == nil {
				cause = errors.New("no rank reported an item")
			}
		}
	}
	if !b.Spread { // rank 0 ran a prefix of the input
		kept := merged[:0]
		for i := range merged {
			if filled[i] {
				kept = append(kept, merged[i])
			}
		}
		merged = kept
	}
	if cause != nil {
		// G6 is the engine's rule (commit.FailBatch), here over the results
		// of every rank; no result is a rank's own failure.
		commit.FailBatch(merged, cause, -1, leasefmt.Bound("batch failed, not renewed: "+cause.Error()))
	}
	return merged, st, nil
}

func fromWire(it commit.Item, x wireResult, k leasefmt.Kind) commit.Result {
	r := commit.Result{Item: it, Outcome: x.O, Token: x.T, Detail: x.D, Path: x.P, Latency: time.Duration(x.L)}
	switch x.C {
	case "n":
		r.Cause = commit.ErrNotAttempted
	case "b":
		r.Cause = commit.ErrBatchFailed
	default:
		r.Cause = x.O.Err()
	}
	if x.F {
		if r.Cause == nil {
			r.Cause = unix.ENOSPC
		} else {
			r.Cause = fmt.Errorf("%w: %w", r.Cause, unix.ENOSPC)
		}
	}
	switch {
	case x.R != "":
		r.Record, _ = leasefmt.Decode([]byte(x.R), k, it.ID)
	case x.S != "":
		r.Record = &leasefmt.Record{Kind: k, ID: it.ID, Status: leasefmt.Status(x.S), Token: x.T, ExpiresAt: x.E}
	}
	return r
}

// rankStats are the statistics of every rank at the last batch.
type rankStats struct {
	total commit.Snapshot
	// collS is the least time any rank spent in collectives: the cost of
	// the collectives themselves, without the time a rank waited for
	// slower peers to finish their shards.
	collS float64
	ranks int
	// perRank is every rank's collective time so far, in rank order.
	perRank []float64
}

// round returns the least time any rank spent in collectives since the
// batch whose perRank was prev (nil: since the session began).
func (s *rankStats) round(prev []float64) time.Duration {
	least := -1.0
	for r, c := range s.perRank {
		if r < len(prev) {
			c -= prev[r]
		}
		if least < 0 || c < least {
			least = c
		}
	}
	return time.Duration(max(least, 0) * float64(time.Second))
}

func (s *rankStats) add(r int, wr wireRank) {
	wr.Stats.Latencies = wr.Lat
	if r == 0 {
		s.total, s.collS = wr.Stats, wr.CollS
	} else {
		s.total.Add(wr.Stats)
		s.collS = min(s.collS, wr.CollS)
	}
	s.ranks++
	s.perRank = append(s.perRank, wr.CollS)
}

// RoundCollectives returns, on rank 0, the cost of the collectives of the
// last batch: the least time any rank spent in collectives since the
// batch before (a rank that waited for a slower peer spent more; the
// least is what the collectives themselves took). Other ranks get 0.
func (s *Session) RoundCollectives() time.Duration { return s.round }

// Stats returns, on rank 0, the statistics of every rank summed as of the
// last batch (each rank's store counts across batches), with the number of
// ranks and the collective time, over duration d. Other ranks get their own.
func (s *Session) Stats(d time.Duration) commit.Snapshot {
	if s.w.Rank() != 0 || s.last.ranks == 0 {
		return s.Store.Stats().Snapshot(d)
	}
	total := s.last.total
	total.DurationS = d.Seconds()
	total.Ranks = s.w.Size()
	total.CollectiveS = s.last.collS
	return total
}
