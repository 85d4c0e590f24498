package commit

import (
	"testing"
	"time"
)

// A batch of any size keeps at most maxLatencies latencies, a uniform
// sample of them: the percentiles of a million records cost 256 KiB.
func TestLatenciesBounded(t *testing.T) {
	t.Parallel()
	var s Stats
	n := 4 * maxLatencies
	for i := range n {
		s.addLatency(time.Duration(i) * time.Microsecond)
	}
	snap := s.Snapshot(time.Second)
	if len(snap.Latencies) != maxLatencies {
		t.Fatalf("%d latencies kept of %d, want %d", len(snap.Latencies), n, maxLatencies)
	}
	// The sample's median is near the whole's (n/2 µs), not the first ones'.
	want := float64(n/2) * 1e-6
	if p := snap.LatencyP50; p < 0.9*want || p > 1.1*want {
		t.Errorf("p50 %v of the sample, want about %v", p, want)
	}
}
