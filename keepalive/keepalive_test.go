package keepalive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

func id(s string) leasefmt.ID {
	sum := sha256.Sum256([]byte(s))
	return leasefmt.ID(hex.EncodeToString(sum[:]))
}

func TestClassify(t *testing.T) {
	want := map[commit.Outcome]Event{
		commit.OK: Renewed, commit.Done: Done,
		commit.StaleToken: Lost, commit.Expired: Lost, commit.Released: Lost, commit.Missing: Lost, commit.Held: Lost, commit.Exists: Lost,
		commit.LockTimeout: Retry, commit.IOError: Retry, commit.Corrupt: Retry,
	}
	for o, ev := range want {
		if got := Classify(o); got != ev {
			t.Errorf("Classify(%s) = %d, want %d", o.Reason(), got, ev)
		}
	}
}

// TestLockWait: a renewal waits at most ttl - interval - skew.
func TestLockWait(t *testing.T) {
	if got := LockWait(10, 120, 30, 1); got != 10*time.Second {
		t.Errorf("LockWait(10, 120, 30, 1) = %v, want the lock timeout", got)
	}
	if got := LockWait(10, 4, 1, 1); got != 2*time.Second {
		t.Errorf("LockWait(10, 4, 1, 1) = %v, want ttl - interval - skew = 2s", got)
	}
}

// TestLeaseLostAt: the lost point counts from before the write, on the
// monotonic clock, at the lease's own duration less the skew.
func TestLeaseLostAt(t *testing.T) {
	var l Lease
	started := time.Now()
	l.Extend(started, &leasefmt.Record{RenewedAt: 1000, ExpiresAt: 1030}, 2)
	if l.Duration != 30 || !l.LostAt.Equal(started.Add(28*time.Second)) || !l.Renewed || l.ExpiresAt != 1030 {
		t.Errorf("after a renewal for 30 s with skew 2: %+v", l)
	}
}

// TestSetRound: renewed leases are kept, lost and done ones dropped for
// good, and a failure that may pass is retried until the lost point.
func TestSetRound(t *testing.T) {
	s := NewSet(10, 1)
	a, b, c, d := commit.Item{ID: id("a"), Token: 1}, commit.Item{ID: id("b"), Token: 1}, commit.Item{ID: id("c"), Token: 1}, commit.Item{ID: id("d"), Token: 1}
	now := leasefmt.Now()
	rec := &leasefmt.Record{RenewedAt: now, ExpiresAt: now + 10}
	started := time.Now()
	out := s.Round([]commit.Result{
		{Item: a, Outcome: commit.OK, Record: rec},
		{Item: b, Outcome: commit.StaleToken},
		{Item: c, Outcome: commit.LockTimeout},
		{Item: d, Outcome: commit.Done},
	}, started)
	for i, want := range []Event{Renewed, Lost, Retry, Done} {
		if out[i].Event != want {
			t.Errorf("result %d: event %d, want %d", i, out[i].Event, want)
		}
	}
	if s.Lease(a) == nil || !s.Lease(a).Renewed || s.Dropped(a) || !s.Dropped(b) || s.Dropped(c) || !s.Dropped(d) {
		t.Errorf("after the first round: a %+v, dropped b %v c %v d %v", s.Lease(a), s.Dropped(b), s.Dropped(c), s.Dropped(d))
	}
	// c was never renewed: its lost point is ttl - skew after it was first
	// seen. A failure past it drops it.
	s.Lease(c).LostAt = time.Now().Add(-time.Millisecond)
	out = s.Round([]commit.Result{{Item: c, Outcome: commit.IOError, Detail: "eio"}}, time.Now())
	if out[0].Event != Lost || !s.Dropped(c) {
		t.Errorf("a failure past the lost point: event %d, dropped %v", out[0].Event, s.Dropped(c))
	}
}

// TestTicker: rounds every interval; a context done stops the wait at
// once.
func TestTicker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tk := NewTicker(10)
	cancel()
	start := time.Now()
	if tk.Wait(ctx) || time.Since(start) > 5*time.Second {
		t.Errorf("a context done did not stop the wait: %v", time.Since(start))
	}
	tk2 := NewTicker(0.05)
	start = time.Now()
	if !tk2.Wait(context.Background()) || !tk2.Wait(context.Background()) {
		t.Fatal("a wait without a context done ended early")
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("two rounds of 50 ms took %v", d)
	}
}
