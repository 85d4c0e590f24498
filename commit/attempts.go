package commit

// Attempts and the failed state (docs/lease-format.md): a release after a
// failed run counts an attempt in the record, with the run's exit status
// and the end of its standard error; at max_attempts the record becomes
// failed, terminal like done (claims refuse it), and its queue entry is
// removed. RetryFailed puts a failed item back: released, attempts reset, its
// queue entry made again, durably.
//
// A failed item's queue entry is only ever removed under the record's
// lock, after the record was read there and found failed, and RetryFailed makes
// the entry under the same lock before it writes the record released: so
// an entry removed for a failed record can never be the entry of an item
// that RetryFailed put back, however the two interleave.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/leasefmt"
)

// Failure is what is known of a run that ended in failure.
type Failure struct {
	// ExitStatus is the run's exit status, 1 to 255 (128+n for a command
	// killed by signal n); 0 when not known.
	ExitStatus int
	// Stderr is the end of what the run wrote to its standard error, any
	// bytes; the record keeps leasefmt.Tail of it.
	Stderr []byte
}

// FailDecision releases a current live lease after a failed run: the
// record becomes released, now, with one more attempt and the run's exit
// status and stderr tail; once attempts reaches maxAttempts (0: no limit)
// it becomes failed instead.
func FailDecision(f Failure, maxAttempts int, skew float64) Decide {
	tail := leasefmt.Tail(f.Stderr)
	exit := f.ExitStatus
	if exit < 0 || exit > leasefmt.MaxExitStatus {
		exit = 0
	}
	return func(it Item, cur *leasefmt.Record, now float64) (*leasefmt.Record, Outcome, string) {
		if out, d := fenced(it, cur, now, skew); out != OK {
			return nil, out, d
		}
		next := released(cur, now)
		next.Attempts = min(cur.Attempts+1, leasefmt.MaxToken)
		next.ExitStatus, next.StderrTail = exit, tail
		if maxAttempts > 0 && next.Attempts >= int64(maxAttempts) {
			next.Status = leasefmt.Failed
		}
		leasefmt.FitTail(next) // else the write refuses the record as too large
		return next, OK, ""
	}
}

// failedDetail says why a failed record refuses a claim.
func failedDetail(r *leasefmt.Record) string {
	d := fmt.Sprintf("work failed after %d attempts (token %d", r.Attempts, r.Token)
	if r.ExitStatus > 0 {
		d += fmt.Sprintf(", last exit status %d", r.ExitStatus)
	}
	return d + "); lease retry puts it back"
}

// ReleaseFailed releases items after a failed run (lease release --failed,
// lease run --complete when its command fails), counting an attempt each:
// fenced as Release is, and an item whose attempts reach maxAttempts (0:
// no limit) becomes failed, its queue entry removed once the record is
// durably failed.
func (s *Store) ReleaseFailed(ctx context.Context, items []Item, f Failure, maxAttempts int) []Result {
	res := s.ReleaseFailedRecords(ctx, items, f, maxAttempts)
	s.UnqueueFailed(ctx, res)
	return res
}

// ReleaseFailedRecords is ReleaseFailed without the removal of the queue
// entries: the records only (call UnqueueFailed with its results after).
func (s *Store) ReleaseFailedRecords(ctx context.Context, items []Item, f Failure, maxAttempts int) []Result {
	return s.apply(ctx, leasefmt.Work, items, FailDecision(f, maxAttempts, s.skew), s.settleOwn)
}

// UnqueueFailed removes the queue entries of the items res reports failed,
// each under its record's lock: best effort, whose failure changes no
// result (an entry left is removed by the next claim or lease fsck).
func (s *Store) UnqueueFailed(ctx context.Context, res []Result) {
	for _, r := range res {
		if r.Outcome == OK && r.Record != nil && r.Record.Status == leasefmt.Failed {
			s.unqueueFailed(ctx, s.QueuePath(r.ID), r.ID)
		}
	}
}

// unqueueFailed removes the queue entry at name of id if, read under its
// lock, the record is failed; best effort, as dequeue is (an entry left is
// removed by the next claim that meets it, or by lease fsck).
func (s *Store) unqueueFailed(ctx context.Context, name string, id leasefmt.ID) bool {
	unlock, err := s.Lock(ctx, leasefmt.Work, id)
	if err != nil {
		return false
	}
	defer unlock()
	cur, err := s.Read(ctx, leasefmt.Work, id)
	if err != nil || cur == nil || cur.Status != leasefmt.Failed {
		return false
	}
	s.finishLeft(cur)
	if err := s.fs.Remove(name); err != nil {
		return false
	}
	s.stats.Dequeued.Add(1)
	return true
}

// RetryFailed puts failed items back (lease retry; tokens ignored): under each
// record's lock, the queue entry is made and its directory fsynced, then
// the record is written released with its attempts, exit status and stderr
// tail cleared, keeping its token (the next claim gets a larger one). An
// item that is not failed is refused with the reason of its status (done,
// held, released; missing without a record) and nothing is written.
func (s *Store) RetryFailed(ctx context.Context, items []Item) []Result {
	s.stats.Batches.Add(1)
	res := make([]Result, len(items))
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	var mu sync.Mutex
	var stop error
	s.parallel(order, func(i int) {
		r := &res[i]
		r.Item, r.Path = items[i], s.Abs(s.RecordPath(leasefmt.Work, items[i].ID))
		defer s.stats.Attempted.Add(1)
		mu.Lock()
		failed := stop
		mu.Unlock()
		if failed != nil {
			r.Outcome, r.Detail, r.Cause = IOError, "not attempted: "+durable.Describe(failed), fmt.Errorf("%w: %w", ErrNotAttempted, failed)
			s.count(IOError)
			return
		}
		if err := s.retryOne(ctx, r); err != nil {
			mu.Lock()
			if stop == nil {
				stop = err
			}
			mu.Unlock()
		}
		s.count(r.Outcome)
	})
	return res
}

// retryOne retries one item; an error is an I/O error that stops the batch.
func (s *Store) retryOne(ctx context.Context, r *Result) error {
	unlock, err := s.Lock(ctx, leasefmt.Work, r.ID)
	if err != nil {
		return s.lockFailed(err, r, "lock the record")
	}
	defer unlock()
	cur, err := s.Read(ctx, leasefmt.Work, r.ID)
	if err != nil {
		return s.readFailed(err, r)
	}
	now := s.now()
	r.Record = cur
	switch {
	case cur == nil:
		r.Outcome, r.Detail = Missing, "no record"
		return nil
	case cur.Status == leasefmt.Done:
		r.Outcome, r.Token, r.Detail = Done, cur.Token, fmt.Sprintf("work is done (token %d)", cur.Token)
		return nil
	case cur.Status != leasefmt.Failed && Taken(cur, now, s.skew):
		r.Outcome, r.Token, r.Detail = Held, cur.Token, "not failed: "+heldDetail(cur, now)
		return nil
	case cur.Status != leasefmt.Failed:
		r.Outcome, r.Token, r.Detail = Released, cur.Token, fmt.Sprintf("not failed: the item is %s and claimable (token %d)", cur.Status, cur.Token)
		return nil
	}
	r.Token = cur.Token
	entry := s.QueuePath(r.ID)
	dir := s.QueueShardDir(r.ID.Shard(s.hdr.WorkShards))
	if err := s.disk.EnsureDir(dir); err != nil {
		r.Outcome, r.Cause = IOError, &durable.OpError{Op: "make the queue shard directory", Path: s.Abs(dir), Err: err}
		r.Detail = durable.Describe(r.Cause)
		return r.Cause
	}
	f, err := s.fs.CreateExcl(entry)
	switch {
	case errors.Is(err, fs.ErrExist):
	case err != nil:
		r.Outcome, r.Cause = IOError, &durable.OpError{Op: "create the queue entry", Path: s.Abs(entry), Err: err}
		r.Detail = durable.Describe(r.Cause)
		return r.Cause
	default:
		if err := f.Close(); err != nil {
			r.Outcome, r.Cause = IOError, &durable.OpError{Op: "close the queue entry", Path: s.Abs(entry), Err: err}
			r.Detail = durable.Describe(r.Cause)
			return r.Cause
		}
	}
	// The entry is durable before the record says released: a crash in
	// between leaves a failed item with an entry, which the next claim
	// or lease fsck removes, never a released item that no claim finds.
	if err := s.fs.SyncDir(dir); err != nil {
		r.Outcome, r.Cause = IOError, &durable.OpError{Op: "fsync the queue shard directory", Path: s.Abs(dir), Err: err}
		r.Detail = durable.Describe(r.Cause)
		return r.Cause
	}
	s.stats.DirectorySyncs.Add(1)
	next := released(cur, now)
	next.Attempts, next.ExitStatus, next.StderrTail = 0, 0, ""
	// The tally's link goes first, durably: a crash before the rewrite
	// leaves a failed record with a queue entry and no link, which the
	// summary counts from the record it reads (tally.go).
	s.untally(cur, s.syncNow)
	if err := s.WriteOne(next); err != nil {
		if errors.Is(err, leasefmt.ErrCorrupt) {
			r.Outcome, r.Detail, r.Cause = Corrupt, "cannot rewrite: "+err.Error(), err
			return nil
		}
		r.Outcome, r.Detail, r.Cause = IOError, durable.Describe(err), err
		return err
	}
	s.unmark(cur) // no longer this record's inode: only tidiness
	r.Outcome, r.Record, r.Detail = OK, next, ""
	return nil
}

// FailedIDs lists the IDs of the table's failed work records, sorted (lease
// retry --failed). Every work record is read, a shard at a time; a record
// that does not validate is passed over (lease fsck reports it), an I/O
// error stops the listing.
func (s *Store) FailedIDs(ctx context.Context) ([]leasefmt.ID, error) {
	var out []leasefmt.ID
	for sh := 0; sh < s.hdr.WorkShards; sh++ {
		var ids []leasefmt.ID
		err := s.ListNames(s.ShardDir(leasefmt.Work, sh), func(name string) {
			base, ok := strings.CutSuffix(name, ".json")
			if !ok {
				return
			}
			if id, err := leasefmt.ParseID(base); err == nil && id.Shard(s.hdr.WorkShards) == sh {
				ids = append(ids, id)
			}
		})
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			rec, err := s.Read(ctx, leasefmt.Work, id)
			switch {
			case errors.Is(err, leasefmt.ErrCorrupt):
			case err != nil:
				return nil, err
			case rec != nil && rec.Status == leasefmt.Failed:
				out = append(out, id)
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out, nil
}
