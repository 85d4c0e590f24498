package keepalive

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/leasefmt"
)

// changes lets a test wait on a condition over state that other
// goroutines change: they call poke after each change, and until waits
// for the condition to hold, re-reading it after each poke.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

func (c *changes) poke() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

func (c *changes) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// until waits until cond holds (at most a minute: a keeper stuck fails).
func (c *changes) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		next := c.next()
		if cond() {
			return
		}
		select {
		case <-next:
		case <-timeout:
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// fakeTable is one lease's record in memory, with the failures a test
// asks for. Every method is safe for the keeper's goroutines.
type fakeTable struct {
	mu sync.Mutex
	// status is the record's: leased, released (revoked) or done.
	status    string
	token     int64
	duration  float64
	expiresAt float64
	// locked makes renewals wait their whole lock wait and time out;
	// refuse makes them fail with that outcome instead.
	locked bool
	refuse commit.Outcome
	// block, when set, holds renewals until it is closed.
	block chan struct{}

	renewals, checks, inFlight int
	waits                      []time.Duration
	landed                     []time.Time // when each renewal returned
	changed                    changes     // poked as each renewal begins and ends
}

func newFake(duration float64) *fakeTable {
	now := leasefmt.Now()
	return &fakeTable{status: "leased", token: 1, duration: duration, expiresAt: now + duration}
}

func (f *fakeTable) record(now float64) *leasefmt.Record {
	return &leasefmt.Record{ID: id("kept"), Token: f.token, Status: leasefmt.Status(f.status), RenewedAt: f.expiresAt - f.duration, ExpiresAt: f.expiresAt, ClaimedAt: now}
}

func (f *fakeTable) item() commit.Item { return commit.Item{ID: id("kept"), Token: 1} }

func (f *fakeTable) Renew(_ context.Context, it commit.Item, ttl float64, wait time.Duration) commit.Result {
	f.mu.Lock()
	f.renewals++
	f.inFlight++
	f.waits = append(f.waits, wait)
	locked, block := f.locked, f.block
	f.mu.Unlock()
	f.changed.poke()
	defer f.changed.poke()
	if block != nil {
		<-block
	}
	if locked {
		time.Sleep(wait)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight--
	f.landed = append(f.landed, time.Now())
	r := commit.Result{Item: it, Token: f.token}
	switch {
	case locked:
		r.Outcome, r.Detail = commit.LockTimeout, "lock wait: not granted"
	case f.refuse != commit.OK:
		r.Outcome = f.refuse
	case f.status == "done":
		r.Outcome = commit.Done
	case f.status == "released":
		r.Outcome = commit.Released
	default:
		now := leasefmt.Now()
		if ttl == 0 {
			ttl = f.duration
		}
		f.duration, f.expiresAt = ttl, now+ttl
		r.Outcome, r.Record = commit.OK, f.record(now)
	}
	return r
}

func (f *fakeTable) Check(_ context.Context, it commit.Item) commit.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks++
	r := commit.Result{Item: it, Token: f.token, Record: f.record(leasefmt.Now())}
	switch f.status {
	case "done":
		r.Outcome = commit.Done
	case "released":
		r.Outcome = commit.Released
	}
	return r
}

func (f *fakeTable) set(fn func(f *fakeTable)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeTable) counts() (renewals, checks, inFlight int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.renewals, f.checks, f.inFlight
}

// reports collects what a keeper reported.
type reports struct {
	mu      sync.Mutex
	all     []Report
	changed changes // poked at each report
}

func (r *reports) add(rep Report) {
	r.mu.Lock()
	r.all = append(r.all, rep)
	r.mu.Unlock()
	r.changed.poke()
}

// await waits until n reports of ev came.
func (r *reports) await(t *testing.T, ev Event, n int) {
	t.Helper()
	r.changed.until(t, fmt.Sprintf("%d reports of event %d", n, ev), func() bool { return r.count(ev) >= n })
}

func (r *reports) events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, rep := range r.all {
		out = append(out, rep.Event)
	}
	return out
}

func (r *reports) count(ev Event) int {
	n := 0
	for _, e := range r.events() {
		if e == ev {
			n++
		}
	}
	return n
}

// keepIn runs Keep in the background; the returned function waits for its
// result (at most a minute, so that a keeper that never ends fails).
func keepIn(t *testing.T, ctx context.Context, tb Table, l Lease, cfg Config, rs *reports) func() Report {
	t.Helper()
	done := make(chan Report, 1)
	go func() { done <- Keep(ctx, tb, l, cfg, rs.add) }()
	return func() Report {
		t.Helper()
		select {
		case r := <-done:
			return r
		case <-time.After(time.Minute):
			t.Fatal("Keep did not return within a minute")
		}
		return Report{}
	}
}

func granted(f *fakeTable, skew time.Duration) Lease {
	return Granted(f.item(), time.Now(), f.record(leasefmt.Now()), skew)
}

// TestKeepRenewsUntilStopped: renewals every interval keep the lease; the
// context ends the keeping (Stopped) with nothing in flight.
func TestKeepRenewsUntilStopped(t *testing.T) {
	f := newFake(2)
	ctx, cancel := context.WithCancel(context.Background())
	var rs reports
	wait := keepIn(t, ctx, f, granted(f, 100*time.Millisecond), Config{Interval: 20 * time.Millisecond, LockTimeout: time.Second, ClockSkew: 100 * time.Millisecond, Poll: 7 * time.Millisecond}, &rs)
	f.changed.until(t, "5 renewals", func() bool { n, _, _ := f.counts(); return n >= 5 })
	cancel()
	end := wait()
	renewals, checks, inFlight := f.counts()
	if end.Event != Stopped || inFlight != 0 || rs.count(Renewed) != renewals || renewals < 5 || checks == 0 {
		t.Fatalf("after cancel: %v, %d renewals (%d reported), %d checks, %d in flight; events %v", end.Event, renewals, rs.count(Renewed), checks, inFlight, rs.events())
	}
	if !end.Lease.Renewed || end.Lease.Duration != 2 {
		t.Errorf("the lease as Keep ended: %+v", end.Lease)
	}
}

// TestKeepLostOnRelease: a release or revoke from outside is found by the
// read-only check between renewals, long before the next renewal.
func TestKeepLostOnRelease(t *testing.T) {
	for _, c := range []struct {
		status string
		want   Event
	}{{"released", Lost}, {"done", Done}} {
		f := newFake(600)
		var rs reports
		wait := keepIn(t, context.Background(), f, granted(f, time.Second), Config{Interval: time.Hour, LockTimeout: time.Second, ClockSkew: time.Second, Poll: 10 * time.Millisecond}, &rs)
		f.set(func(f *fakeTable) { f.status = c.status })
		end := wait()
		renewals, _, _ := f.counts()
		if end.Event != c.want || !end.Checked || renewals != 0 || rs.count(c.want) != 1 {
			t.Errorf("record %s: ended %v (checked %v) after %d renewals; events %v", c.status, end.Event, end.Checked, renewals, rs.events())
		}
	}
}

// TestKeepLostOnRefusedRenewal: a renewal refused ends the lease at once;
// one that finds the lease done ends it as Done.
func TestKeepLostOnRefusedRenewal(t *testing.T) {
	f := newFake(600)
	f.refuse = commit.StaleToken
	var rs reports
	end := keepIn(t, context.Background(), f, granted(f, time.Second), Config{Interval: 10 * time.Millisecond, LockTimeout: time.Second, ClockSkew: time.Second, Poll: -1}, &rs)()
	if end.Event != Lost || end.Checked || end.Expired || end.Result.Outcome != commit.StaleToken {
		t.Errorf("a stale token: %+v", end)
	}
}

// TestKeepLockWaitBoundedAndLost: with the record's lock never free, each
// renewal waits at most ttl - interval - skew and never past the stop
// point; they are retried, and the lease is lost (Expired) at the stop
// point, a grace before the lost point.
func TestKeepLockWaitBoundedAndLost(t *testing.T) {
	f := newFake(1)
	f.locked = true
	cfg := Config{Interval: 100 * time.Millisecond, LockTimeout: time.Hour, ClockSkew: 100 * time.Millisecond, Grace: 200 * time.Millisecond, Poll: -1}
	l := granted(f, cfg.ClockSkew)
	stop := l.StopAt(cfg.Grace, cfg.ClockSkew, cfg.Interval)
	if g := l.Grace(cfg.Grace, cfg.ClockSkew, cfg.Interval); g != 200*time.Millisecond {
		t.Fatalf("grace %v, want the 200ms asked for: it fits (1 s - 0.1 - 0.1) / 2", g)
	}
	var rs reports
	started := time.Now()
	end := keepIn(t, context.Background(), f, l, cfg, &rs)()
	if end.Event != Lost || !end.Expired || !end.Lease.LostAt.Equal(l.LostAt) {
		t.Fatalf("renewals that never get the lock: %+v; events %v", end, rs.events())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// The last renewal may still have been waiting at the stop point: it
	// lands after the loss, which it cannot change, and is not reported.
	if len(f.waits) == 0 || rs.count(Retry) < len(f.waits)-1 {
		t.Fatalf("%d renewals, %d retries reported", len(f.waits), rs.count(Retry))
	}
	// The keeper computed waits[i] after the renewal before it landed
	// (after Keep began, for the first): from then, the wait must end by
	// the stop point. A keeper without the stop point's bound fails at
	// once: its first wait is 800 ms, the stop point 700 ms after the
	// grant.
	for i, w := range f.waits {
		from := started
		if i > 0 {
			from = f.landed[i-1]
		}
		if w > 800*time.Millisecond || from.Add(w).After(stop) {
			t.Errorf("renewal %d waited up to %v for the lock: more than ttl - interval - skew = 800ms or than the %v from its start to the stop point", i, w, stop.Sub(from))
		}
	}
}

// TestKeepRetriesUntilRenewed: a renewal that fails in a way that may pass
// is retried, and the next success keeps the lease.
func TestKeepRetriesUntilRenewed(t *testing.T) {
	f := newFake(5)
	f.refuse = commit.IOError
	ctx, cancel := context.WithCancel(context.Background())
	var rs reports
	wait := keepIn(t, ctx, f, granted(f, 100*time.Millisecond), Config{Interval: 10 * time.Millisecond, LockTimeout: time.Second, ClockSkew: 100 * time.Millisecond, Poll: -1}, &rs)
	rs.await(t, Retry, 2)
	f.set(func(f *fakeTable) { f.refuse = commit.OK })
	rs.await(t, Renewed, 1)
	cancel()
	if end := wait(); end.Event != Stopped || !end.Lease.Renewed {
		t.Errorf("after the failures passed: %+v; events %v", end, rs.events())
	}
}

// TestKeepWaitsForRenewalInFlight: Keep returns only when the renewal in
// flight has landed, and a renewal that lands refused after the context
// ended still ends the lease as lost. The renewal is held until the
// keeper, its context done, waits for it (Config.finishing): a keeper
// that returned without waiting leaves it in flight.
func TestKeepWaitsForRenewalInFlight(t *testing.T) {
	f := newFake(600)
	f.block = make(chan struct{})
	f.refuse = commit.Released
	ctx, cancel := context.WithCancel(context.Background())
	var rs reports
	cfg := Config{Interval: 5 * time.Millisecond, LockTimeout: time.Second, ClockSkew: time.Second, Poll: -1}
	cfg.finishing = func() { close(f.block) }
	wait := keepIn(t, ctx, f, granted(f, time.Second), cfg, &rs)
	f.changed.until(t, "a renewal in flight", func() bool { _, _, n := f.counts(); return n == 1 })
	cancel()
	end := wait()
	if _, _, n := f.counts(); n != 0 || end.Event != Lost || end.Result.Outcome != commit.Released {
		t.Errorf("Keep returned %+v with %d renewals in flight", end, n)
	}
}

// TestKeepUnknownLease: a lease known by nothing (no expiry) is checked
// first, and its lost point is then the record's expiry less the skew.
func TestKeepUnknownLease(t *testing.T) {
	f := newFake(0.5)
	f.locked = true // renewals never land: the record's expiry decides
	var rs reports
	end := keepIn(t, context.Background(), f, Expiring(f.item(), time.Time{}, 100*time.Millisecond),
		Config{Interval: 50 * time.Millisecond, LockTimeout: time.Hour, ClockSkew: 100 * time.Millisecond, Poll: -1}, &rs)()
	if _, checks, _ := f.counts(); end.Event != Lost || !end.Expired || checks != 1 || end.Lease.Duration != 0.5 {
		t.Errorf("a lease of unknown expiry, never renewed: %+v after %d checks", end, checks)
	}
}

// TestKeepRealTable: through a real table: the lease is renewed, and a
// revoke from another store is found between renewals.
func TestKeepRealTable(t *testing.T) {
	root := filepath.Join(t.TempDir(), "table")
	open := func() *commit.Store {
		t.Helper()
		st, err := commit.Open(root, commit.Options{Create: &leasefmt.Table{WorkShards: 4, TargetShards: 4, CreatedAt: leasefmt.Now()}, ClockSkew: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	if err := durable.MkdirRoot(root); err != nil {
		t.Fatal(err)
	}
	st, other := open(), open()
	it := commit.Item{ID: id("real")}
	started := time.Now()
	r := st.Claim(context.Background(), []commit.Item{it}, "keeper", 1)[0]
	if r.Outcome != commit.OK {
		t.Fatalf("claim: %+v", r)
	}
	it.Token = r.Token
	var rs reports
	wait := keepIn(t, context.Background(), Store(st), Granted(it, started, r.Record, 100*time.Millisecond),
		Config{Interval: 100 * time.Millisecond, LockTimeout: 10 * time.Second, ClockSkew: 100 * time.Millisecond, Poll: 20 * time.Millisecond}, &rs)
	rs.await(t, Renewed, 3) // past the claim's own second
	if rev := other.Revoke(context.Background(), []commit.Item{it})[0]; rev.Outcome != commit.OK {
		t.Fatalf("revoke: %+v", rev)
	}
	end := wait()
	if end.Event != Lost || end.Result.Outcome != commit.Released {
		t.Fatalf("after a revoke: %+v; events %v", end, rs.events())
	}
	if st.LockTimeout() != 10*time.Second {
		// commit.Open's default: the renewals' waits are bounded through
		// their contexts, never by changing the store
		t.Errorf("the store's lock timeout is %v after Keep", st.LockTimeout())
	}
}

// TestKeepDoneWhileStopped: the keeper's process was stopped (SIGSTOP)
// past the lease's lost point while its holder completed the lease: when
// it runs again, the lease is Done, not lost, so that the work is not
// stopped. A lease still leased then is lost.
func TestKeepDoneWhileStopped(t *testing.T) {
	for _, c := range []struct {
		status string
		want   Event
	}{{"done", Done}, {"leased", Lost}} {
		f := newFake(2)
		f.set(func(f *fakeTable) { f.status = c.status; f.refuse = commit.IOError })
		// Granted 10 s ago for 2 s: the stop and lost points are long past,
		// as for a keeper that was not running.
		l := Granted(f.item(), time.Now().Add(-10*time.Second), f.record(leasefmt.Now()), 100*time.Millisecond)
		var rs reports
		end := keepIn(t, context.Background(), f, l, Config{Interval: time.Hour, LockTimeout: time.Second, ClockSkew: 100 * time.Millisecond, Grace: time.Second, Poll: -1}, &rs)()
		if end.Event != c.want {
			t.Errorf("record %s: Keep ended %v (%v), want %v", c.status, end.Event, rs.events(), c.want)
		}
	}
}
