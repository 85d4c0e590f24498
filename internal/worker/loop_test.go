package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/config"
	"github.com/leasetool/lease/keepalive"
	"github.com/leasetool/lease/leasefmt"
)

// TestNewTiming: an interval of 0 is config.RenewInterval of the ttl, an
// interval that leaves a renewal no time before ttl - skew is refused,
// and the finish waits for a lock no longer than a renewal would.
func TestNewTiming(t *testing.T) {
	t.Parallel()
	tm, err := NewTiming(90, 0, 0, 10, 1, 3600)
	if err != nil || tm.Interval != time.Duration(config.RenewInterval(90)*float64(time.Second)) || tm.Interval != 30*time.Second {
		t.Errorf("NewTiming(ttl 90, interval 0) = %+v, %v; want the interval 30 s", tm, err)
	}
	if got, want := tm.FinishWait(), keepalive.LockWait(3600, 90, 30, 1); got != want || got >= time.Hour {
		t.Errorf("FinishWait = %v, want %v (a renewal's, not the lock timeout's)", got, want)
	}
	if k := tm.Keep(); k.Interval != tm.Interval || k.Grace != 10*time.Second || k.ClockSkew != time.Second || k.LockTimeout != time.Hour {
		t.Errorf("Keep = %+v", k)
	}
	for _, iv := range []float64{-1, 9, 12} {
		if _, err := NewTiming(10, 0, iv, 10, 1, 10); err == nil || !strings.Contains(err.Error(), "renewal interval") {
			t.Errorf("interval %g of ttl 10 - skew 1: %v, want refused", iv, err)
		}
	}
}

// loopStore is a store with the items named queued.
func loopStore(t *testing.T, names ...string) *commit.Store {
	t.Helper()
	st := testStore(t)
	var its []commit.Item
	for _, n := range names {
		its = append(its, commit.Item{ID: testID(n)})
	}
	for _, r := range st.Enqueue(context.Background(), its) {
		if r.Outcome != commit.OK {
			t.Fatalf("enqueue: %v", r.Detail)
		}
	}
	return st
}

func loopTiming(t *testing.T) Timing {
	tm, err := NewTiming(60, 0, 0, 1, 0.1, 10)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestLoopEnds: the loop runs every item and ends empty; a run that says
// its work could not start ends it (cannot-run) after finishing the item
// with no attempt; a Start that fails releases the item untouched and
// ends it; MaxItems ends it.
func TestLoopEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	succeed := func(ctx context.Context, h Held, finish func(End) Finished) Ran {
		return Ran{Finished: finish(End{Complete: true, Succeeded: true})}
	}

	st := loopStore(t, "a", "b", "c")
	var ended []Ended
	l := &Loop{Store: st, Owner: "test", Timing: loopTiming(t), MaxAttempts: 3, Outage: &Outage{}, Run: succeed,
		Done: func(d Ended) { ended = append(ended, d) }}
	if s := l.Work(ctx); s.How != EndEmpty || s.Items != 3 || s.Finishes[HowDone] != 3 || len(ended) != 3 || ended[2].N != 3 {
		t.Errorf("three items: %+v, %d ended", s, len(ended))
	}

	st = loopStore(t, "not-started")
	l = &Loop{Store: st, Owner: "test", Timing: loopTiming(t), MaxAttempts: 1, Outage: &Outage{},
		Run: func(ctx context.Context, h Held, finish func(End) Finished) Ran {
			return Ran{Finished: finish(End{Complete: true}), Stop: errors.New("not found")}
		}}
	if s := l.Work(ctx); s.How != EndCannotRun || s.Items != 1 || s.Finishes[HowReleased] != 1 {
		t.Errorf("cannot run: %+v", s)
	}
	if rec := status(t, st, testID("not-started")); rec.Status != leasefmt.Released || rec.Attempts != 0 {
		t.Errorf("an item whose work could not start: %+v, want released with no attempt", rec)
	}

	st = loopStore(t, "no-start")
	l = &Loop{Store: st, Owner: "test", Timing: loopTiming(t), MaxAttempts: 1, Outage: &Outage{}, Run: succeed,
		Start: func() error { return errors.New("no supervisor") }}
	if s := l.Work(ctx); s.How != EndError || !s.Starting || s.Items != 0 {
		t.Errorf("start failed: %+v", s)
	}
	if rec := status(t, st, testID("no-start")); rec.Status != leasefmt.Released || rec.Attempts != 0 {
		t.Errorf("an item granted to a worker that could not start: %+v, want released with no attempt", rec)
	}

	st = loopStore(t, "x", "y")
	l = &Loop{Store: st, Owner: "test", Timing: loopTiming(t), MaxItems: 1, Outage: &Outage{}, Run: succeed}
	if s := l.Work(ctx); s.How != EndMaxItems || s.Items != 1 {
		t.Errorf("max items 1: %+v", s)
	}
}
