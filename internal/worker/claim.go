package worker

import (
	"context"
	"math/rand/v2"
	"os"
	"time"

	"github.com/leasetool/lease/commit"
)

// Claimed is what ClaimNext got: the last try's answer and results, and
// the counts of every try.
type Claimed struct {
	commit.Next
	// Started is when the last try began: a lease it granted counts as
	// lost from there (its expires_at - clock_skew), not from before the
	// wait.
	Started time.Time
	// Tries counts the tries; Read, Shards and Cleaned sum theirs.
	Tries, Read, Shards, Cleaned int
	// Waited is the time from the first try to the end of the last.
	Waited time.Duration
}

// NewRand is the random source of one worker's claims: seeded by time and
// process, so that workers starting together visit the queue's shards in
// different orders.
func NewRand() *rand.Rand {
	return rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
}

// ClaimNext claims up to n free items of st's queue for owner, for ttl
// seconds. With wait, a busy queue (items left, all held) is tried again
// with backoff, woken when the first held item can be taken over, until
// an item is granted, the queue is empty, the deadline (zero: none)
// passes or ctx is done; the last try's answer is then Busy. Where the
// table's filesystem delivers inotify, the wait also ends when an item is
// let go (Backoff.Watch). With an
// outage o, a try blocked for the machine's sake (OutageOf: a full or
// read-only filesystem, an I/O error, ESTALE) is waited out with o, until
// the table takes a write again or o gives up (the answer is then
// Blocked). With o.Room set, a filesystem with no room (NoRoom) is such
// an outage too, met before any try.
func ClaimNext(ctx context.Context, st *commit.Store, rnd *rand.Rand, n int, owner string, ttl float64, wait bool, deadline time.Time, o *Outage) Claimed {
	return ClaimNextEach(ctx, st, rnd, n, owner, ttl, wait, deadline, 0, nil, o)
}

// ClaimNextEach is ClaimNext handing the items granted to each, at most
// chunk at a time, as commit.Store.ClaimNextEach does. A try that grants
// anything is the last, so each sees the grants of one try only.
func ClaimNextEach(ctx context.Context, st *commit.Store, rnd *rand.Rand, n int, owner string, ttl float64, wait bool, deadline time.Time,
	chunk int, each func(granted []commit.Result) bool, o *Outage) Claimed {
	var out Claimed
	var b *Backoff
	start := time.Now()
	for {
		if o != nil && o.Room != "" {
			if err := NoRoom(o.Room); err != nil {
				if o.Wait(ctx, err) {
					continue
				}
				// Given up (max_wait, a stop): blocked, as the claim the
				// full filesystem would have refused.
				out.Next = commit.Next{Answer: commit.Blocked, Results: []commit.Result{{Outcome: commit.IOError, Detail: err.Error(), Path: o.Room, Cause: err}}}
				break
			}
		}
		out.Started = time.Now()
		nx := st.ClaimNextEach(ctx, n, owner, ttl, rnd, chunk, each)
		out.Next = nx
		out.Tries++
		out.Cleaned += nx.Cleaned
		out.Read += nx.Read
		out.Shards += nx.Shards
		if cause := OutageOf(nx); cause != nil && o != nil {
			if o.Wait(ctx, cause) {
				continue
			}
			break
		}
		if o != nil {
			o.Over()
		}
		if nx.Answer != commit.Busy || !wait {
			break
		}
		if b == nil {
			b = NewBackoff(ctx, deadline)
			defer b.Close()
			if b.Watch(st) {
				continue // a release before the watch was made is not announced
			}
		}
		if !b.Wait(nx.Expiring) {
			break
		}
	}
	out.Waited = time.Since(start)
	return out
}
