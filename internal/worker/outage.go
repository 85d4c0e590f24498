package worker

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/leasetool/lease/commit"
)

// The bounds of an Outage's sleeps, and how often it says it still waits.
const (
	OutageMin = time.Second
	OutageMax = 30 * time.Second
	OutageSay = time.Minute
)

// OutageErrno reports whether err is the machine's, not the item's: the
// table's filesystem is full (ENOSPC), read-only (EROFS), failing (EIO) or
// its NFS handle stale (ESTALE). A long-lived worker waits such a state
// out (Outage) instead of ending.
func OutageErrno(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.EROFS, syscall.EIO, syscall.ESTALE} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// OutageOf returns the cause of a claim that got nothing for the
// machine's sake: the answer is Blocked and every result that failed is an
// I/O error of OutageErrno (a corrupt record is no outage). nil otherwise.
func OutageOf(nx commit.Next) error {
	if nx.Answer != commit.Blocked {
		return nil
	}
	var cause error
	for _, r := range nx.Results {
		if r.Outcome == commit.OK {
			continue
		}
		if r.Outcome != commit.IOError || !OutageErrno(r.Cause) {
			return nil
		}
		if cause == nil {
			cause = r.Err()
		}
	}
	return cause
}

// Cause returns the error of a finish that failed for the machine's sake
// (OutageErrno), nil when it did not fail or failed otherwise.
func (f Finished) Cause() error {
	if _, trouble := f.Trouble(); !trouble {
		return nil
	}
	for _, err := range []error{f.StageErr, f.Result.Cause} {
		if err != nil && OutageErrno(err) {
			return err
		}
	}
	if f.PublishErr != nil && OutageErrno(f.PublishErr.Cause) {
		return f.PublishErr.Cause
	}
	return nil
}

// Outage is a worker's wait for a table it cannot write: the leases it
// holds stay held (renewals use the table's reserve), it claims nothing,
// says once that it waits and then, every OutageSay, how long it has
// waited, and tries again after a backoff of OutageMin doubling to
// OutageMax, until the table takes a write again (Over) or MaxWait has
// passed. The zero Outage waits silently and for ever.
type Outage struct {
	// MaxWait bounds the wait (0: none): past it Wait returns false.
	MaxWait time.Duration
	// Say, when set, gets the messages, one line each.
	Say func(msg string)
	// Room, when set, is the table root of a worker that runs work on
	// what it claims (lease work, lease run --next --wait, Table.Work):
	// while its filesystem has no room (NoRoom) ClaimNext claims nothing
	// and waits that out as an outage, since the work would fail for the
	// machine's sake.
	Room string

	began, said time.Time
	next        time.Duration
}

// Waiting reports whether an outage is being waited out.
func (o *Outage) Waiting() bool { return o != nil && !o.began.IsZero() }

// Wait sleeps before the next try of a write that failed with cause. It
// returns false when ctx is done or the outage has lasted MaxWait.
func (o *Outage) Wait(ctx context.Context, cause error) bool {
	now := time.Now()
	if o.began.IsZero() {
		o.began, o.said, o.next = now, now, OutageMin
		bound := "for as long as it takes"
		if o.MaxWait > 0 {
			bound = fmt.Sprintf("for at most %s (max_wait)", o.MaxWait)
		}
		o.say(fmt.Sprintf("the table cannot be written (%v): the leases held stay held, no item is claimed; trying again every %s to %s, %s",
			cause, OutageMin, OutageMax, bound))
	} else if now.Sub(o.said) >= OutageSay {
		o.said = now
		o.say(fmt.Sprintf("the table still cannot be written after %s (%v); waiting", now.Sub(o.began).Round(time.Second), cause))
	}
	d := o.next
	o.next = min(2*o.next, OutageMax)
	if o.MaxWait > 0 {
		left := o.began.Add(o.MaxWait).Sub(now)
		if left <= 0 {
			o.say(fmt.Sprintf("the table cannot be written after %s, max_wait %s: giving up", now.Sub(o.began).Round(time.Second), o.MaxWait))
			return false
		}
		d = min(d, left)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Over ends the outage: the table took a write again. It says so when it
// had waited.
func (o *Outage) Over() {
	if !o.Waiting() {
		return
	}
	o.say(fmt.Sprintf("the table is writable again after %s; going on", time.Since(o.began).Round(time.Second)))
	o.began = time.Time{}
}

func (o *Outage) say(msg string) {
	if o.Say != nil {
		o.Say(msg)
	}
}
