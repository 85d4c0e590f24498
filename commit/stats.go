package commit

import (
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasetool/lease/commit/durable"
)

// Stats counts what a batch command did (docs/design.md#statistics). It is safe for
// concurrent use; Snapshot gives the plain numbers.
type Stats struct {
	// Counts are the durability layer's: file and directory fsyncs, and
	// the steps tried again after a transient error.
	durable.Counts
	Batches  atomic.Int64
	Renewals atomic.Int64 // records written and made durable
	Lost     atomic.Int64 // records refused: stale, expired, held, done, released, missing
	Failures atomic.Int64 // corrupt records, lock timeouts, I/O errors
	// Attempted counts the items a batch has finished with, whatever the
	// outcome, as it runs: for a progress display (not in Snapshot).
	Attempted atomic.Int64
	// Dequeued counts the queue entries of done items removed (not in
	// Snapshot).
	Dequeued atomic.Int64
	// Marked counts the status markers made (docs/design.md#statistics; not
	// in Snapshot).
	Marked atomic.Int64
	// Tallied counts the links made in the tally, Untrusted the times a
	// writer could not keep it and untrusted it (tally.go; not in
	// Snapshot).
	Tallied, Untrusted atomic.Int64
	// HeldRenamed and HeldRemoved count the held/ names a claim renamed
	// (a lease renewed since) or removed (an item finished) after reading
	// them (held.go; not in Snapshot).
	HeldRenamed, HeldRemoved atomic.Int64

	mu        sync.Mutex
	latencies []float64 // seconds, per written record, until its directory was fsynced (a sample: addLatency)
	seen      int64     // latencies seen
}

// maxLatencies bounds the latencies Stats keeps: beyond it a uniform
// sample (reservoir sampling) of every latency seen, so that a batch of
// millions of records costs 256 KiB for its percentiles, not 8 bytes a
// record.
const maxLatencies = 1 << 15

func (s *Stats) addLatency(d time.Duration) {
	s.mu.Lock()
	s.seen++
	if len(s.latencies) < maxLatencies {
		s.latencies = append(s.latencies, d.Seconds())
	} else if j := rand.Int64N(s.seen); j < maxLatencies {
		s.latencies[j] = d.Seconds()
	}
	s.mu.Unlock()
}

// Snapshot is a plain copy of Stats that can be summed over ranks and
// printed as JSON.
type Snapshot struct {
	Batches               int64     `json:"batches"`
	Renewals              int64     `json:"renewals"`
	Lost                  int64     `json:"lost"`
	FileSyncs             int64     `json:"file_syncs"`
	DirectorySyncs        int64     `json:"directory_syncs"`
	DirectorySyncsAvoided int64     `json:"directory_syncs_avoided"`
	Syncfs                int64     `json:"syncfs,omitempty"`
	Failures              int64     `json:"failures"`
	Retries               int64     `json:"retries,omitempty"`
	SparesUsed            int64     `json:"spares_used,omitempty"`
	SparesRecycled        int64     `json:"spares_recycled,omitempty"`
	DurationS             float64   `json:"duration_s"`
	LatencyP50            float64   `json:"latency_p50_s"`
	LatencyP95            float64   `json:"latency_p95_s"`
	LatencyP99            float64   `json:"latency_p99_s"`
	Ranks                 int       `json:"ranks,omitempty"`
	CollectiveS           float64   `json:"collective_s,omitempty"`
	Latencies             []float64 `json:"-"`
}

// Snapshot returns the counters with duration d.
func (s *Stats) Snapshot(d time.Duration) Snapshot {
	s.mu.Lock()
	lat := append([]float64(nil), s.latencies...)
	s.mu.Unlock()
	out := Snapshot{
		Batches:        s.Batches.Load(),
		Renewals:       s.Renewals.Load(),
		Lost:           s.Lost.Load(),
		FileSyncs:      s.FileSyncs.Load(),
		DirectorySyncs: s.DirectorySyncs.Load(),
		Syncfs:         s.Syncfs.Load(),
		Failures:       s.Failures.Load(),
		Retries:        s.Retries.Load(),
		SparesUsed:     s.SparesUsed.Load(),
		SparesRecycled: s.SparesRecycled.Load(),
		DurationS:      d.Seconds(),
		Latencies:      lat,
	}
	out.finish()
	return out
}

// Add sums o into s (over MPI ranks); the duration is the longest.
func (s *Snapshot) Add(o Snapshot) {
	s.Batches += o.Batches
	s.Renewals += o.Renewals
	s.Lost += o.Lost
	s.FileSyncs += o.FileSyncs
	s.DirectorySyncs += o.DirectorySyncs
	s.Syncfs += o.Syncfs
	s.Failures += o.Failures
	s.Retries += o.Retries
	s.SparesUsed += o.SparesUsed
	s.SparesRecycled += o.SparesRecycled
	s.DurationS = math.Max(s.DurationS, o.DurationS)
	s.Latencies = append(s.Latencies, o.Latencies...)
	s.finish()
}

func (s *Snapshot) finish() {
	s.DirectorySyncsAvoided = s.Renewals - s.DirectorySyncs
	if s.DirectorySyncsAvoided < 0 {
		s.DirectorySyncsAvoided = 0
	}
	sort.Float64s(s.Latencies)
	s.LatencyP50 = percentile(s.Latencies, 0.50)
	s.LatencyP95 = percentile(s.Latencies, 0.95)
	s.LatencyP99 = percentile(s.Latencies, 0.99)
}

// percentile of sorted xs by the nearest-rank method; 0 when empty.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(xs)))) - 1
	if i < 0 {
		i = 0
	}
	return xs[i]
}
