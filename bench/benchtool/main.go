// Command benchtool is the helper of bench/run: it makes the input IDs,
// times one whole `lease` process, and turns the raw samples into the
// Markdown results table.
//
//	benchtool ids N                      print N IDs that spread evenly over any shard count
//	benchtool time IN OUT -- CMD ARG...  run CMD with stdin IN, stdout OUT; print wall and CPU ms
//	benchtool quiet MAXSECONDS           wait until the CPUs are idle (other load gone); print s waited
//	benchtool report RAW                 Markdown table and goal verdict from RAW samples
//	benchtool ab DIR IN REPS LABEL=CMD...  A/B test: interleaved runs of each CMD, paired ratios
//
// ids: the first 8 hex digits of ID i (which choose its shard, docs/design.md#layout) are
// i itself, so with K shards ID i lands in shard i%K and N IDs spread
// evenly; the other 56 digits are a SHA-256 digest of i, as in
// commit/bench_test.go.
package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leasetool/lease/bench/internal/spread"
	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "ids":
		err = ids(os.Args[2:])
	case "time":
		err = timeit(os.Args[2:])
	case "quiet":
		err = quiet(os.Args[2:])
	case "report":
		err = report(os.Args[2:])
	case "ab":
		err = ab(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtool:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: benchtool ids N | time IN OUT -- CMD ARG... | quiet MAXSECONDS | report RAW | ab DIR IN REPS LABEL=CMD...")
	os.Exit(2)
}

func ids(args []string) error {
	if len(args) != 1 {
		usage()
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 || n > 1<<31 {
		return fmt.Errorf("bad count %q", args[0])
	}
	w := bufio.NewWriter(os.Stdout)
	for i := 0; i < n; i++ {
		fmt.Fprintln(w, spread.ID(i))
	}
	return w.Flush()
}

// timeit runs one process and prints its wall time in milliseconds: from
// just before fork to just after wait, so process start, Go runtime start,
// reading the input and exit are included, as a user of the command pays.
func timeit(args []string) error {
	if len(args) < 4 || args[2] != "--" {
		usage()
	}
	wall, cpu, err := runTimed(args[0], args[1], args[3:])
	if err != nil {
		return err
	}
	fmt.Printf("%.3f %.3f\n", wall, cpu)
	return nil
}

// quiet waits, at most MAXSECONDS, until two successive 300 ms samples of
// /proc/stat show the machine at least 85% idle, so that a timed run does
// not share the CPUs with someone else's build or tests. It prints the
// seconds it waited; giving up is not an error (the run is still taken).
func quiet(args []string) error {
	if len(args) != 1 {
		usage()
	}
	max, err := strconv.ParseFloat(args[0], 64)
	if err != nil {
		return fmt.Errorf("bad seconds %q", args[0])
	}
	start := time.Now()
	calm := 0
	for calm < 2 && time.Since(start).Seconds() < max {
		idle0, total0, err := cpuTimes()
		if err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond)
		idle1, total1, err := cpuTimes()
		if err != nil {
			return err
		}
		if total1 > total0 && float64(idle1-idle0)/float64(total1-total0) >= 0.85 {
			calm++
		} else {
			calm = 0
		}
	}
	fmt.Printf("%.1f\n", time.Since(start).Seconds())
	return nil
}

// cpuTimes is the idle (idle + iowait) and total jiffies of all CPUs.
func cpuTimes() (idle, total uint64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fl := strings.Fields(line)
	if len(fl) < 6 || fl[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, f := range fl[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %v", err)
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return idle, total, nil
}

type key struct {
	fs   string
	n, k int
}

// strategies in the order of the table: this project, the seed's group
// commit (F324), one directory fsync per record (F323), the floor.
var strategies = []string{"concurrent", "sequential", "one-at-a-time", "nosync"}

// report reads the raw samples of bench/run, lines of
//
//	T fs N K strategy wall_ms cpu_ms rep     one timed run of repetition rep
//	C fs N K strategy dir_syncs file_syncs   the fsync counts of a cell
//
// and prints per (fs, N, K, strategy) the median wall time over the timed
// runs, their spread, the time per record, the median CPU time (user +
// system) of the process, and the ratios the goal is stated in. The goal
// verdict also gives the median of the ratios taken within each
// repetition (runs seconds apart), which a busy shared machine disturbs
// less than the ratio of medians.
func report(args []string) error {
	if len(args) != 1 {
		usage()
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	wall := map[key]map[string][]float64{}
	cpu := map[key]map[string][]float64{}
	syncs := map[key]map[string]string{}
	byRep := map[key]map[string]map[string]float64{} // rep -> strategy -> wall
	var keys []key
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		fl := strings.Fields(sc.Text())
		if len(fl) == 0 || strings.HasPrefix(fl[0], "#") {
			continue
		}
		if !(fl[0] == "T" && len(fl) == 8 || fl[0] == "C" && len(fl) == 7) {
			return fmt.Errorf("%s:%d: want T fs N K strategy wall cpu rep, or C fs N K strategy dirs files", args[0], line)
		}
		n, err1 := strconv.Atoi(fl[2])
		k, err2 := strconv.Atoi(fl[3])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("%s:%d: bad N or K", args[0], line)
		}
		kk, s := key{fl[1], n, k}, fl[4]
		if wall[kk] == nil {
			wall[kk], cpu[kk], syncs[kk] = map[string][]float64{}, map[string][]float64{}, map[string]string{}
			keys = append(keys, kk)
		}
		if fl[0] == "C" {
			syncs[kk][s] = fl[5] + " / " + fl[6]
			continue
		}
		w, err1 := strconv.ParseFloat(fl[5], 64)
		c, err2 := strconv.ParseFloat(fl[6], 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("%s:%d: bad time", args[0], line)
		}
		wall[kk][s] = append(wall[kk][s], w)
		cpu[kk][s] = append(cpu[kk][s], c)
		if byRep[kk] == nil {
			byRep[kk] = map[string]map[string]float64{}
		}
		if byRep[kk][fl[7]] == nil {
			byRep[kk][fl[7]] = map[string]float64{}
		}
		byRep[kk][fl[7]][s] = w
	}
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Println("| fs | N | K | strategy | median ms | min–max ms | runs | ms/record | CPU ms | dir / file fsyncs | sequential ÷ this | this ÷ floor |")
	fmt.Println("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, kk := range keys {
		seq := median(wall[kk]["sequential"])
		floor := median(wall[kk]["nosync"])
		for _, s := range strategies {
			xs := wall[kk][s]
			if len(xs) == 0 {
				continue
			}
			m := median(xs)
			lo, hi := minMax(xs)
			fmt.Printf("| %s | %d | %d | %s | %.1f | %.1f–%.1f | %d | %.3f | %.1f | %s | %s | %s |\n",
				kk.fs, kk.n, kk.k, s, m, lo, hi, len(xs), m/float64(kk.n), median(cpu[kk][s]),
				orDash(syncs[kk][s]), ratio(seq, m), ratio(m, floor))
		}
	}
	fmt.Println()
	fmt.Println("Goal (journaled images, N=1024, K=16): concurrent at least 3.5× faster than sequential and within 1.5× of the floor.")
	fmt.Println()
	for _, kk := range keys {
		if kk.n != 1024 || kk.k != 16 || kk.fs == "root" {
			continue
		}
		c := median(wall[kk]["concurrent"])
		seq := median(wall[kk]["sequential"])
		floor := median(wall[kk]["nosync"])
		if c == 0 || seq == 0 || floor == 0 {
			continue
		}
		var speedups, overheads []float64
		for _, r := range byRep[kk] {
			if r["concurrent"] > 0 && r["sequential"] > 0 && r["nosync"] > 0 {
				speedups = append(speedups, r["sequential"]/r["concurrent"])
				overheads = append(overheads, r["concurrent"]/r["nosync"])
			}
		}
		verdict := "met"
		if seq/c < 3.5 || c/floor > 1.5 {
			verdict = "NOT met"
		}
		fmt.Printf("- %s: concurrent %.1f ms, sequential %.1f ms (%.2f× faster), floor %.1f ms (%.2f× the floor): %s;"+
			" within-repetition ratios (median of %d): %.2f× faster, %.2f× the floor\n",
			kk.fs, c, seq, seq/c, floor, c/floor, verdict, len(speedups), median(speedups), median(overheads))
	}
	return nil
}

func minMax(xs []float64) (lo, hi float64) {
	lo, hi = xs[0], xs[0]
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	ys := append([]float64(nil), xs...)
	sort.Float64s(ys)
	if len(ys)%2 == 1 {
		return ys[len(ys)/2]
	}
	return (ys[len(ys)/2-1] + ys[len(ys)/2]) / 2
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// ab compares commands (variants of a binary, flags, environments) the way
// bench/run compares strategies: REPS repetitions, each running every
// command once in an order rotated by one per repetition, with the
// filesystem of DIR synced (syncfs, untimed) before each run and stdin from
// IN. In each command, {now} becomes 1001 + the repetition number (a fresh
// --now for renewals). It prints per command the median and minimum wall
// time, the median CPU time, and the median over repetitions of its wall
// time divided by the first command's in the same repetition, which a busy
// machine disturbs less than a ratio of medians. Example:
//
//	benchtool ab /mnt/t held 9 \
//	  'floor=leasebench renew-batch --root /mnt/t --now {now} --strategy nosync' \
//	  'w32=lease renew-batch --root /mnt/t --now {now} --writers 32' \
//	  'w64=lease renew-batch --root /mnt/t --now {now}'
func ab(args []string) error {
	if len(args) < 4 {
		usage()
	}
	dir, in := args[0], args[1]
	reps, err := strconv.Atoi(args[2])
	if err != nil || reps < 1 {
		return fmt.Errorf("bad repetitions %q", args[2])
	}
	type variant struct {
		label string
		argv  []string
		wall  []float64
		cpu   []float64
		ratio []float64
	}
	var vs []*variant
	for _, a := range args[3:] {
		label, cmd, ok := strings.Cut(a, "=")
		if !ok || label == "" || len(strings.Fields(cmd)) == 0 {
			return fmt.Errorf("want LABEL=CMD, got %q", a)
		}
		vs = append(vs, &variant{label: label, argv: strings.Fields(cmd)})
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	for rep := 1; rep <= reps; rep++ {
		wall := make([]float64, len(vs))
		for j := range vs {
			i := (j + rep) % len(vs)
			v := vs[i]
			argv := make([]string, len(v.argv))
			for k, a := range v.argv {
				argv[k] = strings.ReplaceAll(a, "{now}", strconv.Itoa(1001+rep))
			}
			if err := unix.Syncfs(int(d.Fd())); err != nil {
				return fmt.Errorf("syncfs %s: %v", dir, err)
			}
			w, c, err := runTimed(in, "", argv)
			if err != nil {
				return fmt.Errorf("%s: %v", v.label, err)
			}
			v.wall, v.cpu = append(v.wall, w), append(v.cpu, c)
			wall[i] = w
		}
		for i, v := range vs {
			v.ratio = append(v.ratio, wall[i]/wall[0])
		}
		fmt.Fprintf(os.Stderr, "\rrepetition %d/%d", rep, reps)
	}
	fmt.Fprintln(os.Stderr)
	fmt.Printf("| variant | median ms | min ms | CPU ms | ÷ %s (paired median) |\n| --- | ---: | ---: | ---: | ---: |\n", vs[0].label)
	for _, v := range vs {
		lo, _ := minMax(v.wall)
		fmt.Printf("| %s | %.1f | %.1f | %.1f | %.2f |\n", v.label, median(v.wall), lo, median(v.cpu), median(v.ratio))
	}
	return nil
}

// runTimed runs argv with stdin from in and stdout to out (discarded when
// out is ""), and returns its wall and CPU (user + system) time in
// milliseconds.
func runTimed(in, out string, argv []string) (wall, cpu float64, err error) {
	f, err := os.Open(in)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var stderr strings.Builder
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stderr = f, &stderr
	if out != "" {
		o, err := os.Create(out)
		if err != nil {
			return 0, 0, err
		}
		defer o.Close()
		cmd.Stdout = o
	}
	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return float64(elapsed.Microseconds()) / 1000, float64(time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Microseconds()) / 1000, nil
}
