package worker

// The campaign worker's loop, one for lease work and leases.Table.Work:
// claim the next item, make its staging directory, run the work while its
// lease is kept, finish it (waiting out a table that cannot be written),
// and go on until the queue is empty, MaxItems items were run, ctx is done
// or the table fails. What runs the work is the caller's (lease work: CMD
// under its supervisor; Table.Work: a Go function); the rest is here.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/config"
	"github.com/leasetool/lease/keepalive"
)

// Timing is how a worker keeps the leases it holds and bounds the finish
// of each: the one place its durations are derived (NewTiming).
type Timing struct {
	// Interval is the time between renewals.
	Interval time.Duration
	// RenewTTL is the duration each renewal gives (0: the lease's own).
	RenewTTL time.Duration
	// TTL is the duration a claim gives.
	TTL time.Duration
	// LockTimeout bounds a claim's wait for a record's lock.
	LockTimeout time.Duration
	// ClockSkew bounds the clock difference between the table's nodes.
	ClockSkew time.Duration
	// Grace is how long before the lost point the work is told to stop.
	Grace time.Duration
}

// NewTiming derives a worker's timing from its settings, in seconds as
// config.Settings has them; interval 0 is config.RenewInterval of the
// ttl (leases.WorkOptions' zero; the command line's settings come with
// theirs, derived by the same function). The interval must leave a
// renewal time to land: less than ttl - skew.
func NewTiming(ttl, renewTTL, interval, grace, skew, lockTimeout float64) (Timing, error) {
	if interval == 0 {
		interval = config.RenewInterval(ttl)
	}
	t := Timing{Interval: seconds(interval), RenewTTL: seconds(renewTTL), TTL: seconds(ttl), LockTimeout: seconds(lockTimeout),
		ClockSkew: seconds(skew), Grace: seconds(grace)}
	if interval <= 0 || interval >= ttl-skew {
		return t, fmt.Errorf("renewal interval %v must be more than 0 and less than ttl %v - clock skew %v", t.Interval, t.TTL, t.ClockSkew)
	}
	return t, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Keep is the keeper's configuration of a lease held under t.
func (t Timing) Keep() keepalive.Config {
	return keepalive.Config{Interval: t.Interval, TTL: t.RenewTTL, LockTimeout: t.LockTimeout, ClockSkew: t.ClockSkew, Grace: t.Grace}
}

// FinishWait bounds the lock wait of a finish: no longer than a renewal
// would wait (keepalive.LockWait), so that a finish stuck behind a lock
// ends before the lease counts as lost.
func (t Timing) FinishWait() time.Duration {
	return keepalive.LockWait(t.LockTimeout.Seconds(), t.TTL.Seconds(), t.Interval.Seconds(), t.ClockSkew.Seconds())
}

// Held is an item the loop claimed for its work: the claim's grant, when
// the try that granted it began (its lease counts from there), its
// staging directory and its stored input ("" when none).
type Held struct {
	commit.Item
	Granted commit.Result
	Started time.Time
	Stage   string
	Input   string
	// Met are the results of the claim's other candidates that failed
	// (a corrupt record met on the way).
	Met []commit.Result
}

// Ran is how the work of one item went, as Loop.Run says.
type Ran struct {
	// Finished is how the finish Run called went.
	Finished Finished
	// Again finishes the item again as Run did (after an outage); nil:
	// the loop calls finish again with the same End.
	Again func() Finished
	// Stop, when not nil, ends the loop after this item (EndCannotRun):
	// the work could not be started.
	Stop error
}

// Ended is one item the loop is done with, for Loop.Done.
type Ended struct {
	N    int // the item's number, from 1
	Held Held
	// End is how the work ended (the End of the last finish).
	End      End
	Finished Finished
	// Err is the table's error that kept the work from running (the
	// staging directory, the stored input): the item was released.
	Err  error
	Took time.Duration
}

// The words of Stopped.How.
const (
	EndEmpty     = "empty"
	EndMaxItems  = "max-items"
	EndSignal    = "signal"
	EndError     = "error"
	EndCannotRun = "cannot-run"
)

// Stopped is how the loop ended.
type Stopped struct {
	// How is one of the End words.
	How string
	// Err is why it ended with EndError or EndCannotRun.
	Err error
	// Blocked is the claim that could claim nothing (EndError).
	Blocked *Claimed
	// Trouble is the finish that failed for the table's sake (EndError),
	// and Held its item.
	Trouble *Finished
	Held    Held
	// Starting: Loop.Start failed (EndError).
	Starting bool
	Items    int
	Finishes map[string]int
}

// Loop is one campaign worker of a table (see the file's comment).
type Loop struct {
	Store       *commit.Store
	Owner       string
	Timing      Timing
	MaxItems    int // 0: no limit
	MaxAttempts int // 0: no limit
	// Outage waits out a table that cannot be written (claims, staging,
	// finishes); its Room is the table's root, so that nothing is
	// claimed while its filesystem has no room (NoRoom).
	Outage *Outage
	// Start, when not nil, is called once an item is granted, before its
	// staging directory is made: its error releases the item and ends the
	// loop (lease work: its supervisor could not be started).
	Start func() error
	// Run does the work of h while its lease is kept alive, stopping it
	// when ctx is done, and finishes the item once by calling finish
	// with how the work ended (a finish whose lock waits are bounded by
	// Timing.FinishWait, through its context).
	Run func(ctx context.Context, h Held, finish func(End) Finished) Ran
	// Done, when not nil, is called once for each item run or given up.
	Done func(Ended)
}

// Work runs the loop until the queue is empty (EndEmpty), MaxItems items
// were run (EndMaxItems), ctx is done (EndSignal: the item held was
// released, no attempt counted) or the table fails (EndError); items that
// fail, are lost, or whose result cannot be published never end it.
func (l *Loop) Work(ctx context.Context) Stopped {
	stop := Stopped{Finishes: map[string]int{}}
	end := func(how string, err error) Stopped {
		stop.How, stop.Err = how, err
		return stop
	}
	rnd := NewRand()
	for l.MaxItems == 0 || stop.Items < l.MaxItems {
		if ctx.Err() != nil {
			return end(EndSignal, ctx.Err())
		}
		cl := ClaimNext(ctx, l.Store, rnd, 1, l.Owner, l.Timing.TTL.Seconds(), true, time.Time{}, l.Outage)
		switch cl.Answer {
		case commit.Empty:
			return end(EndEmpty, nil)
		case commit.Busy:
			return end(EndSignal, ctx.Err()) // only a stop ends the wait for a busy queue
		case commit.Blocked:
			if OutageOf(cl.Next) != nil && ctx.Err() != nil {
				return end(EndSignal, ctx.Err()) // a stop ended the wait for the table
			}
			stop.Blocked = &cl
			return end(EndError, errors.New("no queued item can be claimed"))
		}
		var h Held
		granted := false
		for _, r := range cl.Results {
			if r.Outcome == commit.OK && !granted {
				h.Granted, granted = r, true
				continue
			}
			h.Met = append(h.Met, r)
		}
		if !granted {
			stop.Blocked = &cl
			return end(EndError, errors.New("no queued item was granted"))
		}
		h.Item, h.Started = commit.Item{ID: h.Granted.ID, Token: h.Granted.Token}, cl.Started
		if ctx.Err() != nil {
			// The stop came with the grant: give the item back untouched.
			l.finish(h.Item, End{Complete: true})
			return end(EndSignal, ctx.Err())
		}
		if l.Start != nil {
			if err := l.Start(); err != nil {
				l.finish(h.Item, End{Complete: true})
				stop.Starting = true
				return end(EndError, err)
			}
		}
		began := time.Now()
		stop.Items++
		done := func(e End, f Finished, err error) {
			stop.Finishes[f.How]++
			if l.Done != nil {
				l.Done(Ended{N: stop.Items, Held: h, End: e, Finished: f, Err: err, Took: time.Since(began)})
			}
		}
		if err := Prepare(l.Store, &h); err != nil {
			// Released, no attempt counted; the work was not run.
			e := End{Complete: true}
			f := l.finish(h.Item, e)
			done(e, f, err)
			switch {
			case OutageErrno(err):
				// The next claim waits the outage out.
				if !l.Outage.Wait(ctx, err) {
					if ctx.Err() != nil {
						return end(EndSignal, ctx.Err())
					}
					return end(EndError, err)
				}
				continue
			case errors.Is(err, commit.ErrStageTaken):
				// Another account took the staging directory's name: the
				// next item (or this one under its next token) gets a
				// name of its own.
				continue
			}
			stop.Held = h
			return end(EndError, err)
		}
		var last End
		finish := func(e End) Finished { last = e; return l.finish(h.Item, e) }
		ran := l.Run(ctx, h, finish)
		again := ran.Again
		if again == nil {
			again = func() Finished { return finish(last) }
		}
		f := ran.Finished
		for cause := f.Cause(); cause != nil; cause = f.Cause() {
			// A finish that failed for the machine's sake: wait it out and
			// finish again (the result stays staged meanwhile).
			if !l.Outage.Wait(ctx, cause) {
				done(last, f, nil)
				if ctx.Err() != nil {
					return end(EndSignal, ctx.Err())
				}
				stop.Trouble, stop.Held = &f, h
				return end(EndError, cause)
			}
			f = again()
		}
		l.Outage.Over()
		done(last, f, nil)
		if ran.Stop != nil {
			return end(EndCannotRun, ran.Stop)
		}
		if _, trouble := f.Trouble(); trouble {
			stop.Trouble, stop.Held = &f, h
			return end(EndError, fmt.Errorf("%s token %d could not be finished", h.ID, h.Token))
		}
	}
	if ctx.Err() != nil {
		// The stop came during the last item: a stop all the same.
		return end(EndSignal, ctx.Err())
	}
	return end(EndMaxItems, nil)
}

// Prepare makes the staging directory of the lease h holds and finds its
// stored input, before its work runs (lease run, Loop).
func Prepare(st *commit.Store, h *Held) error {
	stage, err := st.MakeStage(h.ID, h.Token)
	if err != nil {
		return fmt.Errorf("staging directory of %s token %d: %w", h.ID, h.Token, err)
	}
	h.Stage = stage
	ok, err := st.HasInput(h.ID)
	if err != nil {
		return fmt.Errorf("stored input of %s: %w", h.ID, err)
	}
	if ok {
		h.Input = st.Abs(st.InputPath(h.ID))
	}
	return nil
}

// finish finishes it as e says, its lock waits bounded by FinishWait.
func (l *Loop) finish(it commit.Item, e End) Finished {
	ctx, cancel := FinishContext(l.Timing.FinishWait())
	defer cancel()
	return Finish(ctx, l.Store, it, e, l.MaxAttempts)
}
