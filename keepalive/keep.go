package keepalive

import (
	"context"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// Table is what a keeper needs of the table that holds its lease.
type Table interface {
	// Renew renews the lease for ttl seconds from now (0: its own
	// duration), waiting at most wait for the record's lock and no longer
	// than ctx lasts.
	Renew(ctx context.Context, it commit.Item, ttl float64, wait time.Duration) commit.Result
	// Check reads the lease's record without locks or writes (the fencing
	// check of lease verify).
	Check(ctx context.Context, it commit.Item) commit.Result
}

// Store is the Table of st. A renewal's lock wait is bounded through its
// context's deadline, so st is not changed and may be shared with anything
// else (the engine's lock wait ends at the earlier of its own timeout and
// the caller's deadline, and reports that as a lock timeout).
func Store(st *commit.Store) Table { return storeTable{st} }

type storeTable struct{ st *commit.Store }

func (s storeTable) Renew(ctx context.Context, it commit.Item, ttl float64, wait time.Duration) commit.Result {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return s.st.Renew(ctx, []commit.Item{it}, ttl)[0]
}

func (s storeTable) Check(ctx context.Context, it commit.Item) commit.Result {
	return s.st.Verify(ctx, []commit.Item{it})[0]
}

// Config is how a keeper keeps its lease alive.
type Config struct {
	// Interval is the time between renewals (more than 0).
	Interval time.Duration
	// TTL is the duration each renewal gives; 0 keeps the lease's own.
	TTL time.Duration
	// LockTimeout bounds a renewal's wait for the record's lock, before
	// the keeper's own bound (see Keep).
	LockTimeout time.Duration
	// ClockSkew bounds the clock difference between the nodes sharing the
	// table: the lease counts as lost at expires_at - ClockSkew.
	ClockSkew time.Duration
	// Grace is how long before the lost point the work is told to stop
	// when renewals keep failing, shortened to half of what the lease
	// leaves after the first retry (see Lease.StopAt). 0 stops it at the
	// lost point.
	Grace time.Duration
	// Poll is how often the record is checked, read-only, between
	// renewals, so that a release or a revoke from outside ends the lease
	// at once: 0 means min(1 s, Interval), less than 0 never.
	Poll time.Duration

	// finishing, when set, is called when Keep has ended and is about to
	// wait for the renewal still in flight: the seam through which a test
	// lets that renewal land only then (TestKeepWaitsForRenewalInFlight).
	finishing func()
}

func (c Config) poll() time.Duration {
	if c.Poll == 0 {
		return min(time.Second, c.Interval)
	}
	return c.Poll
}

// Granted is the lease a claim or a renewal begun at started granted as
// rec: its lost point counts from started (before the write), by the
// monotonic clock.
func Granted(it commit.Item, started time.Time, rec *leasefmt.Record, skew time.Duration) Lease {
	l := Lease{Item: it}
	l.Extend(started, rec, skew.Seconds())
	return l
}

// Expiring is a lease known only by when it runs out (by the wall clock,
// from an earlier call): it counts as lost at expires less the skew. A
// zero expires is not known at all: the keeper checks the record first.
func Expiring(it commit.Item, expires time.Time, skew time.Duration) Lease {
	l := Lease{Item: it}
	if !expires.IsZero() {
		l.ExpiresAt = float64(expires.UnixMicro()) / 1e6
		l.LostAt = time.Now().Add(time.Until(expires) - skew)
	}
	return l
}

// StopAt is when the work of l must be told to stop if no renewal
// succeeds before: grace before its lost point, the grace shortened to
// (duration - skew - interval) / 2 when it does not fit, so that renewals
// are retried first.
func (l *Lease) StopAt(grace, skew, interval time.Duration) time.Time {
	return l.LostAt.Add(-l.Grace(grace, skew, interval))
}

// Grace is the time the work of l gets between being told to stop and
// the lost point (see StopAt).
func (l *Lease) Grace(grace, skew, interval time.Duration) time.Duration {
	if l.Duration <= 0 {
		return 0 // its duration is not known: nothing to fit a grace in
	}
	room := seconds(l.Duration) - skew - interval
	return max(0, min(grace, room/2))
}

// Report is one thing that happened to a lease kept alive.
type Report struct {
	// Event is Renewed, Retry (a renewal failed in a way that may pass),
	// Lost or Done; Stopped only as Keep's result.
	Event Event
	// Result is the renewal or check that caused it; zero for a lease that
	// ran out (Expired) or for Stopped.
	Result commit.Result
	// Checked: Result is a read-only check, not a renewal.
	Checked bool
	// Expired: the lease is lost because no renewal succeeded before its
	// stop point (Result is then zero, or the last renewal's failure);
	// the work must be gone by Lease.LostAt.
	Expired bool
	// Lease is what is known of the lease after it.
	Lease Lease
}

// Keep keeps lease l alive through t until ctx is done, the lease is lost
// or its holder completed it, and calls report (when not nil) with each
// renewal, failure, loss and completion as it happens, from Keep's own
// goroutine. The rules are those of the command line:
//
//   - A renewal every cfg.Interval; while one is in flight none starts.
//   - A renewal waits for the record's lock at most cfg.LockTimeout, at
//     most the lease's duration - interval - skew ([LockWait]) and never
//     past the stop point, so that it lands before the lease counts as
//     lost.
//   - Between renewals the record is checked, read-only, every cfg.Poll:
//     a lease released, revoked or taken over is lost at once; one done
//     is Done (its holder completed it; done is final); an expiry the
//     check sees is left to the local deadline.
//   - A renewal refused (stale token, released, expired, missing) loses
//     the lease; one that fails in a way that may pass (lock timeout, I/O
//     error, corrupt record) is retried until the lease's lost point.
//   - The lease counts as lost at expires_at - clock_skew, by the
//     monotonic clock counted from before the write that last extended
//     it; the work is told to stop (Lost with Expired) at the stop point,
//     a grace before (Lease.StopAt). A stop point found already past the
//     lost point (the keeper's process was stopped meanwhile) first checks
//     the record: a lease its holder completed meanwhile is Done.
//
// Keep returns the last report: Lost or Done, or Stopped when ctx ended
// it first (the lease is still held; finish it). It returns only once no
// renewal or check is in flight, so that the caller may release or
// complete the lease at once.
func Keep(ctx context.Context, t Table, l Lease, cfg Config, report func(Report)) Report {
	k := &keeper{t: t, cfg: cfg, lease: l, report: report,
		renewc: make(chan renewal, 1), checkc: make(chan commit.Result, 1)}
	return k.run(ctx)
}

type keeper struct {
	ctx    context.Context // Keep's: ends the waits of its renewals and checks
	t      Table
	cfg    Config
	lease  Lease
	report func(Report)

	renewc             chan renewal
	checkc             chan commit.Result
	renewing, checking bool
}

// renewal is the result of one renewal and when it began.
type renewal struct {
	started time.Time
	res     commit.Result
}

func (k *keeper) say(r Report) {
	r.Lease = k.lease
	if k.report != nil {
		k.report(r)
	}
}

func (k *keeper) stopAt() time.Time {
	return k.lease.StopAt(k.cfg.Grace, k.cfg.ClockSkew, k.cfg.Interval)
}

func (k *keeper) run(ctx context.Context) Report {
	k.ctx = ctx
	ticker := time.NewTicker(k.cfg.Interval)
	defer ticker.Stop()
	var pollc <-chan time.Time
	if p := k.cfg.poll(); p > 0 {
		poll := time.NewTicker(p)
		defer poll.Stop()
		pollc = poll.C
	}
	var stopc <-chan time.Time
	stop := time.NewTimer(time.Hour)
	defer stop.Stop()
	resetStop := func() {
		stop.Stop()
		stopc = nil
		if !k.lease.LostAt.IsZero() {
			stop.Reset(time.Until(k.stopAt()))
			stopc = stop.C
		}
	}
	resetStop()
	if k.lease.LostAt.IsZero() {
		// Not known at all: what the record says now is the lost point
		// until the first renewal.
		k.checking = true
		go k.check()
	}
	for {
		select {
		case <-ctx.Done():
			return k.finish(Report{Event: Stopped})
		case <-ticker.C:
			if k.renewing {
				continue
			}
			wait := k.lockWait()
			if wait <= 0 && !k.lease.LostAt.IsZero() {
				continue // past the stop point: the timer says so
			}
			k.renewing = true
			go k.renew(wait)
		case r := <-k.renewc:
			k.renewing = false
			if end, ok := k.renewed(r); ok {
				return k.finish(end)
			}
			resetStop()
		case <-pollc:
			if k.checking || k.renewing {
				continue
			}
			k.checking = true
			go k.check()
		case r := <-k.checkc:
			k.checking = false
			if end, ok := k.checked(r); ok {
				return k.finish(end)
			}
			resetStop()
		case <-stopc:
			if rep, done := k.doneMeanwhile(); done {
				k.say(rep)
				return k.finish(rep)
			}
			end := Report{Event: Lost, Expired: true}
			k.say(end)
			return k.finish(end)
		}
	}
}

// lateStop is how late a stop timer must fire for the keeper to take it
// that its process was not running: far more than a timer's delay on a
// loaded machine.
const lateStop = time.Second

// doneMeanwhile is the check at a stop point that is already past the
// lost point: the keeper itself was not running (its process stopped, a
// suspended machine), so that neither the renewals nor the checks it
// would have made could tell it that the lease's holder had completed it
// meanwhile. Done is final: such a lease is Done, not lost, and the work
// may finish in peace. A stop point reached in time (renewals failing)
// is not checked: the work must be told to stop now, and a check would
// only wait on the same filesystem. Late is a stop timer that fired more
// than lateStop after its time, and past the lost point.
func (k *keeper) doneMeanwhile() (Report, bool) {
	if k.lease.LostAt.IsZero() || time.Until(k.lease.LostAt) > 0 || time.Since(k.stopAt()) < lateStop {
		return Report{}, false
	}
	var r commit.Result
	if k.checking {
		r = <-k.checkc
		k.checking = false
	} else {
		r = k.t.Check(k.ctx, k.lease.Item)
	}
	if ev, ok := Checked(r.Outcome); ok && ev == Done {
		return Report{Event: Done, Result: r, Checked: true}, true
	}
	return Report{}, false
}

// lockWait is the lock wait of a renewal starting now (see Keep).
func (k *keeper) lockWait() time.Duration {
	wait := k.cfg.LockTimeout
	if d := k.lease.Duration; d > 0 {
		wait = min(wait, LockWait(k.cfg.LockTimeout.Seconds(), d, k.cfg.Interval.Seconds(), k.cfg.ClockSkew.Seconds()))
	}
	if !k.lease.LostAt.IsZero() {
		wait = min(wait, time.Until(k.stopAt()))
	}
	return wait
}

func (k *keeper) renew(wait time.Duration) {
	started := time.Now()
	k.renewc <- renewal{started, k.t.Renew(k.ctx, k.lease.Item, k.cfg.TTL.Seconds(), wait)}
}

func (k *keeper) check() { k.checkc <- k.t.Check(k.ctx, k.lease.Item) }

// renewed handles a renewal's result; ok when it ended the lease.
func (k *keeper) renewed(r renewal) (Report, bool) {
	rep := Report{Event: k.lease.Renewal(r.res, r.started, k.cfg.ClockSkew.Seconds()), Result: r.res}
	// A failure that may pass, past the lost point: the lease ran out.
	rep.Expired = rep.Event == Lost && Classify(r.res.Outcome) == Retry
	k.say(rep)
	return rep, rep.Event == Lost || rep.Event == Done
}

// checked handles a read-only check's result; ok when it ended the lease.
func (k *keeper) checked(r commit.Result) (Report, bool) {
	if k.lease.LostAt.IsZero() && r.Record != nil && Classify(r.Outcome) == Renewed {
		k.lease.Observe(r.Record, k.cfg.ClockSkew.Seconds())
	}
	ev, ok := Checked(r.Outcome)
	if !ok {
		return Report{}, false
	}
	rep := Report{Event: ev, Result: r, Checked: true}
	k.say(rep)
	return rep, true
}

// finish waits for what is in flight and returns end. A renewal that
// lands after the lease ended changes nothing (a lease that ran out gets
// its failure as the cause); one that lands after ctx was done is
// reported (a refusal or a completion then ends the lease).
func (k *keeper) finish(end Report) Report {
	if k.renewing {
		if k.cfg.finishing != nil {
			k.cfg.finishing()
		}
		r := <-k.renewc
		k.renewing = false
		switch {
		case end.Event == Stopped:
			if rep, ok := k.renewed(r); ok {
				end = rep
			}
		case end.Expired && end.Result.Item == (commit.Item{}) && Classify(r.res.Outcome) == Retry:
			end.Result = r.res // why the last renewal did not land in time
		}
	}
	if k.checking {
		<-k.checkc
		k.checking = false
	}
	end.Lease = k.lease
	return end
}
