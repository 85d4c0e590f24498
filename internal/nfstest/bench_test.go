//go:build linux

package nfstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/uml"
)

// BenchmarkNFS times lease on real NFS beside ext4, in one run (bench/nfs
// runs it; docs/performance.md#nfs has its numbers): a server kernel
// exporting a tmpfs and two client kernels, each mounting the export with
// NFSv4.2 (the cluster's mount) and NFSv3 (bench_setup of
// scripts/nfs-guest/bench), beside the client kernel's own ext4 on a loop
// device backed by its tmpfs (kernel to kernel, memory behind both). Its
// parts (LEASE_NFS_BENCH_PARTS, default all, in this order):
//
//   - renew: renew-batch of N=1024 held leases in K=16 shards through
//     client 0: lease, the no-fsync floor and the seed's F324, interleaved
//     rounds (LEASE_NFS_BENCH_REPS, default 5) over the three filesystems;
//   - ops: one claim of a new ID and one complete --publish of a 64-byte
//     result, 5 of each one after the other, each timed and its RPCs counted
//     per type (/proc/self/mountstats of the client kernel, diffed around
//     the command);
//   - work: a lease work campaign of LEASE_NFS_BENCH_ITEMS (default 200)
//     trivial items, 4 workers in client 0, and 4 in each client, on ext4
//     (client 0 only) and both NFS versions, interleaved rounds
//     (LEASE_NFS_BENCH_WORK_REPS, default 3);
//   - netem: 1 ms more each way between the clients and the server
//     (netem on every kernel's eth0), then renew (at most 3 rounds) and
//     ops again.
//
// The raw lines (scripts/nfs-guest/bench says what they are) and the
// machine's load averages go to LEASE_NFS_BENCH_RAW, the summary to
// LEASE_NFS_BENCH_OUT (both default to files in the test's temporary
// directory, and the summary is logged); LEASE_NFS_BENCH_FROM=RAW only
// summarizes the raw lines of an earlier run. It is not a test: make test
// and make test-nfs run no benchmark.
func BenchmarkNFS(b *testing.B) {
	reps := envInt("LEASE_NFS_BENCH_REPS", 5)
	items := envInt("LEASE_NFS_BENCH_ITEMS", 200)
	workReps := envInt("LEASE_NFS_BENCH_WORK_REPS", 3)
	if from := os.Getenv("LEASE_NFS_BENCH_FROM"); from != "" {
		// The summary of the raw lines of an earlier run, nothing booted.
		rb, err := os.ReadFile(from)
		if err != nil {
			b.Fatal(err)
		}
		sum := summarize(string(rb), items)
		if out := os.Getenv("LEASE_NFS_BENCH_OUT"); out != "" {
			if err := os.WriteFile(out, []byte(sum), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		b.Log("\n" + sum)
		return
	}
	Need(b)
	parts := os.Getenv("LEASE_NFS_BENCH_PARTS")
	if parts == "" {
		parts = "renew,ops,work,netem"
	}
	want := func(p string) bool { return slices.Contains(strings.Split(parts, ","), p) }
	rawPath, outPath := os.Getenv("LEASE_NFS_BENCH_RAW"), os.Getenv("LEASE_NFS_BENCH_OUT")
	if rawPath == "" {
		rawPath = filepath.Join(b.TempDir(), "nfs.raw")
	}
	if outPath == "" {
		outPath = filepath.Join(b.TempDir(), "nfs.md")
	}
	raw, err := os.Create(rawPath)
	if err != nil {
		b.Fatal(err)
	}
	// The summary of what was measured, also when a part failed.
	defer func() {
		raw.Close()
		rb, _ := os.ReadFile(rawPath)
		sum := summarize(string(rb), items)
		if err := os.WriteFile(outPath, []byte(sum), 0o644); err != nil {
			b.Error(err)
		}
		b.Logf("raw: %s, summary: %s\n%s", rawPath, outPath, sum)
	}()
	bin, err := uml.BuildLease()
	if err != nil {
		b.Fatal(err)
	}
	nosync, err := uml.BuildLease("lease_powercut_nosync")
	if err != nil {
		b.Fatal(err)
	}
	lb, err := buildLeasebench()
	if err != nil {
		b.Fatal(err)
	}
	gd, err := guestDir()
	if err != nil {
		b.Fatal(err)
	}
	guest, err := os.ReadFile(filepath.Join(gd, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := Context(b)
	load := func(what string) {
		fmt.Fprintf(raw, "LOAD %s %s %s\n", time.Now().UTC().Format("15:04:05"), what, loadavg())
	}
	load("before-boot")
	t0 := time.Now()
	c := UpT(b, Options{Vers: "4.2", Clients: 2, Name: "bench"})
	fmt.Fprintf(raw, "# server and 2 clients up in %.1f s\n", time.Since(t0).Seconds())
	const fses = "ext4=/tmp/ext4 nfs3=/tmp/nfs3 nfs42=" + Mnt
	var rawMu sync.Mutex
	// try runs body in client i after the guest script, keeps its result
	// lines (prefixed with phase) and returns its output; run fails b on
	// an error (try is for other goroutines).
	try := func(i int, phase, body string, bound time.Duration) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		script := fmt.Sprintf("export LEASE=%s LEASE_NOSYNC=%s LEASEBENCH=%s FSES=%q\n%s\n%s\n", bin, nosync, lb, fses, guest, body)
		out, code, err := c.Run(ctx, i, script)
		if err != nil || code != 0 {
			con, _ := c.Clients[i].Console()
			if len(con) > 2000 {
				con = con[len(con)-2000:]
			}
			return out, fmt.Errorf("client %d, %s: exit %d, %v: %s\nconsole: %s", i, phase, code, err, out, con)
		}
		rawMu.Lock()
		defer rawMu.Unlock()
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) > 0 && slices.Contains([]string{"RB", "OP", "RPC", "WORK", "FAIL"}, f[0]) {
				fmt.Fprintf(raw, "%s %s\n", phase, l)
				if f[0] == "FAIL" {
					b.Errorf("client %d, %s: %s", i, phase, l)
				}
			}
		}
		return out, nil
	}
	run := func(i int, phase, body string, bound time.Duration) string {
		b.Helper()
		out, err := try(i, phase, body, bound)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	for i := range c.Clients {
		out := run(i, "setup", "bench_setup", 5*time.Minute)
		fmt.Fprintf(raw, "# client %d: %s\n", i, strings.ReplaceAll(strings.TrimSpace(out), "\n", "; "))
	}
	renew := func(phase string, reps int) {
		load(phase + "-renew-start")
		run(0, phase, "for fs in ext4 nfs3 nfs42; do rb_prepare $fs || echo FAIL prepare $fs; done", 30*time.Minute)
		for r := 1; r <= reps; r++ {
			run(0, phase, fmt.Sprintf("rb_round %d", r), 30*time.Minute)
			load(fmt.Sprintf("%s-renew-round-%d", phase, r))
		}
	}
	oneOps := func(phase string) {
		load(phase + "-ops-start")
		run(0, phase, "for fs in ext4 nfs3 nfs42; do one_ops $fs 5; done", 30*time.Minute)
		load(phase + "-ops-end")
	}
	if want("renew") {
		renew("base", reps)
	}
	if want("ops") {
		oneOps("base")
	}
	if want("work") {
		// Rounds of the five campaigns, their order rotating: ext4 through
		// client 0, each NFS version through client 0 and through both.
		type campaign struct {
			fs      string
			clients int
		}
		cs := []campaign{{"ext4", 1}, {"nfs3", 1}, {"nfs3", 2}, {"nfs42", 1}, {"nfs42", 2}}
		load("base-work-start")
		for r := 1; r <= workReps; r++ {
			for j := range cs {
				cp := cs[(j+r)%len(cs)]
				run(0, "base", fmt.Sprintf("work_prepare %s %d", cp.fs, items), 20*time.Minute)
				if cp.clients == 1 {
					run(0, "base", fmt.Sprintf("work_run %s 1client.%d 4", cp.fs, r), 40*time.Minute)
				} else {
					var wg sync.WaitGroup
					for i := 0; i < 2; i++ {
						wg.Add(1)
						go func(i int) {
							defer wg.Done()
							if _, err := try(i, "base", fmt.Sprintf("work_run %s 2clients.%d 4 go-%d go-%d", cp.fs, r, 1-i, i), 40*time.Minute); err != nil {
								b.Error(err)
							}
						}(i)
					}
					wg.Wait()
					if b.Failed() {
						b.FailNow()
					}
				}
				load(fmt.Sprintf("base-work-%s-%dclients-round-%d", cp.fs, cp.clients, r))
			}
		}
	}
	if want("netem") {
		for _, k := range append([]*uml.Kernel{c.Server}, c.Clients...) {
			out, code, err := k.Run(ctx, "modprobe -d /run/modroot sch_netem; tc qdisc add dev eth0 root netem delay 1ms && tc qdisc show dev eth0")
			if err != nil || code != 0 {
				b.Fatalf("netem in %s: exit %d, %v: %s", k.Name, code, err, out)
			}
			fmt.Fprintf(raw, "# netem in %s: %s\n", k.Name, strings.TrimSpace(out))
		}
		out, _, _ := c.Run(ctx, 0, "ping -c 5 -q 10.77.0.1 2>&1 | tail -1")
		fmt.Fprintf(raw, "# ping with netem: %s\n", strings.TrimSpace(out))
		renew("netem", min(reps, 3))
		oneOps("netem")
	}
	load("end")
}

// buildLeasebench builds bench/leasebench (the seed's strategies over
// lease's engine; bench/ is a module of its own) into a directory of
// uml.Dir, which the guests read through their hostfs root.
func buildLeasebench() (string, error) {
	gd, err := guestDir()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(uml.Dir, fmt.Sprintf("bin-%d-", os.Getpid()))
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "leasebench")
	cmd := exec.Command("go", "build", "-o", out, "./leasebench")
	cmd.Dir = filepath.Join(gd, "..", "..", "bench")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build bench/leasebench: %v: %s", err, b)
	}
	return out, nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// summarize turns BenchmarkNFS's raw lines into markdown tables.
func summarize(raw string, items int) string {
	type key struct{ phase, fs, what string }
	rb := map[key][]float64{}            // renew-batch ms by variant
	rbRound := map[key]map[int]float64{} // by round, for the ratios within a round
	op := map[key][]float64{}
	rpc := map[key]map[string][]float64{} // (phase, fs, cmd) -> op -> counts per run
	runsOf := map[key]int{}
	work := map[key][2]int64{} // (phase, fs, label) -> min start, max end
	var loads []string
	for _, l := range strings.Split(raw, "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == "LOAD" {
			loads = append(loads, strings.Join(f[1:], " "))
			continue
		}
		if len(f) < 2 {
			continue
		}
		ph := f[0]
		switch {
		case f[1] == "RB" && len(f) == 6:
			k := key{ph, f[2], f[3]}
			ms, _ := strconv.ParseFloat(f[5], 64)
			r, _ := strconv.Atoi(f[4])
			rb[k] = append(rb[k], ms)
			if rbRound[k] == nil {
				rbRound[k] = map[int]float64{}
			}
			rbRound[k][r] = ms
		case f[1] == "OP" && len(f) == 6:
			ms, _ := strconv.ParseFloat(f[5], 64)
			k := key{ph, f[2], f[3]}
			op[k] = append(op[k], ms)
			runsOf[k]++
		case f[1] == "RPC" && len(f) == 7:
			k := key{ph, f[2], f[3]}
			if rpc[k] == nil {
				rpc[k] = map[string][]float64{}
			}
			n, _ := strconv.ParseFloat(f[6], 64)
			rpc[k][f[5]] = append(rpc[k][f[5]], n)
		case f[1] == "WORK" && len(f) == 6:
			k := key{ph, f[2], f[3]}
			s, _ := strconv.ParseInt(f[4], 10, 64)
			e, _ := strconv.ParseInt(f[5], 10, 64)
			w, ok := work[k]
			if !ok || s < w[0] {
				w[0] = s
			}
			if e > w[1] {
				w[1] = e
			}
			work[k] = w
		}
	}
	var sb strings.Builder
	fses := []string{"ext4", "nfs3", "nfs42"}
	for _, ph := range []string{"base", "netem"} {
		if len(rb[key{ph, "ext4", "lease"}]) == 0 && len(rb[key{ph, "nfs3", "lease"}]) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "\n### renew-batch N=1024 K=16, %s: medians of %d rounds (ms)\n\n", ph, len(rb[key{ph, "nfs3", "lease"}]))
		sb.WriteString("| fs | lease | no-fsync floor | F324 | lease ÷ floor | F324 ÷ lease | median of per-round lease ÷ floor, F324 ÷ lease |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, fs := range fses {
			l, fl, f3 := median(rb[key{ph, fs, "lease"}]), median(rb[key{ph, fs, "floor"}]), median(rb[key{ph, fs, "f324"}])
			if l == 0 {
				continue
			}
			var r1, r2 []float64
			for r, v := range rbRound[key{ph, fs, "lease"}] {
				if x := rbRound[key{ph, fs, "floor"}][r]; x > 0 {
					r1 = append(r1, v/x)
				}
				if x := rbRound[key{ph, fs, "f324"}][r]; x > 0 {
					r2 = append(r2, x/v)
				}
			}
			fmt.Fprintf(&sb, "| %s | %.0f | %.0f | %.0f | %.2f× | %.2f× | %.2f×, %.2f× |\n", fs, l, fl, f3, l/fl, f3/l, median(r1), median(r2))
		}
	}
	for _, ph := range []string{"base", "netem"} {
		if len(op[key{ph, "nfs3", "claim"}]) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "\n### one claim, one complete --publish, %s: median ms (of %d) and RPCs per command (median over the runs; min-max)\n\n", ph, runsOf[key{ph, "nfs3", "claim"}])
		sb.WriteString("| fs | command | ms | RPCs | per type |\n| --- | --- | ---: | ---: | --- |\n")
		for _, fs := range fses {
			for _, cmd := range []string{"claim", "complete"} {
				k := key{ph, fs, cmd}
				if len(op[k]) == 0 {
					continue
				}
				names := make([]string, 0, len(rpc[k]))
				for n := range rpc[k] {
					names = append(names, n)
				}
				slices.Sort(names)
				total := 0.0
				var per []string
				for _, n := range names {
					c := rpc[k][n]
					for len(c) < runsOf[k] { // a run that made no call of this type
						c = append(c, 0)
					}
					m := median(c)
					total += m
					lo, hi := slices.Min(c), slices.Max(c)
					if lo == hi {
						per = append(per, fmt.Sprintf("%s %g", n, m))
					} else {
						per = append(per, fmt.Sprintf("%s %g (%g-%g)", n, m, lo, hi))
					}
				}
				rpcs := "-"
				if fs != "ext4" {
					rpcs = fmt.Sprintf("%g", total)
				}
				fmt.Fprintf(&sb, "| %s | %s | %.1f | %s | %s |\n", fs, cmd, median(op[k]), rpcs, strings.Join(per, ", "))
			}
		}
	}
	if len(work) > 0 {
		// A campaign's time: from the first start to the last end of its
		// clients; LABEL.R is round R of LABEL.
		secs := map[key][]float64{}
		for k, w := range work {
			lab, _, _ := strings.Cut(k.what, ".")
			kk := key{k.phase, k.fs, lab}
			secs[kk] = append(secs[kk], float64(w[1]-w[0])/1e9)
		}
		fmt.Fprintf(&sb, "\n### lease work, %d trivial items (true), 4 workers per client: median (min-max) of the rounds\n\n| fs | clients | rounds | s | items/s |\n| --- | --- | ---: | ---: | ---: |\n", items)
		for _, fs := range fses {
			for _, lab := range []string{"1client", "2clients"} {
				if v := secs[key{"base", fs, lab}]; len(v) > 0 {
					m := median(v)
					fmt.Fprintf(&sb, "| %s | %s | %d | %.1f (%.1f-%.1f) | %.1f |\n", fs, lab, len(v), m, slices.Min(v), slices.Max(v), float64(items)/m)
				}
			}
		}
	}
	fmt.Fprintf(&sb, "\nLoad averages (1, 5, 15 min) of this machine during the run:\n\n")
	for _, l := range loads {
		fmt.Fprintf(&sb, "- %s\n", l)
	}
	return sb.String()
}
