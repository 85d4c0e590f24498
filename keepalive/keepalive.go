// Package keepalive keeps leases alive by renewing them every interval:
// the rules renew-batch --watch and lease run share.
//
//   - [Classify] says what a renewal's outcome means for the lease:
//     renewed, gone for good (stale, expired, released, missing), done
//     (finished by its holder), or a failure that may pass (lock timeout,
//     I/O error, corrupt record) and is retried.
//   - A lease counts as lost at expires_at - clock_skew (SPEC §6), by the
//     local monotonic clock, counted from before the write that last
//     extended it ([Lease.LostAt]), so a clock that jumps changes nothing
//     and the local deadline is never later than the truth.
//   - A renewal waits for a record lock at most ttl - interval -
//     clock_skew ([LockWait]): one started an interval after the last
//     lands before the lease counts as lost.
//   - [Ticker] paces the rounds, one every interval (at once when a round
//     took longer), and is interrupted by signals.
//   - [Set] is what a watch knows of many leases, round after round: a
//     failure that may pass is retried until the lease's own lost point,
//     then the lease is dropped as lost.
package keepalive

import (
	"os"
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
)

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
		l.LostAt = time.Now().Add(seconds(rec.ExpiresAt - commit.SystemClock() - skew))
	}
}

// Ticker paces rounds: one every interval, at once when a round took
// longer, and interrupted by a signal on its channel.
type Ticker struct {
	sigc     <-chan os.Signal
	next     time.Time
	interval time.Duration
	// Stopped is the first signal received, nil while none was.
	Stopped os.Signal
}

// NewTicker returns a ticker of rounds every interval seconds, stopped by
// the signals of sigc (nil: none).
func NewTicker(interval float64, sigc <-chan os.Signal) *Ticker {
	return &Ticker{sigc: sigc, next: time.Now(), interval: seconds(interval)}
}

// Wait waits for the next round; it returns at once after a signal.
func (t *Ticker) Wait() {
	t.next = t.next.Add(t.interval)
	if now := time.Now(); t.next.Before(now) {
		t.next = now
	}
	if t.Stopped != nil {
		return
	}
	select {
	case t.Stopped = <-t.sigc:
	case <-time.After(time.Until(t.next)):
	}
}

// Signalled reports whether a signal arrived so far, without waiting.
func (t *Ticker) Signalled() bool {
	if t.Stopped == nil {
		select {
		case t.Stopped = <-t.sigc:
		default:
		}
	}
	return t.Stopped != nil
}
