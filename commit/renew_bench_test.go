package commit_test

import (
	"context"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// BenchmarkRenew renews 1,024 leases in 16 shards in one batch (the
// issue-41 cell) through the real filesystem of the test's temp dir: what
// one renew-batch round costs the engine, flushes included.
func BenchmarkRenew(b *testing.B) {
	root := b.TempDir()
	st, err := commit.Open(root, commit.Options{Create: &leasefmt.Table{WorkShards: 16, TargetShards: 4, CreatedAt: 1000}})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	items := make([]commit.Item, 1024)
	for i := range items {
		items[i].ID = shardID(i%16, i)
	}
	for i, r := range st.At(1000).Claim(context.Background(), items, "bench", 1e6) {
		if r.Outcome != commit.OK {
			b.Fatalf("claim %d: %s", i, r.Outcome.Reason())
		}
		items[i].Token = r.Token
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i, r := range st.At(1001+float64(n)).Renew(context.Background(), items, 1e6) {
			if r.Outcome != commit.OK {
				b.Fatalf("renew %d: %s %s", i, r.Outcome.Reason(), r.Detail)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(items)), "µs/record")
}
