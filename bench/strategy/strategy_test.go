package strategy_test

import (
	"context"
	"testing"

	"github.com/leasetool/lease/bench/strategy"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
)

// TestStrategiesCountTheirSyncs: a renewal of N leases in K shards makes,
// through each strategy's wrapper, the syncs of the seed's cost model (N
// file and K directory fsyncs for concurrent and sequential, N of each for
// one-at-a-time, none and one syncfs for the floor), and renews every
// lease.
func TestStrategiesCountTheirSyncs(t *testing.T) {
	const n, k = 24, 4
	for _, tc := range []struct {
		kind                 strategy.Kind
		files, dirs, syncfss int64
	}{
		{strategy.Concurrent, n, k, 0},
		{strategy.Sequential, n, k, 0},
		{strategy.OneAtATime, n, n, 0},
		{strategy.NoSync, 0, 0, 1},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			var w *strategy.FS
			st, err := commit.Open(t.TempDir(), commit.Options{Create: &leasefmt.Table{WorkShards: k, TargetShards: 4, CreatedAt: 1000}, Writers: writersOf(tc.kind), Wrap: func(f seam.FS) seam.FS { w = strategy.Wrap(tc.kind, f); return w }})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			items := spreadIDs(t, n, k)
			for i, r := range st.At(1000).Claim(context.Background(), items, "bench", 1e9) {
				if r.Outcome != commit.OK {
					t.Fatalf("claim: %s %s", r.Outcome.Reason(), r.Detail)
				}
				items[i].Token = r.Token
			}
			before := w.Counts()
			for _, r := range st.At(1001).Renew(context.Background(), items, 1e9) {
				if r.Outcome != commit.OK {
					t.Fatalf("renew: %s %s", r.Outcome.Reason(), r.Detail)
				}
			}
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			got := w.Counts()
			if f, d, s := got.FileSyncs-before.FileSyncs, got.DirectorySyncs-before.DirectorySyncs, got.Syncfs-before.Syncfs; f != tc.files || d != tc.dirs || s != tc.syncfss {
				t.Errorf("renewal of %d leases in %d shards: %d file, %d directory fsyncs, %d syncfs; want %d, %d, %d", n, k, f, d, s, tc.files, tc.dirs, tc.syncfss)
			}
			for _, it := range items {
				rec, err := st.Read(context.Background(), leasefmt.Work, it.ID)
				if err != nil || rec == nil || rec.RenewedAt != 1001 {
					t.Errorf("%s after the renewal: %+v, %v", it.ID.Short(), rec, err)
				}
			}
		})
	}
}

// writersOf is the writer pool the engine runs a strategy with.
func writersOf(k strategy.Kind) int {
	if k.Writers() > 0 {
		return k.Writers()
	}
	return commit.DefaultWriters
}

// TestParse: every strategy's name parses back to it; others do not.
func TestParse(t *testing.T) {
	for _, k := range []strategy.Kind{strategy.Concurrent, strategy.Sequential, strategy.OneAtATime, strategy.NoSync} {
		if got, err := strategy.Parse(k.String()); err != nil || got != k {
			t.Errorf("Parse(%q) = %v, %v", k, got, err)
		}
	}
	if _, err := strategy.Parse("f324"); err == nil {
		t.Error("Parse(f324) succeeded")
	}
}
