package worker

import (
	"context"
	"errors"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/keepalive"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// End is how the work of a held lease ended.
type End struct {
	// Complete: the holder finishes items (lease run --complete, lease
	// work, leases.Table.Work): work that succeeded makes the item done,
	// work that failed counts an attempt. Without it the lease is only
	// ever released.
	Complete bool
	// Succeeded: the work succeeded (CMD exited 0).
	Succeeded bool
	// Failure, when not nil and the work did not succeed, is the work's
	// own failure (a non-zero exit, a signal it did not get from its
	// holder, an error): an attempt. Work that was stopped (its holder was
	// told to stop), whose lease was lost or that could not start has no
	// Failure: it is released with no attempt counted.
	Failure *commit.Failure
	// Lost: the holder knows its lease is lost (a renewal or check said
	// so, or it ran out): a refusal of the finishing call is the loss.
	Lost bool
	// NoRoom, when not nil, is why a failure is not counted: the work
	// failed while the table's filesystem had no room (Failed), the
	// machine's failure; the item is released with no attempt.
	NoRoom error
}

// The words of Finished.How, as lease run --json's "finish" says them;
// the reason word of the outcome (io-error, lock-timeout, corrupt) when
// the table failed.
const (
	HowDone             = "done"
	HowReleased         = "released"
	HowFailed           = "failed"
	HowPublishRefused   = "publish-refused"
	HowByHolderDone     = "by-command-done"
	HowByHolderReleased = "by-command-released"
	HowLost             = "lost"
)

// Finished is how Finish finished a lease.
type Finished struct {
	// How is one of the How words, or the reason word of the outcome that
	// stopped it (Trouble).
	How string
	// Result is the outcome of the call that decided it; for an attempt
	// counted, its Record holds the attempts and the status.
	Result commit.Result
	// Attempt: an attempt was counted (How is released or failed, or
	// publish-refused).
	Attempt bool
	// Published: the staged result was published as public/ID/.
	Published bool
	// Refused says why a staged result could not be published (How is
	// publish-refused): the staging directory stays, for lease fsck.
	Refused string
	// Unpublished: the holder completed the lease itself and what it left
	// staged was not published (it stays, for lease fsck).
	Unpublished bool
	// StageErr is why the staging directory could not be read (the item
	// was released, not done).
	StageErr error
	// PublishErr is the outcome of a publish that failed for the table's
	// sake (the item was released to settle it, not done).
	PublishErr *commit.Result
}

// Trouble reports the outcome of a table error that kept the lease from
// being finished (an I/O error, a lock timeout, a corrupt record); ok is
// false when it was finished, given up or found lost, as work goes.
func (f Finished) Trouble() (commit.Outcome, bool) {
	switch f.How {
	case HowDone, HowReleased, HowFailed, HowPublishRefused, HowByHolderDone, HowByHolderReleased, HowLost:
		return commit.OK, false
	}
	if f.StageErr != nil {
		return commit.IOError, true
	}
	return f.Result.Outcome, true
}

// Finish finishes the lease it of st once its work ended (e), by the
// rules lease run --complete, lease work and leases.Table.Work share:
//
//   - Work that succeeded with Complete: what it left in its staging
//     directory stage/ID.TOKEN/ is published whole as public/ID/ and the
//     item is done only when that succeeded; with nothing staged the item
//     is simply done. A result that cannot be published (a symbolic link
//     in it, public/ID taken) releases the item with an attempt counted
//     and leaves the staging directory in place; a publish that failed
//     for the table's sake releases it (settling a half-done publish) and
//     is Trouble.
//   - Work that failed on its own with Complete: released with an attempt
//     counted, with its exit status and stderr tail; at maxAttempts (0: no
//     limit) the item becomes failed.
//   - Anything else (stopped, lost, not started, or no Complete): released,
//     no attempt.
//
// A lease its holder finished itself with its token (done, or released)
// counts as finished; a refusal of a lease that is gone is HowLost. An
// empty staging directory is removed; one with anything in it stays.
//
// ctx bounds the lock wait of each write: its deadline, when it has one,
// is the longest any of them waits for a record's lock (a holder's finish
// waits no longer than a renewal would: FinishContext), each write
// getting the whole span, so that the release settling a publish that
// failed is still tried. The writes are never cut short otherwise, not
// even by the signal that stopped the worker: a lease ends released or
// done rather than left to expire.
func Finish(ctx context.Context, st *commit.Store, it commit.Item, e End, maxAttempts int) Finished {
	removed := false // the staging directory, by RemoveEmptyStage
	defer func() {
		if !removed {
			st.FS().Remove(layout.StagePath(it.ID, it.Token)) // only an empty one goes
		}
	}()
	w := &writes{ctx: ctx}
	if d, ok := ctx.Deadline(); ok {
		w.span = max(time.Nanosecond, time.Until(d))
	}
	defer w.done()
	finishCtx := w.next
	items := []commit.Item{it}
	switch {
	case e.Complete && e.Succeeded:
		empty, err := st.RemoveEmptyStage(it.ID, it.Token)
		removed = empty && err == nil
		if err != nil {
			rel := st.Release(finishCtx(), items)[0]
			return Finished{How: commit.IOError.Reason(), Result: rel, StageErr: err}
		}
		if !empty {
			return publish(finishCtx, st, it, e, maxAttempts)
		}
		return classify(st.Complete(finishCtx(), items)[0], HowDone, e.Lost)
	case e.Complete && e.Failure != nil && !e.Lost:
		f := classify(st.ReleaseFailed(finishCtx(), items, *e.Failure, maxAttempts)[0], HowReleased, false)
		f.Attempt = f.Result.Outcome == commit.OK
		return f
	}
	return classify(st.Release(finishCtx(), items)[0], HowReleased, e.Lost)
}

// writes gives each write of a finish its context: ctx's values, never
// cancelled, with a deadline span from the write's start when ctx had
// one.
type writes struct {
	ctx     context.Context
	span    time.Duration
	cancels []context.CancelFunc
}

func (w *writes) next() context.Context {
	ctx := context.WithoutCancel(w.ctx)
	if w.span > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.span)
		w.cancels = append(w.cancels, cancel)
	}
	return ctx
}

func (w *writes) done() {
	for _, c := range w.cancels {
		c()
	}
}

// FinishContext is the context of a holder's finish: its lock waits end
// at the renewal's bound wait (keepalive.LockWait), not the store's lock
// timeout, which a claim waits.
func FinishContext(wait time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), wait)
}

// classify names how the finishing call r went; ok is the word of its
// success.
func classify(r commit.Result, ok string, lost bool) Finished {
	f := Finished{Result: r}
	switch ev := keepalive.Classify(r.Outcome); {
	case r.Outcome == commit.OK:
		f.How = ok
		if r.Record != nil && r.Record.Status == leasefmt.Failed {
			f.How = HowFailed
		}
	case lost:
		f.How = HowLost
	case ev == keepalive.Done:
		f.How = HowByHolderDone
	case r.Outcome == commit.Released:
		f.How = HowByHolderReleased
	case ev == keepalive.Lost:
		f.How = HowLost
	default:
		f.How = r.Outcome.Reason()
	}
	return f
}

// publish publishes the staging directory of it as public/ID/ and
// completes it (see Finish).
func publish(finishCtx func() context.Context, st *commit.Store, it commit.Item, e End, maxAttempts int) Finished {
	items := []commit.Item{it}
	r, err := st.CompleteStage(finishCtx(), it)
	refused := ""
	switch {
	case errors.Is(err, commit.ErrStaged):
		refused = err.Error()
	case r.Outcome == commit.Exists:
		refused = r.Detail
	}
	if refused != "" {
		res := st.ReleaseFailed(finishCtx(), items, commit.Failure{Stderr: []byte("the result cannot be published: " + refused)}, maxAttempts)[0]
		f := classify(res, HowPublishRefused, e.Lost)
		if res.Outcome == commit.OK {
			f.How, f.Attempt = HowPublishRefused, true
		}
		f.Refused = refused
		return f
	}
	switch ev := keepalive.Classify(r.Outcome); {
	case r.Outcome == commit.OK:
		return Finished{How: HowDone, Result: r, Published: true}
	case ev == keepalive.Done:
		// The holder completed the lease itself, without this result.
		return Finished{How: HowByHolderDone, Result: r, Unpublished: true}
	case ev == keepalive.Lost:
		return Finished{How: HowLost, Result: r}
	}
	// An I/O error, a lock timeout, a corrupt record: the record may be
	// committing; the release settles it (done if the result moved).
	bad := r
	rel := st.Release(finishCtx(), items)[0]
	if rel.Outcome == commit.Done {
		return Finished{How: HowDone, Result: rel, Published: true}
	}
	return Finished{How: bad.Outcome.Reason(), Result: bad, PublishErr: &bad}
}
