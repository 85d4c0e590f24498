package strategy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/leasetool/lease/bench/strategy"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
)

// BenchmarkRenew renews N leases spread evenly over K work shards with each
// commit strategy, on the kernel filesystem. One op is one whole batch of N
// renewals; ns/record is the time of one op divided by N. dir_syncs/op and
// file_syncs/op count the syncs that reached the filesystem through the
// strategy's wrapper, so a run also checks the cost model of seed F324 §7
// (N file fsyncs, K directory fsyncs; N directory fsyncs for
// one-at-a-time; none for the floor, which syncs the filesystem once per
// op).
//
// The table lives under $LEASE_BENCH_DIR when set (bench/run points it at a
// journaled loop mount), else under b.TempDir(). $LEASE_BENCH_WRITERS
// overrides the writer pool size of the concurrent strategy.
func BenchmarkRenew(b *testing.B) {
	for _, kind := range []strategy.Kind{strategy.Concurrent, strategy.Sequential, strategy.OneAtATime, strategy.NoSync} {
		for _, n := range []int{64, 1024} {
			for _, k := range []int{1, 8, 16} {
				b.Run(fmt.Sprintf("%s/N=%d/K=%d", kind, n, k), func(b *testing.B) {
					benchRenew(b, kind, n, k)
				})
			}
		}
	}
}

func benchRenew(b *testing.B, kind strategy.Kind, n, k int) {
	root := benchRoot(b)
	writers := commit.DefaultWriters
	if kind.Writers() > 0 {
		writers = kind.Writers()
	} else if env := os.Getenv("LEASE_BENCH_WRITERS"); env != "" {
		var err error
		if writers, err = strconv.Atoi(env); err != nil {
			b.Fatalf("LEASE_BENCH_WRITERS=%q: %v", env, err)
		}
	}
	var w *strategy.FS
	st, err := commit.Open(root, commit.Options{Create: &leasefmt.Table{WorkShards: k, TargetShards: 16, CreatedAt: 1000}, Writers: writers, Wrap: func(f seam.FS) seam.FS { w = strategy.Wrap(kind, f); return w }})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	items := spreadIDs(b, n, k)
	const now, ttl = 1000.0, 1e9 // nothing expires during the run
	for i, r := range at(st, now).Claim(context.Background(), items, "bench", ttl) {
		if r.Outcome != commit.OK {
			b.Fatalf("claim %s: %s %s", r.ID.Short(), r.Outcome.Reason(), r.Detail)
		}
		items[i].Token = r.Token
	}
	// Touched shards must be exactly K: the IDs were built to spread evenly.
	touched := map[int]bool{}
	for _, it := range items {
		touched[it.ID.Shard(k)] = true
	}
	if len(touched) != k {
		b.Fatalf("IDs touch %d shards, want %d", len(touched), k)
	}
	base := w.Counts()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, r := range at(st, now+1+float64(i)).Renew(context.Background(), items, ttl) {
			if r.Outcome != commit.OK {
				b.Fatalf("renew %s: %s %s", r.ID.Short(), r.Outcome.Reason(), r.Detail)
			}
		}
		if kind == strategy.NoSync {
			if err := syncfs(w); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	end := w.Counts()
	ops := float64(b.N)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/ops/float64(n), "ns/record")
	b.ReportMetric(float64(end.DirectorySyncs-base.DirectorySyncs)/ops, "dir_syncs/op")
	b.ReportMetric(float64(end.FileSyncs-base.FileSyncs)/ops, "file_syncs/op")
}

// benchRoot is a fresh, empty table root, removed after the benchmark.
func benchRoot(b *testing.B) string {
	dir := os.Getenv("LEASE_BENCH_DIR")
	if dir == "" {
		return b.TempDir()
	}
	root, err := os.MkdirTemp(dir, "bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(root) })
	return root
}

// spreadIDs returns n IDs, tokens 0, of which i falls into shard i%k: the
// first 8 hex digits (which choose the shard) are i, the rest is a digest
// of i, so IDs are distinct and lock offsets differ.
func spreadIDs(b testing.TB, n, k int) []commit.Item {
	items := make([]commit.Item, n)
	for i := range items {
		sum := sha256.Sum256([]byte(strconv.Itoa(i)))
		id, err := leasefmt.ParseID(fmt.Sprintf("%08x", i) + hex.EncodeToString(sum[:])[8:])
		if err != nil {
			b.Fatal(err)
		}
		if id.Shard(k) != i%k {
			b.Fatalf("ID %d lands in shard %d, want %d", i, id.Shard(k), i%k)
		}
		items[i] = commit.Item{ID: id}
	}
	return items
}

// at is st read at the clock now.
func at(st *commit.Store, now float64) *commit.Store { return st.At(now) }

// syncfs is the floor's one syncfs(2) per batch, as the engine's own
// no-fsync mode made it before the strategies left the engine.
func syncfs(f seam.FS) error {
	s, ok := seam.As[seam.Syncer](f)
	if !ok {
		return fmt.Errorf("no syncfs")
	}
	return s.Syncfs()
}
