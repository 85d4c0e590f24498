// Package keepalive keeps leases alive: the one implementation of the
// rules that lease run, renew-batch --watch and the Go API
// (leases.Table.KeepAlive) share.
//
//   - [Keep] keeps one lease alive while its work runs: a renewal every
//     interval, a read-only check between renewals so that a release or a
//     revoke from outside ends it at once, and reports (renewed, retrying,
//     lost with its reason, done by its holder) to its user, who stops the
//     work. A lease work loop runs one Keep per item.
//   - [Classify] says what a renewal's outcome means for the lease:
//     renewed, gone for good (stale, expired, released, missing), done
//     (finished by its holder), or a failure that may pass (lock timeout,
//     I/O error, corrupt record) and is retried ([Lease.Renewal]).
//   - A lease counts as lost at expires_at - clock_skew, by the local
//     monotonic clock, counted from before the write that last extended
//     it ([Lease.LostAt]), so a clock that jumps changes nothing and the
//     local deadline is never later than the truth. Its work is told to
//     stop a grace before ([Lease.StopAt]).
//   - A renewal waits for a record lock at most ttl - interval -
//     clock_skew ([LockWait]): one started an interval after the last
//     lands before the lease counts as lost.
//   - [Ticker] paces the rounds of many leases, one every interval (at
//     once when a round took longer), until its context is done.
//   - [Set] is what a watch knows of many leases, round after round: the
//     same rules per lease, a failure that may pass retried until the
//     lease's own lost point, then the lease dropped as lost.
package keepalive

import (
	"context"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// Event is what a renewal means for its lease.
type Event int

// The events.
const (
	// Renewed: the lease was extended.
	Renewed Event = iota
	// Lost: the lease is gone for good (stale token, expired, released,
	// missing, or not renewed before its lost point).
	Lost
	// Done: the lease was finished by its holder (done is final).
	Done
	// Retry: a failure that may pass (lock timeout, I/O error, corrupt
	// record); retried until the lease's lost point.
	Retry
	// Stopped: Keep's context ended the keeping; the lease is still held.
	Stopped
)

// String names the event: renewed, lost, done, retry, stopped.
func (e Event) String() string {
	switch e {
	case Renewed:
		return "renewed"
	case Lost:
		return "lost"
	case Done:
		return "done"
	case Retry:
		return "retry"
	case Stopped:
		return "stopped"
	}
	return "unknown"
}

// Classify maps a renewal's outcome to its event.
func Classify(o commit.Outcome) Event {
	switch o {
	case commit.OK:
		return Renewed
	case commit.Done:
		return Done
	case commit.LockTimeout, commit.IOError, commit.Corrupt:
		return Retry
	}
	return Lost
}

// Checked is what a read-only check of a held lease means: Lost when the
// record is no longer this token's live lease (released, revoked, taken
// over, missing), Done when its holder completed it; ok is false when it
// changes nothing: the lease is live, the check failed in a way that may
// pass, or the record says it expired, which the local deadline decides
// (it counts from before the write, on the monotonic clock).
func Checked(o commit.Outcome) (Event, bool) {
	switch ev := Classify(o); {
	case ev == Done:
		return Done, true
	case o == commit.Expired:
		return 0, false
	case ev == Lost:
		return Lost, true
	}
	return 0, false
}

// LockWait bounds the record-lock wait of a renewal: the lock timeout, but
// at most ttl - interval - skew, so that a renewal started one interval
// after the last cannot land after the lease counts as lost.
func LockWait(lockTimeout, ttl, interval, skew float64) time.Duration {
	return seconds(min(lockTimeout, ttl-interval-skew))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Lease is what is known of one lease kept alive.
type Lease struct {
	Item commit.Item
	// ExpiresAt is expires_at as last renewed (0 before any renewal).
	ExpiresAt float64
	// Duration is the lease's own duration, expires_at - renewed_at of the
	// record last written.
	Duration float64
	// LostAt is when the lease counts as lost by the local monotonic clock.
	LostAt time.Time
	// Renewed: the last renewal succeeded.
	Renewed bool
}

// Extend records a renewal that began at started and wrote rec.
func (l *Lease) Extend(started time.Time, rec *leasefmt.Record, skew float64) {
	l.ExpiresAt, l.Renewed = rec.ExpiresAt, true
	if rec.RenewedAt > 0 {
		l.Duration = rec.ExpiresAt - rec.RenewedAt
		l.LostAt = started.Add(seconds(l.Duration - skew))
	} else {
		// A record known only by its expiry (from another rank): the
		// local deadline is the wall clock's.
		l.LostAt = time.Now().Add(seconds(rec.ExpiresAt - leasefmt.Now() - skew))
	}
}

// Renewal applies the result of a renewal begun at started to l and
// returns what it means: Renewed extends the lease; Retry, a failure that
// may pass, is Lost once the lease's lost point has passed; a refusal is
// Lost and a completion Done.
func (l *Lease) Renewal(r commit.Result, started time.Time, skew float64) Event {
	ev := Classify(r.Outcome)
	switch ev {
	case Renewed:
		l.Extend(started, r.Record, skew)
	case Retry:
		l.Renewed = false
		if !l.LostAt.IsZero() && !time.Now().Before(l.LostAt) {
			ev = Lost
		}
	}
	return ev
}

// Observe takes the lost point of a lease not renewed yet from its record
// as read now: expires_at - skew by the wall clock, the only one there is
// for a write this process did not time.
func (l *Lease) Observe(rec *leasefmt.Record, skew float64) {
	l.ExpiresAt = rec.ExpiresAt
	if rec.RenewedAt > 0 {
		l.Duration = rec.ExpiresAt - rec.RenewedAt
	}
	l.LostAt = time.Now().Add(seconds(rec.ExpiresAt - leasefmt.Now() - skew))
}

// Ticker paces rounds: one every interval, at once when a round took
// longer, until its context is done.
type Ticker struct {
	next     time.Time
	interval time.Duration
}

// NewTicker returns a ticker of rounds every interval seconds.
func NewTicker(interval float64) *Ticker {
	return &Ticker{next: time.Now(), interval: seconds(interval)}
}

// Wait waits for the next round; it returns false, at once, when ctx is
// done.
func (t *Ticker) Wait(ctx context.Context) bool {
	t.next = t.next.Add(t.interval)
	if now := time.Now(); t.next.Before(now) {
		t.next = now
	}
	if ctx.Err() != nil {
		return false
	}
	timer := time.NewTimer(time.Until(t.next))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
