package fsck_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/fsck"
	"github.com/leasetool/lease/leasefmt"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// buildLarge writes a table of n valid work records in shards shard
// directories with plain file writes (no fsync, no locks: the commands are
// not the point here). A marker beside the root lets a later run reuse it.
func buildLarge(b *testing.B, root string, n, shards int) {
	marker := root + ".records"
	if data, err := os.ReadFile(marker); err == nil && strings.TrimSpace(string(data)) == strconv.Itoa(n) {
		return
	}
	os.RemoveAll(root)
	hdr, _ := leasefmt.EncodeTable(&leasefmt.Table{WorkShards: shards, TargetShards: 16, CreatedAt: 1})
	for _, d := range []string{"stage", "public", "lost+found"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, k := range []leasefmt.Kind{leasefmt.Work, leasefmt.Target, leasefmt.Group} {
		m := shards
		if k != leasefmt.Work {
			m = 16
		}
		for s := 0; s < m; s++ {
			dir := filepath.Join(root, k.Dir(), leasefmt.ShardDirName(s, m))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, ".lock"), nil, 0o644)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "TABLE"), hdr, 0o644); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				sum := sha256.Sum256([]byte(fmt.Sprintf("bench/%d", i)))
				id := leasefmt.ID(hex.EncodeToString(sum[:]))
				r := &leasefmt.Record{Kind: leasefmt.Work, ID: id, Status: leasefmt.Leased, Owner: "bench-host/worker-" + strconv.Itoa(int(i%64)),
					Token: i%1000 + 1, ClaimedAt: 1764450000.5, RenewedAt: 1764450030.25, ExpiresAt: 1764450150.125 + float64(i%2)*1e6}
				data, err := leasefmt.Encode(r)
				if err == nil {
					err = os.WriteFile(filepath.Join(root, "work", leasefmt.ShardDirName(id.Shard(shards), shards), id.FileName()), data, 0o644)
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	os.WriteFile(marker, []byte(strconv.Itoa(n)), 0o644)
	b.Logf("built %d records in %v", n, time.Since(start))
}

// peakHeap samples the live heap until stop is closed and returns the
// largest value seen, in bytes.
func peakHeap(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak {
				peak = v
			}
			select {
			case <-stop:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// cpuTime is the user and system time this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// vmHWM is the peak resident set size of this process, in bytes.
func vmHWM() float64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	return 0
}

// BenchmarkScan is a read-only fsck of a large table: by default 1,000,000
// work records in 64 shards (LEASE_FSCK_BENCH_RECORDS changes the count;
// LEASE_FSCK_BENCH_DIR keeps the table between runs;
// LEASE_FSCK_BENCH_WORKERS sets fsck.Options.Workers; with
// LEASE_FSCK_BENCH_COLD=1 the page cache is dropped before each scan, which
// needs root). It reports records/s and the peak live heap.
//
//	go test ./fsck -run '^$' -bench Scan -benchtime 1x
func BenchmarkScan(b *testing.B) {
	n := envInt("LEASE_FSCK_BENCH_RECORDS", 1_000_000)
	root := os.Getenv("LEASE_FSCK_BENCH_DIR")
	if root == "" {
		root = filepath.Join(b.TempDir(), "table")
	}
	buildLarge(b, root, n, 64)
	b.ResetTimer()
	cold := os.Getenv("LEASE_FSCK_BENCH_COLD") == "1"
	var elapsed, cpu time.Duration
	var peak uint64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if cold {
			syscall.Sync()
			if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200); err != nil {
				b.Fatalf("drop caches: %v", err)
			}
		}
		runtime.GC()
		osfs, err := seam.OS(root)
		if err != nil {
			b.Fatal(err)
		}
		stop := make(chan struct{})
		peakc := peakHeap(stop)
		findings := 0
		b.StartTimer()
		start, cpu0 := time.Now(), cpuTime()
		sum, err := fsck.Check(context.Background(), root, osfs, fsck.Options{Now: 1764450000, Workers: envInt("LEASE_FSCK_BENCH_WORKERS", 0)},
			func(*fsck.Finding) { findings++ })
		elapsed += time.Since(start)
		cpu += cpuTime() - cpu0
		b.StopTimer()
		close(stop)
		peak = max(peak, <-peakc)
		osfs.Close()
		if err != nil {
			b.Fatal(err)
		}
		if sum.Records["work"] != n || findings != 0 || sum.Exit() != 0 {
			b.Fatalf("scan saw %d of %d records, %d findings, exit %d", sum.Records["work"], n, findings, sum.Exit())
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/elapsed.Seconds(), "records/s")
	// Records per second of CPU (user+system, all threads): the rate that
	// does not depend on what else the machine runs.
	b.ReportMetric(float64(n)*float64(b.N)/cpu.Seconds(), "records/cpu-s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(vmHWM()/(1<<20), "peak-rss-MB")
}
