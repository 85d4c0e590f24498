// Package worker holds what every campaign worker of a lease table
// shares, so that the command line (lease run --next, lease work) and the
// Go API (leases.Table.Work) follow one set of rules:
//
//   - claiming the next item of the queue, trying again with backoff
//     while every item left is held ([ClaimNext], [Backoff]); a lease it
//     grants counts from the try that granted it, not from before the wait;
//   - finishing an item once its work ended ([Finish]): what the work
//     staged is published whole as public/ID/ and the item is done only
//     when that succeeded; a run that failed on its own counts an attempt
//     (failed at max_attempts); a run that was stopped, or whose lease was
//     lost, counts none;
//   - the loop of a long-lived worker ([Loop]): claim, run, finish, wait
//     out a table that cannot be written ([Outage]) or a filesystem with
//     no room, until the queue is empty; lease work and Table.Work run it,
//     each with its own way of running the work.
//
// Keeping the lease alive while the work runs is package keepalive's.
// The rules are those of docs/lease-format.md (attempts, whole results)
// and of lease-run(1) and lease-work(1).
package worker

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/leasetool/lease/commit"
)

// The bounds of Backoff's sleeps.
const (
	BackoffMin = 50 * time.Millisecond
	BackoffMax = 2 * time.Second
)

// backoffMin and backoffMax are the bounds NewBackoff uses: tests make
// them long, to show that a wake-up came from the watch (wake_linux.go).
var backoffMin, backoffMax = BackoffMin, BackoffMax

// Backoff sleeps before the next try of something busy: capped
// exponential backoff with jitter (BackoffMin doubling to BackoffMax),
// never past its deadline (when set), and woken early at a hint (the
// earliest moment something busy can free up) or, once Watch armed it, when
// an item of the table is let go (wake_linux.go): the poll is then the
// upper bound of the wait, and the only wake-up where inotify is not
// trusted.
type Backoff struct {
	next     time.Duration
	deadline time.Time
	ctx      context.Context
	w        *waker
}

// NewBackoff returns a backoff whose waits end when ctx is done or, when
// deadline is not zero, at deadline.
func NewBackoff(ctx context.Context, deadline time.Time) *Backoff {
	return &Backoff{next: backoffMin, deadline: deadline, ctx: ctx}
}

// Watch arms the wake-up on the release of an item of st's table, where
// its filesystem delivers one (wake_linux.go); it reports whether it did.
// The caller tries again once before it waits: what was let go between
// its last try and the watch is not announced. Close releases it.
func (b *Backoff) Watch(st *commit.Store) bool {
	if b.w == nil {
		b.w = newWaker(st)
	}
	return b.w != nil
}

// Close releases what Watch armed.
func (b *Backoff) Close() {
	if b.w != nil {
		b.w.close()
		b.w = nil
	}
}

// Wait sleeps once; hint is a time (seconds since the epoch) at which a
// busy item may be free, 0 when unknown. It returns false when the
// deadline has passed or the context is done.
func (b *Backoff) Wait(hint float64) bool {
	d := b.next/2 + rand.N(b.next/2+1) // jitter: workers that started together spread out
	b.next = min(2*b.next, backoffMax)
	if hint > 0 {
		if until := time.Until(time.UnixMicro(int64(hint * 1e6))); until > 0 && until < d {
			d = until + time.Millisecond
		}
	}
	if !b.deadline.IsZero() {
		left := time.Until(b.deadline)
		if left <= 0 {
			return false
		}
		d = min(d, left)
	}
	var wake <-chan struct{}
	if b.w != nil {
		wake = b.w.c
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-wake:
		return true
	case <-b.ctx.Done():
		return false
	}
}

// Stopped reports whether the context ended the wait.
func (b *Backoff) Stopped() bool { return b.ctx.Err() != nil }

// Context is the context that ends the backoff's waits: the waits of the
// claims tried between them end with it too.
func (b *Backoff) Context() context.Context { return b.ctx }
