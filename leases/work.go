package leases

// Table.Work: the campaign worker of the command line's lease work, for a
// harness written in Go. The same loop (internal/worker.Loop: the claim of
// the queue, the finish of an item, the outage and no-room waits;
// keepalive: the keeping) so that Go workers and lease work workers can
// share one campaign; only what runs the work is this file's.

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
	// Err is what the function returned; for an item whose staging
	// directory or stored input could not be read, the table's error (the
	// function was not called; the item was released, no attempt counted,
	// and Finish says how that release went).
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

	finished worker.Finished // how workOne's finish went
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
// The lease waited for counts from the claim that granted it; the finish
// of an item waits for its record's lock no longer than a renewal would
// (ttl - interval - clock skew, or the table's lock timeout when shorter).
// The loop is lease work's own (internal/worker.Loop). Work
// returns nil when the queue is empty or MaxItems items were run,
// ctx.Err() when ctx ended it (the item held was released), and an error
// wrapping ErrIO, ErrCorrupt or ErrLockTimeout when the table failed.
// Items that fail, are lost or cannot be published never end it.
func (t *Table) Work(ctx context.Context, fn func(context.Context, Item) error, opts WorkOptions) (WorkStats, error) {
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
	grace := opts.Grace
	if grace == 0 {
		grace = time.Duration(config.DefaultGrace * float64(time.Second))
	}
	timing, err := worker.NewTiming(ttl.Seconds(), 0, opts.Interval.Seconds(), grace.Seconds(), t.st.ClockSkew(), t.st.LockTimeout().Seconds())
	if err != nil {
		return WorkStats{Finishes: map[string]int{}}, fmt.Errorf("work: %w", err)
	}
	var cur ItemResult // the item being run (Run, then Done)
	l := &worker.Loop{Store: t.st, Owner: t.owner, Timing: timing, MaxItems: opts.MaxItems, MaxAttempts: maxAttempts,
		// No claim while the table's filesystem has no room (worker.NoRoom).
		Outage: &worker.Outage{MaxWait: opts.MaxWait, Say: opts.Waiting, Room: t.st.Root()},
		Run: func(ctx context.Context, h worker.Held, finish func(worker.End) worker.Finished) worker.Ran {
			cur = t.workOne(ctx, timing, fn, h, finish)
			return worker.Ran{Finished: cur.finished}
		},
		Done: func(d worker.Ended) {
			res := cur
			cur = ItemResult{}
			if d.Err != nil {
				res = ItemResult{Err: d.Err}
			}
			res.Lease = results([]commit.Result{d.Held.Granted})[0].Lease
			res.Finish, res.Lost = d.Finished.How, res.Lost || d.Finished.How == worker.HowLost
			if d.End.NoRoom != nil && d.Finished.How == worker.HowReleased {
				res.NoRoom = d.End.NoRoom
				if opts.Waiting != nil {
					opts.Waiting(worker.NoRoomMessage(string(d.Held.ID), "the function", d.End.NoRoom))
				}
			}
			if rec := d.Finished.Result.Record; rec != nil {
				res.Attempts = rec.Attempts
			}
			if opts.Done != nil {
				opts.Done(res)
			}
		},
	}
	end := l.Work(ctx)
	stats := WorkStats{Items: end.Items, Finishes: end.Finishes}
	switch end.How {
	case worker.EndEmpty, worker.EndMaxItems:
		return stats, nil
	case worker.EndSignal:
		return stats, ctx.Err()
	}
	switch {
	case end.Blocked != nil:
		_, err := nextLease(*end.Blocked)
		if err == nil {
			err = fmt.Errorf("%w: %w", ErrIO, end.Err)
		}
		return stats, err
	case end.Trouble != nil:
		f := *end.Trouble
		cause := f.Result.Err()
		if f.StageErr != nil {
			cause = fmt.Errorf("%w: %w", ErrIO, f.StageErr)
		}
		if cause == nil {
			o, _ := f.Trouble()
			cause = errors.New(o.Reason())
		}
		return stats, fmt.Errorf("%s token %d could not be finished: %w", end.Held.ID, end.Held.Token, cause)
	}
	return stats, fmt.Errorf("%w: %w", ErrIO, end.Err)
}

// workOne runs fn for the item h while its lease is kept alive, and
// finishes it with finish.
func (t *Table) workOne(ctx context.Context, timing worker.Timing, fn func(context.Context, Item) error, h worker.Held,
	finish func(worker.End) worker.Finished) ItemResult {
	item := Item{Stage: h.Stage, Input: h.Input}
	item.ID, item.Token = string(h.ID), h.Token
	lease := keepalive.Granted(h.Item, h.Started, h.Granted.Record, timing.ClockSkew)
	if h.Granted.Record != nil {
		item.Expires = time.UnixMicro(int64(h.Granted.Record.ExpiresAt * 1e6))
	}

	// fn's context ends when the lease is lost (the keeper says so) or
	// ctx ends; the keeping itself ends only when fn has returned. The
	// keeper bounds its renewals' lock waits through their contexts.
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	kctx, stopKeeping := context.WithCancel(context.Background())
	kept := make(chan keepalive.Report, 1)
	go func() {
		kept <- keepalive.Keep(kctx, keepalive.Store(t.st), lease, timing.Keep(), func(r keepalive.Report) {
			if r.Event == keepalive.Lost {
				cancel(fmt.Errorf("%w: %s token %d", ErrLost, h.ID, h.Token))
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
	return ItemResult{Err: ferr, Lost: lost, finished: finish(e)}
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
