package commands

// The pieces of status --watch that need no table: --interval's forms,
// and the rates' window, which stays bounded however short the interval.

import (
	"math"
	"testing"
	"time"
)

func TestParseInterval(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]time.Duration{"2s": 2 * time.Second, "500ms": 500 * time.Millisecond, "1m30s": 90 * time.Second,
		"0.5": 500 * time.Millisecond, "3": 3 * time.Second, "24h": 24 * time.Hour, "86400": 24 * time.Hour} {
		if got, err := parseInterval(s); err != nil || got != want {
			t.Errorf("--interval %s: %v %v, want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "0s", "-1", "-1ms", "NaN", "nan", "Inf", "+Inf", "1e300", "86401", "24h1s", "2 s", "0.0000000001", "1d"} {
		if got, err := parseInterval(s); err == nil {
			t.Errorf("--interval %q accepted as %v", s, got)
		}
	}
}

// TestRateWindow: items finished at 10 a second, counted every 100 ms for
// 20 minutes: the rates are 10/s over 1 and 5 minutes, the samples kept
// are about one a second over 5 minutes whatever the interval, and a
// count that goes down (lease retry) gives 0, not a negative rate.
func TestRateWindow(t *testing.T) {
	t.Parallel()
	var r rateWindow
	if _, _, ok := r.rate(rateShort); ok {
		t.Fatal("a rate before any count")
	}
	t0 := time.Unix(1e9, 0)
	r.add(t0, 0)
	if _, _, ok := r.rate(rateShort); ok {
		t.Fatal("a rate from one count")
	}
	var at time.Time
	for i := 1; i <= 12000; i++ {
		at = t0.Add(time.Duration(i) * 100 * time.Millisecond)
		r.add(at, int64(i)) // 10 items a second
		if len(r.samples) > int(rateLong/time.Second)+3 {
			t.Fatalf("after %d counts: %d samples kept", i, len(r.samples))
		}
	}
	for _, w := range []time.Duration{rateShort, rateLong} {
		perS, span, ok := r.rate(w)
		if !ok || math.Abs(perS-10) > 1e-9 || span < w || span > w+time.Second {
			t.Errorf("rate over %v: %g/s over %v (%v), want 10/s over %v", w, perS, span, ok, w)
		}
	}
	// Young: over the time since the first count.
	var y rateWindow
	y.add(t0, 5)
	y.add(t0.Add(4*time.Second), 25)
	if perS, span, ok := y.rate(rateShort); !ok || perS != 5 || span != 4*time.Second {
		t.Errorf("young watch: %g/s over %v (%v), want 5/s over 4s", perS, span, ok)
	}
	r.add(at.Add(time.Second), 0)
	if perS, _, ok := r.rate(rateShort); !ok || perS != 0 {
		t.Errorf("after lease retry: %g/s (%v), want 0", perS, ok)
	}
}
