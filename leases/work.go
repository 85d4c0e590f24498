package leases

// Table.Work: the campaign worker of the command line's lease work, for a
// harness written in Go. The same rules (internal/worker: the claim of the
// queue, the finish of an item; keepalive: the keeping) so that Go workers
// and lease work workers can share one campaign.

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/config"
	"github.com/leasetool/lease/internal/worker"
	"github.com/leasetool/lease/keepalive"
	"github.com/leasetool/lease/leasefmt"
)

// Item is one item of the queue held while the function of Work runs.
type Item struct {
	Lease
	// Stage is the item's staging directory (stage/ID.TOKEN/): what the
	// function leaves there when it returns nil is published whole as
	// public/ID/, once, and the item is done only when that succeeded.
	Stage string
	// Input is the path of the item's stored content (AddContent,
	// AddFiles, lease add --content), "" when it has none.
	Input string
}

// WorkOptions are the settings of Work; the zero value is the command
// line's defaults.
type WorkOptions struct {
	// MaxItems stops Work after that many items (0: until the queue is
	// empty).
	MaxItems int
	// MaxAttempts is the number of failed runs after which an item is
	// failed (claims refuse it until lease retry puts it back): 0 is the
	// default, 3; less than 0 is no limit.
	MaxAttempts int
	// TTL is the duration of each lease (0: the table's WithTTL).
	TTL time.Duration
	// Interval is the time between renewals (0: max(0.1 s, min(30 s, TTL/3))).
	Interval time.Duration
	// Grace is how long before a lease that cannot be renewed counts as
	// lost the function's context is cancelled (0: 10 s, shortened to
	// fit the lease).
	Grace time.Duration
	// Done, when not nil, is called after each item, from Work's
	// goroutine.
	Done func(ItemResult)
	// MaxWait bounds the wait for a table that cannot be written (a full
	// or read-only filesystem, an I/O error, a stale NFS handle): Work
	// waits such an outage out, claiming nothing and keeping what it
	// holds, with backoff (1 s doubling to 30 s), and then goes on; past
	// MaxWait it ends with an error wrapping ErrIO. 0: no limit.
	MaxWait time.Duration
	// Waiting, when not nil, gets Work's messages of such a wait (one
	// when it begins, one a minute, one when it ends), and the line of a
	// failed run released with no attempt for want of room
	// (ItemResult.NoRoom), from Work's goroutine.
	Waiting func(msg string)
}

// ItemResult is how one item of Work went.
type ItemResult struct {
	Lease
	// Finish says how the item was finished: done, released (a failed
	// run, an attempt counted), failed (max_attempts reached),
	// publish-refused (its result could not be published: released, an
	// attempt counted, the staging directory kept), lost (the lease was
	// lost: no attempt), by-command-done or by-command-released (the
	// function finished the lease itself).
	Finish string
	// Err is what the function returned.
	Err error
	// Attempts is the item's count of failed runs after it.
	Attempts int64
	// Lost: the lease was lost while the function ran (its context was
	// cancelled with a cause wrapping ErrLost).
	Lost bool
	// NoRoom, when not nil, says why a failed run counted no attempt: the
	// function failed while the table's filesystem had no room (no free
	// inode, or less free than 1% of its size, at least 1 MiB, at most
	// 256 MiB): the machine's failure, not the item's; it was released.
	NoRoom error

	outage error // the table's error of an outage that kept fn from running
}

// WorkStats counts what Work did, by how each item was finished.
type WorkStats struct {
	Items    int
	Finishes map[string]int
}

// ExitStatus is implemented by errors that carry a command's exit status
// (*exec.ExitError does): Work records it in the item's record when the
// run fails.
type ExitStatus interface{ ExitCode() int }

// Work claims the next free item of the queue (waiting while every item
// left is held), calls fn with it while the lease is kept alive, and
// finishes the item when fn returns, again and again until the queue is
// empty, opts.MaxItems items were run, ctx is done or the table fails. It
// follows the rules of lease work (lease-work(1)):
//
//   - fn's context is cancelled when the lease is lost (renewals refused,
//     a release or revoke from outside, or no renewal before the stop
//     point), with a cause wrapping ErrLost, or when ctx is done; fn must
//     return then. Work waits for fn.
//   - fn returning nil publishes what it left in Item.Stage as public/ID/
//     and marks the item done; a result that cannot be published releases
//     it with an attempt counted (Finish publish-refused).
//   - fn returning an error, with its lease held and ctx not done, is a
//     failed run: released with an attempt counted, with the error's exit
//     status (ExitStatus; 128+n for an *exec.ExitError of a command killed
//     by signal n) and its text as the stderr tail; failed at MaxAttempts.
//   - A run whose lease was lost, or that ctx stopped, is released with no
//     attempt counted; so is a run that failed while the table's
//     filesystem had no room (ItemResult.NoRoom), and while it has none
//     Work claims nothing (waited out as an outage, bounded by MaxWait).
//
// The lease waited for counts from the claim that granted it. Work
// returns nil when the queue is empty or MaxItems items were run,
// ctx.Err() when ctx ended it (the item held was released), and an error
// wrapping ErrIO, ErrCorrupt or ErrLockTimeout when the table failed.
// Items that fail, are lost or cannot be published never end it.
func (t *Table) Work(ctx context.Context, fn func(context.Context, Item) error, opts WorkOptions) (WorkStats, error) {
	stats := WorkStats{Finishes: map[string]int{}}
	maxAttempts := opts.MaxAttempts
	switch {
	case maxAttempts == 0:
		maxAttempts = config.DefaultMaxAttempts
	case maxAttempts < 0:
		maxAttempts = 0
	}
	ttl := opts.TTL
	if ttl == 0 {
		ttl = t.ttl
	}
	skew := time.Duration(t.st.ClockSkew() * float64(time.Second))
	interval := opts.Interval
	if interval == 0 {
		interval = max(100*time.Millisecond, min(30*time.Second, ttl/3))
	}
	if interval >= ttl-skew {
		return stats, fmt.Errorf("work: renewal interval %v must be less than ttl %v - clock skew %v", interval, ttl, skew)
	}
	grace := opts.Grace
	if grace == 0 {
		grace = time.Duration(config.DefaultGrace * float64(time.Second))
	}
	cfg := keepalive.Config{Interval: interval, LockTimeout: t.st.LockTimeout(), ClockSkew: skew, Grace: grace}
	kst := t.st // the keeper bounds its renewals' lock waits through their contexts
	rnd := worker.NewRand()
	// No claim while the table's filesystem has no room (worker.NoRoom).
	out := &worker.Outage{MaxWait: opts.MaxWait, Say: opts.Waiting, Room: t.st.Root()}
	for opts.MaxItems == 0 || stats.Items < opts.MaxItems {
		if err := ctx.Err(); err != nil {
			return stats, err
		}
		cl := worker.ClaimNext(ctx, t.st, rnd, 1, t.owner, ttl.Seconds(), true, time.Time{}, out)
		if worker.OutageOf(cl.Next) != nil && ctx.Err() != nil {
			return stats, ctx.Err()
		}
		if cl.Answer == commit.Empty {
			return stats, nil
		}
		if cl.Answer == commit.Busy {
			return stats, ctx.Err() // only ctx ends the wait
		}
		l, err := nextLease(cl)
		if err != nil {
			return stats, err
		}
		var granted commit.Result
		for _, r := range cl.Results {
			if r.Outcome == commit.OK {
				granted = r
				break
			}
		}
		it := commit.Item{ID: granted.ID, Token: granted.Token}
		if ctx.Err() != nil {
			worker.Finish(t.st, it, worker.End{Complete: true}, maxAttempts)
			return stats, ctx.Err()
		}
		res, err := t.workOne(ctx, kst, cfg, fn, granted, cl.Started, maxAttempts, out)
		stats.Items++
		res.Lease = l
		stats.Finishes[res.Finish]++
		if opts.Done != nil {
			opts.Done(res)
		}
		if err != nil && res.outage != nil {
			// The table could not be written for the item's staging
			// directory or input: released (or left to run out); the next
			// claim waits the outage out.
			if !out.Wait(ctx, res.outage) {
				if ctx.Err() != nil {
					return stats, ctx.Err()
				}
				return stats, err
			}
			continue
		}
		if err != nil && errors.Is(err, commit.ErrStageTaken) {
			// Another account took the staging directory's name: the
			// lease was released with no attempt; go on.
			continue
		}
		if err != nil {
			return stats, err
		}
	}
	return stats, nil
}

// workOne runs fn for the item a claim granted (its try begun at start)
// and finishes it; the error is a table error that ends Work.
func (t *Table) workOne(ctx context.Context, kst *commit.Store, cfg keepalive.Config, fn func(context.Context, Item) error,
	granted commit.Result, start time.Time, maxAttempts int, out *worker.Outage) (ItemResult, error) {
	it := commit.Item{ID: granted.ID, Token: granted.Token}
	stage, err := t.st.MakeStage(it.ID, it.Token)
	if err != nil {
		worker.Finish(t.st, it, worker.End{Complete: true}, maxAttempts)
		return ItemResult{Finish: commit.IOError.Reason(), outage: outageErr(err)}, fmt.Errorf("%w: staging directory of %s token %d: %w", ErrIO, it.ID, it.Token, err)
	}
	item := Item{Stage: stage}
	item.ID, item.Token = string(it.ID), it.Token
	if ok, err := t.st.HasInput(it.ID); err != nil {
		worker.Finish(t.st, it, worker.End{Complete: true}, maxAttempts)
		return ItemResult{Finish: commit.IOError.Reason(), outage: outageErr(err)}, fmt.Errorf("%w: stored input of %s: %w", ErrIO, it.ID, err)
	} else if ok {
		item.Input = t.st.Abs(t.st.InputPath(it.ID))
	}
	lease := keepalive.Granted(it, start, granted.Record, cfg.ClockSkew)
	if granted.Record != nil {
		item.Expires = time.UnixMicro(int64(granted.Record.ExpiresAt * 1e6))
	}

	// fn's context ends when the lease is lost (the keeper says so) or
	// ctx ends; the keeping itself ends only when fn has returned.
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	kctx, stopKeeping := context.WithCancel(context.Background())
	kept := make(chan keepalive.Report, 1)
	go func() {
		kept <- keepalive.Keep(kctx, keepalive.Store(kst), lease, cfg, func(r keepalive.Report) {
			if r.Event == keepalive.Lost {
				cancel(fmt.Errorf("%w: %s token %d", ErrLost, it.ID, it.Token))
			}
		})
	}()
	ferr := fn(fctx, item)
	stopKeeping()
	end := <-kept
	lost := end.Event == keepalive.Lost

	e := worker.End{Complete: true, Succeeded: ferr == nil, Lost: lost}
	if ferr != nil && !lost && ctx.Err() == nil {
		// An attempt, unless the table's filesystem has no room now: the
		// machine's failure (worker.Failed).
		e = worker.Failed(t.st, e, commit.Failure{ExitStatus: exitStatusOf(ferr), Stderr: []byte(ferr.Error())})
	}
	f := worker.Finish(t.st, it, e, maxAttempts)
	for cause := f.Cause(); cause != nil; cause = f.Cause() {
		// A finish that failed for the machine's sake: wait it out and
		// finish again (the result stays staged meanwhile).
		if !out.Wait(ctx, cause) {
			break
		}
		f = worker.Finish(t.st, it, e, maxAttempts)
	}
	if f.Cause() == nil {
		out.Over()
	}
	res := ItemResult{Finish: f.How, Err: ferr, Lost: lost || f.How == worker.HowLost}
	if e.NoRoom != nil && f.How == worker.HowReleased {
		res.NoRoom = e.NoRoom
		if out.Say != nil {
			out.Say(worker.NoRoomMessage(string(it.ID), "the function", e.NoRoom))
		}
	}
	if rec := f.Result.Record; rec != nil {
		res.Attempts = rec.Attempts
	}
	if o, trouble := f.Trouble(); trouble {
		cause := f.Result.Err()
		if f.StageErr != nil {
			cause = fmt.Errorf("%w: %w", ErrIO, f.StageErr)
		}
		if cause == nil {
			cause = errors.New(o.Reason())
		}
		return res, fmt.Errorf("%s token %d could not be finished: %w", it.ID, it.Token, cause)
	}
	return res, nil
}

// outageErr is err when it is an outage's (worker.OutageErrno), else nil.
func outageErr(err error) error {
	if worker.OutageErrno(err) {
		return err
	}
	return nil
}

// exitStatusOf is the exit status an error carries, 0 when none: a
// command's (128+n when signal n killed it).
func exitStatusOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	var es ExitStatus
	if errors.As(err, &es) {
		if c := es.ExitCode(); c > 0 && c <= leasefmt.MaxExitStatus {
			return c
		}
	}
	return 0
}
