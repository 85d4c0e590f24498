// Command plot turns the raw samples of bench/matrix into the Markdown
// tables of bench/results/matrix.md (medians, goal ratios, fitted slopes
// of wall time against N, memory, per-process claims, group claims, fsck,
// writer pool) and the plots beside it (gonum/plot, PNG):
//
//	plot --raw FILE --dir DIR [--prefix NAME]
//
// It writes the Markdown to stdout and DIR/NAME-per-record.png (time per
// record against N, log-log, one panel per filesystem, K = 16, and
// concurrent also at K = 1 and 64),
// DIR/NAME-<fs>.png (the same, one file per filesystem) and
// DIR/headline.png (ms per record at N = 1024, K = 16 per filesystem and
// strategy, log scale; NAME-headline.png unless NAME is "matrix") and
// DIR/NAME-writers.png (wall time against the writer pool).
//
// Strategies are lease's four (concurrent, sequential, one-at-a-time,
// nosync) and the seed's Python algorithms run by bench/seedpy/seed.py on the
// same tables (py-f324, py-f323, py-nosync); the goals table compares
// concurrent with both.
//
// Raw lines (bench/matrix writes them; # starts a comment):
//
//	R fs N K strategy wall_ms cpu_ms maxrss_kb rep   one timed renew-batch
//	C fs N K strategy dir_syncs file_syncs            fsync counts of a cell
//	W fs N K writers wall_ms cpu_ms maxrss_kb rep     concurrent, --writers W
//	P fs op wall_ms cpu_ms maxrss_kb                  one claim / group-claim process
//	F fs N K wall_ms cpu_ms maxrss_kb rep             one read-only fsck
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var strategies = []string{"concurrent", "sequential", "one-at-a-time", "nosync", "py-f324", "py-f323", "py-nosync"}

var label = map[string]string{
	"concurrent":    "concurrent (this)",
	"sequential":    "sequential (F324)",
	"one-at-a-time": "one-at-a-time (F323)",
	"nosync":        "nosync (floor)",
	"py-f324":       "py F324 (seed, Python)",
	"py-f323":       "py F323 (seed, Python)",
	"py-nosync":     "py floor (nosync, Python)",
}

var colors = map[string]color.Color{
	"concurrent":    color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"sequential":    color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"one-at-a-time": color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"nosync":        color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff},
	"py-f324":       color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	"py-f323":       color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	"py-nosync":     color.RGBA{R: 0xa0, G: 0xa0, B: 0xa0, A: 0xff},
}

// pyOf is the Python counterpart (bench/seedpy/seed.py) of a seed strategy.
var pyOf = map[string]string{"sequential": "py-f324", "one-at-a-time": "py-f323", "nosync": "py-nosync"}

// isPy reports whether s is one of the Python strategies.
func isPy(s string) bool { return strings.HasPrefix(s, "py-") }

type sample struct {
	wall, cpu float64
	rss       int64
	rep       string
}

type cell struct {
	fs   string
	n, k int
}

type data struct {
	fsOrder []string
	cells   []cell
	renew   map[cell]map[string][]sample
	syncs   map[cell]map[string]string
	writers map[cell]map[string][]sample
	ops     map[string]map[string][]sample // fs -> op
	opOrder []string
	fsck    map[cell][]sample
	skipped []string
}

func main() {
	rawPath := flag.String("raw", "", "raw samples of bench/matrix")
	dir := flag.String("dir", ".", "directory for the plots")
	prefix := flag.String("prefix", "matrix", "file name prefix of the plots")
	flag.Parse()
	if *rawPath == "" {
		fmt.Fprintln(os.Stderr, "usage: plot --raw FILE --dir DIR [--prefix NAME]")
		os.Exit(2)
	}
	d, err := load(*rawPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
	plots, err := makePlots(d, *dir, *prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
	report(d, plots)
}

func load(path string) (*data, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d := &data{
		renew:   map[cell]map[string][]sample{},
		syncs:   map[cell]map[string]string{},
		writers: map[cell]map[string][]sample{},
		ops:     map[string]map[string][]sample{},
		fsck:    map[cell][]sample{},
	}
	seenFS := map[string]bool{}
	addFS := func(fs string) {
		if !seenFS[fs] {
			seenFS[fs] = true
			d.fsOrder = append(d.fsOrder, fs)
		}
	}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.HasPrefix(text, "# skipped") {
			d.skipped = append(d.skipped, strings.TrimPrefix(text, "# skipped "))
		}
		fl := strings.Fields(text)
		if len(fl) == 0 || strings.HasPrefix(fl[0], "#") {
			continue
		}
		bad := fmt.Errorf("%s:%d: malformed line %q", path, line, text)
		num := func(s string) float64 {
			v, e := strconv.ParseFloat(s, 64)
			if e != nil {
				err = bad
			}
			return v
		}
		switch {
		case fl[0] == "R" && len(fl) == 9, fl[0] == "W" && len(fl) == 9:
			c := cell{fl[1], int(num(fl[2])), int(num(fl[3]))}
			s := sample{num(fl[5]), num(fl[6]), int64(num(fl[7])), fl[8]}
			addFS(c.fs)
			if fl[0] == "R" {
				if d.renew[c] == nil {
					d.renew[c] = map[string][]sample{}
					d.cells = append(d.cells, c)
				}
				d.renew[c][fl[4]] = append(d.renew[c][fl[4]], s)
			} else {
				if d.writers[c] == nil {
					d.writers[c] = map[string][]sample{}
				}
				d.writers[c][fl[4]] = append(d.writers[c][fl[4]], s)
			}
		case fl[0] == "C" && len(fl) == 7:
			c := cell{fl[1], int(num(fl[2])), int(num(fl[3]))}
			if d.syncs[c] == nil {
				d.syncs[c] = map[string]string{}
			}
			d.syncs[c][fl[4]] = fl[5] + " / " + fl[6]
		case fl[0] == "P" && len(fl) == 6:
			addFS(fl[1])
			if d.ops[fl[1]] == nil {
				d.ops[fl[1]] = map[string][]sample{}
			}
			if !contains(d.opOrder, fl[2]) {
				d.opOrder = append(d.opOrder, fl[2])
			}
			d.ops[fl[1]][fl[2]] = append(d.ops[fl[1]][fl[2]], sample{num(fl[3]), num(fl[4]), int64(num(fl[5])), ""})
		case fl[0] == "F" && len(fl) == 8:
			c := cell{fl[1], int(num(fl[2])), int(num(fl[3]))}
			d.fsck[c] = append(d.fsck[c], sample{num(fl[4]), num(fl[5]), int64(num(fl[6])), fl[7]})
		default:
			return nil, bad
		}
		if err != nil {
			return nil, err
		}
	}
	sort.SliceStable(d.cells, func(i, j int) bool {
		a, b := d.cells[i], d.cells[j]
		if a.fs != b.fs {
			return indexOf(d.fsOrder, a.fs) < indexOf(d.fsOrder, b.fs)
		}
		if a.n != b.n {
			return a.n < b.n
		}
		return a.k < b.k
	})
	return d, sc.Err()
}

func contains(xs []string, x string) bool { return indexOf(xs, x) >= 0 }

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

func walls(xs []sample) []float64 {
	out := make([]float64, len(xs))
	for i, s := range xs {
		out[i] = s.wall
	}
	return out
}

func cpus(xs []sample) []float64 {
	out := make([]float64, len(xs))
	for i, s := range xs {
		out[i] = s.cpu
	}
	return out
}

func maxRSS(xs []sample) int64 {
	var m int64
	for _, s := range xs {
		if s.rss > m {
			m = s.rss
		}
	}
	return m
}

func median(xs []float64) float64 { return quantile(xs, 0.5) }

// quantile: linear interpolation between order statistics.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	ys := append([]float64(nil), xs...)
	sort.Float64s(ys)
	pos := q * float64(len(ys)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return ys[lo] + (ys[hi]-ys[lo])*(pos-float64(lo))
}

func minMax(xs []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func mb(kb int64) string { return fmt.Sprintf("%.1f", float64(kb)/1024) }

// withinRep: the median over repetitions of num/den, both taken in the
// same repetition (runs seconds apart).
func withinRep(byS map[string][]sample, num, den string) (float64, int) {
	a := map[string]float64{}
	for _, s := range byS[num] {
		a[s.rep] = s.wall
	}
	var rs []float64
	for _, s := range byS[den] {
		if v, ok := a[s.rep]; ok && s.wall > 0 {
			rs = append(rs, v/s.wall)
		}
	}
	return median(rs), len(rs)
}

// fit: least-squares line y = a + b x and its R².
func fit(xs, ys []float64) (a, b, r2 float64) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	b = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	a = (sy - b*sx) / n
	mean := sy / n
	var ssTot, ssRes float64
	for i := range xs {
		e := ys[i] - (a + b*xs[i])
		ssRes += e * e
		ssTot += (ys[i] - mean) * (ys[i] - mean)
	}
	return a, b, 1 - ssRes/ssTot
}

func report(d *data, plots []string) {
	goals(d)
	fmt.Println()
	renewTable(d)
	fmt.Println()
	slopes(d)
	fmt.Println()
	memory(d)
	fmt.Println()
	opsTable(d)
	fmt.Println()
	writerTable(d)
	if len(plots) > 0 {
		fmt.Println()
		fmt.Println("## Plots")
		fmt.Println()
		for _, p := range plots {
			fmt.Printf("![%s](%s)\n\n", p, p)
		}
	}
}

func goals(d *data) {
	fmt.Println("## Goals (N = 1024, K = 16, measured side by side in this run)")
	fmt.Println()
	fmt.Println("Ratios of medians; in brackets the median of the ratios taken within one repetition (runs seconds apart,")
	fmt.Println("less disturbed by the drifting load of the shared machine). Every goal has two rows: against lease's own")
	fmt.Println("`--strategy` run of the seed's algorithm, and against `bench/seedpy/seed.py`, the seed's Python algorithm")
	fmt.Println("(`py-`), on the same table in the same repetitions; the Python process includes the interpreter's start.")
	fmt.Println("fuse-2ms is the FUSE stand-in over a tmpfs (the injected 2 ms is the whole server cost, as for an NFS server on")
	fmt.Println("another machine); fuse-2ms-disk is the same over the root disk, where the FUSE server's own fsyncs share the")
	fmt.Println("client's two CPUs.")
	fmt.Println()
	fmt.Println("| fs | goal | concurrent ms | compared with | its ms | ratio | within-rep | verdict |")
	fmt.Println("| --- | --- | ---: | --- | ---: | ---: | ---: | --- |")
	type goal struct {
		what, other string
		faster      bool // other ÷ concurrent ≥ x; else concurrent ÷ other ≤ x
		x           float64
	}
	want := map[string][]goal{
		"ext4":     {{"≥ 4× faster than F324", "sequential", true, 4}, {"≤ 1.3× the floor", "nosync", false, 1.3}},
		"xfs":      {{"≥ 4× faster than F324", "sequential", true, 4}, {"≤ 1.3× the floor", "nosync", false, 1.3}},
		"fuse-2ms": {{"≥ 20× faster than F323", "one-at-a-time", true, 20}, {"≥ 10× faster than F324", "sequential", true, 10}},
	}
	want["fuse-2ms-disk"] = want["fuse-2ms"]
	for _, fs := range []string{"ext4", "xfs", "fuse-2ms", "fuse-2ms-disk"} {
		byS := d.renew[cell{fs, 1024, 16}]
		if byS == nil && fs == "fuse-2ms-disk" {
			continue // not part of runs made before it existed
		}
		if byS == nil {
			fmt.Printf("| %s | (not measured) | | | | | | |\n", fs)
			continue
		}
		c := median(walls(byS["concurrent"]))
		for _, g := range want[fs] {
			for _, other := range []string{g.other, pyOf[g.other]} {
				if len(byS[other]) == 0 {
					fmt.Printf("| %s | %s | %.1f | %s | (not measured) | | | |\n", fs, g.what, c, other)
					continue
				}
				o := median(walls(byS[other]))
				var r, wr float64
				var n int
				var ok bool
				if g.faster {
					r = o / c
					wr, n = withinRep(byS, other, "concurrent")
					ok = r >= g.x
				} else {
					r = c / o
					wr, n = withinRep(byS, "concurrent", other)
					ok = r <= g.x
				}
				verdict := "met"
				if !ok {
					verdict = "**NOT met**"
				}
				fmt.Printf("| %s | %s | %.1f | %s | %.1f | %.2f× | %.2f× (%d) | %s |\n", fs, g.what, c, other, o, r, wr, n, verdict)
			}
		}
	}
}

func renewTable(d *data) {
	fmt.Println("## renew-batch, whole process: all cells")
	fmt.Println()
	fmt.Println("Median of the runs of one `lease renew-batch --strategy S` process renewing N leases spread evenly over K")
	fmt.Println("shards (fork to wait). `seq ÷ this` > 1: faster than the seed's group commit (F324); `1-by-1 ÷ this`: than")
	fmt.Println("one directory fsync per record (F323); `this ÷ floor`: the cost over the same writes and renames without fsync.")
	fmt.Println("Fsync counts (directory / file) from one untimed `--json` run (not made for N = 16384). RSS: the largest")
	fmt.Println("peak resident set of the process over its runs. `py-` rows: `python3 bench/seedpy/seed.py renew --strategy S`,")
	fmt.Println("the seed's Python algorithms on the same table (counts from its `--stats`); their ratio columns compare")
	fmt.Println("lease's runs with the Python run (`seq ÷ this` > 1: lease's sequential is slower than it).")
	fmt.Println()
	fmt.Println("| fs | N | K | strategy | median ms | min–max ms | runs | ms/record | CPU ms | max RSS MB | dir / file fsyncs | seq ÷ this | 1-by-1 ÷ this | this ÷ floor |")
	fmt.Println("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, c := range d.cells {
		byS := d.renew[c]
		seq := median(walls(byS["sequential"]))
		oat := median(walls(byS["one-at-a-time"]))
		floor := median(walls(byS["nosync"]))
		for _, s := range strategies {
			xs := byS[s]
			if len(xs) == 0 {
				continue
			}
			m := median(walls(xs))
			lo, hi := minMax(walls(xs))
			sy := "–"
			if d.syncs[c] != nil && d.syncs[c][s] != "" {
				sy = d.syncs[c][s]
			}
			fmt.Printf("| %s | %d | %d | %s | %.1f | %.1f–%.1f | %d | %.3f | %.1f | %s | %s | %s | %s | %s |\n",
				c.fs, c.n, c.k, s, m, lo, hi, len(xs), m/float64(c.n), median(cpus(xs)), mb(maxRSS(xs)), sy,
				ratio(seq, m), ratio(oat, m), ratio(m, floor))
		}
	}
	if len(d.skipped) > 0 {
		fmt.Println()
		fmt.Println("Not run (`--skip-slow`): " + strings.Join(d.skipped, "; ") + ".")
	}
}

func slopes(d *data) {
	fmt.Println("## Cost against N: fitted slope")
	fmt.Println()
	fmt.Println("Least-squares line through every run (not the medians) of wall ms = a + b·N for one K over the N measured;")
	fmt.Println("b is the marginal cost per record. Linear growth shows as R² near 1 and as ms/record at the largest N")
	fmt.Println("about equal to (not above) ms/record at N = 1024 (`per-record ratio`; below 1 means fixed costs amortised).")
	fmt.Println("K = 16 (the goal's) first, then K = 1 (every record in one directory) and K = 64 where more than one N")
	fmt.Println("was measured.")
	fmt.Println()
	fmt.Println("| fs | K | strategy | N measured | slope b (ms/record) | intercept a (ms) | R² | per-record ratio largest N ÷ 1024 |")
	fmt.Println("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: |")
	for _, k := range []int{16, 1, 64} {
		for _, fs := range d.fsOrder {
			slopeRows(d, fs, k)
		}
	}
}

// slopeRows prints the slope rows of one filesystem and K, one per strategy
// measured there at more than one N (K = 16: also those at one N).
func slopeRows(d *data, fs string, k int) {
	for _, s := range strategies {
		var xs, ys []float64
		var ns []string
		perRec := map[int]float64{}
		for _, c := range d.cells {
			if c.fs != fs || c.k != k || len(d.renew[c][s]) == 0 {
				continue
			}
			ns = append(ns, strconv.Itoa(c.n))
			for _, smp := range d.renew[c][s] {
				xs = append(xs, float64(c.n))
				ys = append(ys, smp.wall)
			}
			perRec[c.n] = median(walls(d.renew[c][s])) / float64(c.n)
		}
		if len(ns) < 2 {
			if len(ns) == 1 && k == 16 {
				fmt.Printf("| %s | %d | %s | %s | – | – | – | – (one N only) |\n", fs, k, s, ns[0])
			}
			continue
		}
		a, b, r2 := fit(xs, ys)
		largest := 0
		for n := range perRec {
			largest = max(largest, n)
		}
		pr := "–"
		if largest > 1024 && perRec[1024] > 0 {
			pr = fmt.Sprintf("%.2f", perRec[largest]/perRec[1024])
		}
		fmt.Printf("| %s | %d | %s | %s | %.4f | %.1f | %.4f | %s |\n", fs, k, s, strings.Join(ns, ", "), b, a, r2, pr)
	}
}

func memory(d *data) {
	fmt.Println("## Memory (peak RSS, getrusage ru_maxrss)")
	fmt.Println()
	largest := 0
	for _, c := range d.cells {
		largest = max(largest, c.n)
	}
	var worst int64
	var worstAt string
	fmt.Printf("Largest peak RSS of any renew-batch process at N = %d, per filesystem and strategy (MB):\n\n", largest)
	fmt.Println("| fs | " + strings.Join(strategies, " | ") + " | fsck (read-only) |")
	fmt.Println("| --- |" + strings.Repeat(" ---: |", len(strategies)+1))
	for _, fs := range d.fsOrder {
		row := "| " + fs + " |"
		any := false
		for _, s := range strategies {
			var m int64
			for _, c := range d.cells {
				if c.fs == fs && c.n == largest {
					m = max(m, maxRSS(d.renew[c][s]))
				}
			}
			if m > 0 {
				any = true
				row += " " + mb(m) + " |"
				if m > worst && !isPy(s) { // the goal is lease's; the Python baseline is shown, not judged
					worst, worstAt = m, fs+" "+s
				}
			} else {
				row += " – |"
			}
		}
		var fm int64
		for c, xs := range d.fsck {
			if c.fs == fs {
				fm = max(fm, maxRSS(xs))
			}
		}
		if fm > 0 {
			row += " " + mb(fm) + " |"
		} else {
			row += " – |"
		}
		if any || fm > 0 {
			fmt.Println(row)
		}
	}
	fmt.Println()
	verdict := "met"
	if worst >= 64*1024 {
		verdict = "**NOT met**"
	}
	fmt.Printf("Goal: under 64 MB for N = %d: the largest lease process is %s MB (%s): %s. (The py- columns are the\n", largest, mb(worst), worstAt, verdict)
	fmt.Println("Python baseline's processes, not part of the goal.)")
}

func opsTable(d *data) {
	if len(d.ops) == 0 && len(d.fsck) == 0 {
		return
	}
	fmt.Println("## Single-ID claims, group claims, fsck")
	fmt.Println()
	fmt.Println("`claim`: one `lease claim ID` process per fresh ID; `group-claim`: one `lease group-claim T1 T2 T3 T4` process")
	fmt.Println("per group of 4 fresh targets (5 records written: 4 targets and the manifest); `fsck`: read-only `lease fsck`")
	fmt.Println("of the largest renew table. Times are per process, fork to wait.")
	fmt.Println()
	fmt.Println("| fs | operation | processes | median ms | p90 ms | max ms | total s | CPU ms (median) | max RSS MB |")
	fmt.Println("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, fs := range d.fsOrder {
		for _, op := range d.opOrder {
			xs := d.ops[fs][op]
			if len(xs) == 0 {
				continue
			}
			w := walls(xs)
			_, hi := minMax(w)
			var tot float64
			for _, v := range w {
				tot += v
			}
			fmt.Printf("| %s | %s | %d | %.1f | %.1f | %.1f | %.2f | %.1f | %s |\n", fs, op, len(xs), median(w), quantile(w, 0.9), hi, tot/1000, median(cpus(xs)), mb(maxRSS(xs)))
		}
		for c, xs := range d.fsck {
			if c.fs != fs {
				continue
			}
			w := walls(xs)
			_, hi := minMax(w)
			fmt.Printf("| %s | fsck N=%d K=%d | %d | %.1f | %.1f | %.1f | – | %.1f | %s |\n", fs, c.n, c.k, len(xs), median(w), quantile(w, 0.9), hi, median(cpus(xs)), mb(maxRSS(xs)))
		}
	}
}

func writerTable(d *data) {
	if len(d.writers) == 0 {
		return
	}
	fmt.Println("## Writer pool at high latency")
	fmt.Println()
	fmt.Println("Concurrent strategy with `--writers W`, interleaved with the other runs of the same filesystem; `× 64`")
	fmt.Println("is the median of W = 64 divided by the median of this row (> 1: faster than the default pool).")
	fmt.Println("`W-variant`: another build of lease (an engine experiment, `bench/matrix --variant BIN`), same W.")
	fmt.Println()
	fmt.Println("| fs | N | K | writers | runs | median ms | min–max ms | ms/record | CPU ms | max RSS MB | × 64 |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	var cs []cell
	for c := range d.writers {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].fs != cs[j].fs {
			return indexOf(d.fsOrder, cs[i].fs) < indexOf(d.fsOrder, cs[j].fs)
		}
		return cs[i].n < cs[j].n
	})
	for _, c := range cs {
		var ws []string
		for w := range d.writers[c] {
			ws = append(ws, w)
		}
		// by the pool size, then the label ("64" before "64-variant")
		sort.Slice(ws, func(i, j int) bool {
			ni, _ := strconv.Atoi(strings.SplitN(ws[i], "-", 2)[0])
			nj, _ := strconv.Atoi(strings.SplitN(ws[j], "-", 2)[0])
			if ni != nj {
				return ni < nj
			}
			return ws[i] < ws[j]
		})
		base := median(walls(d.writers[c]["64"]))
		if len(d.writers[c]["64"]) == 0 && len(d.renew[c]["concurrent"]) > 0 {
			// no --writers 64 runs here: the plain concurrent runs (default pool, 64) are the base
			xs := d.renew[c]["concurrent"]
			base = median(walls(xs))
			lo, hi := minMax(walls(xs))
			fmt.Printf("| %s | %d | %d | 64 (default; the concurrent runs above) | %d | %.1f | %.1f–%.1f | %.3f | %.1f | %s | 1.00× |\n",
				c.fs, c.n, c.k, len(xs), base, lo, hi, base/float64(c.n), median(cpus(xs)), mb(maxRSS(xs)))
		}
		for _, w := range ws {
			xs := d.writers[c][w]
			m := median(walls(xs))
			lo, hi := minMax(walls(xs))
			fmt.Printf("| %s | %d | %d | %s | %d | %.1f | %.1f–%.1f | %.3f | %.1f | %s | %s |\n",
				c.fs, c.n, c.k, w, len(xs), m, lo, hi, m/float64(c.n), median(cpus(xs)), mb(maxRSS(xs)), ratio(base, m))
		}
	}
}

// makePlots writes the plots and returns their file names (relative to dir).
func makePlots(d *data, dir, prefix string) ([]string, error) {
	var names []string
	var panels []*plot.Plot
	for _, fs := range d.fsOrder {
		p, ok := perRecordPlot(d, fs)
		if !ok {
			continue
		}
		name := prefix + "-" + fs + ".png"
		if err := p.Save(14*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
		panels = append(panels, p)
		names = append(names, name)
	}
	if len(panels) > 0 {
		cols := min(3, len(panels))
		rows := (len(panels) + cols - 1) / cols
		grid := make([][]*plot.Plot, rows)
		for r := range grid {
			grid[r] = make([]*plot.Plot, cols)
			for c := range grid[r] {
				if i := r*cols + c; i < len(panels) {
					// fresh copies: Align changes nothing, but a plot is drawn once per canvas
					p, _ := perRecordPlot(d, d.fsOrder[indexOfPanel(d, i)])
					grid[r][c] = p
				}
			}
		}
		w, h := vg.Length(cols)*12*vg.Centimeter, vg.Length(rows)*9*vg.Centimeter
		img := vgimg.New(w, h)
		dc := draw.New(img)
		t := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
			PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
		cv := plot.Align(grid, t, dc)
		for r := range grid {
			for c := range grid[r] {
				if grid[r][c] != nil {
					grid[r][c].Draw(cv[r][c])
				}
			}
		}
		name := prefix + "-per-record.png"
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		names = append([]string{name}, names...)
	}
	if p, ok := writersPlot(d); ok {
		name := prefix + "-writers.png"
		if err := p.Save(14*vg.Centimeter, 9*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	if p, ok := headlinePlot(d); ok {
		name := "headline.png" // bench/results/headline.png for the full matrix
		if prefix != "matrix" {
			name = prefix + "-headline.png"
		}
		if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
		names = append([]string{name}, names...)
	}
	return names, nil
}

// indexOfPanel maps the i-th panel back to its filesystem (filesystems
// without a plot are skipped in both).
func indexOfPanel(d *data, i int) int {
	seen := 0
	for j, fs := range d.fsOrder {
		if _, ok := perRecordPlot(d, fs); ok {
			if seen == i {
				return j
			}
			seen++
		}
	}
	return 0
}

func logAxes(p *plot.Plot) {
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = ticks125{}
	p.Add(plotter.NewGrid())
}

// ticks125 labels 1, 2 and 5 times the powers of ten in range (LogTicks
// labels only powers of ten, often none or one on these axes).
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)) - 1; e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// headroom widens the log y range so the legend at the top does not
// cover the points.
func headroom(p *plot.Plot, factor float64) {
	p.Y.Min /= 1.3
	p.Y.Max *= factor
}

// perRecordPlot: median ms per record against N at K = 16, one line per
// strategy, and concurrent at K = 1 and 64 (dotted), log-log.
func perRecordPlot(d *data, fs string) (*plot.Plot, bool) {
	p := plot.New()
	p.Title.Text = fs + ": renew-batch, K = 16 (dotted: concurrent at K = 1, 64)"
	p.X.Label.Text = "N (records)"
	p.Y.Label.Text = "ms per record (median)"
	logAxes(p)
	p.Legend.Top = true
	p.Legend.Left = false
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	lines := 0
	for _, s := range strategies {
		var xys plotter.XYs
		for _, c := range d.cells {
			if c.fs == fs && c.k == 16 && len(d.renew[c][s]) > 0 {
				xys = append(xys, plotter.XY{X: float64(c.n), Y: median(walls(d.renew[c][s])) / float64(c.n)})
			}
		}
		if len(xys) < 2 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			continue
		}
		l.Color = colors[s]
		l.Width = vg.Points(1.5)
		pts.Color = colors[s]
		pts.Shape = draw.CircleGlyph{}
		if isPy(s) {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			pts.Shape = draw.BoxGlyph{}
		}
		p.Add(l, pts)
		p.Legend.Add(label[s], l, pts)
		lines++
	}
	// concurrent at the other shard counts, where more than one N was
	// measured: dotted, triangles (K = 1) and crosses (K = 64)
	for _, k := range []int{1, 64} {
		var xys plotter.XYs
		for _, c := range d.cells {
			if c.fs == fs && c.k == k && len(d.renew[c]["concurrent"]) > 0 {
				xys = append(xys, plotter.XY{X: float64(c.n), Y: median(walls(d.renew[c]["concurrent"])) / float64(c.n)})
			}
		}
		if len(xys) < 2 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			continue
		}
		l.Color = colors["concurrent"]
		l.Width = vg.Points(1)
		l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		pts.Color = colors["concurrent"]
		pts.Shape = draw.TriangleGlyph{}
		if k == 64 {
			pts.Shape = draw.CrossGlyph{}
		}
		p.Add(l, pts)
		p.Legend.Add(fmt.Sprintf("%s, K = %d", label["concurrent"], k), l, pts)
		lines++
	}
	headroom(p, 4)
	return p, lines > 0
}

// headlinePlot: ms per record at N = 1024, K = 16, per filesystem
// (x, nominal) and strategy (points, offset a little), log y.
func headlinePlot(d *data) (*plot.Plot, bool) {
	var fss []string
	for _, fs := range d.fsOrder {
		if d.renew[cell{fs, 1024, 16}] != nil {
			fss = append(fss, fs)
		}
	}
	if len(fss) == 0 {
		return nil, false
	}
	p := plot.New()
	p.Title.Text = "renew-batch, N = 1024, K = 16: ms per record (median, log scale)"
	p.Y.Label.Text = "ms per record"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = ticks125{}
	p.Add(plotter.NewGrid())
	p.NominalX(fss...)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	for si, s := range strategies {
		var xys plotter.XYs
		for i, fs := range fss {
			xs := d.renew[cell{fs, 1024, 16}][s]
			if len(xs) == 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: float64(i) + (float64(si)-float64(len(strategies)-1)/2)*0.08, Y: median(walls(xs)) / 1024})
		}
		if len(xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			continue
		}
		sc.Color = colors[s]
		sc.Shape = draw.CircleGlyph{}
		if isPy(s) {
			sc.Shape = draw.BoxGlyph{}
		}
		sc.Radius = vg.Points(4)
		p.Add(sc)
		p.Legend.Add(label[s], sc)
	}
	var exp plotter.XYs
	for i, fs := range fss {
		if xs := d.writers[cell{fs, 1024, 16}]["64-variant"]; len(xs) > 0 {
			exp = append(exp, plotter.XY{X: float64(i) - 0.34, Y: median(walls(xs)) / 1024})
		}
	}
	if len(exp) > 0 {
		if sc, err := plotter.NewScatter(exp); err == nil {
			sc.Color = colors["concurrent"]
			sc.Shape = draw.TriangleGlyph{}
			sc.Radius = vg.Points(4)
			p.Add(sc)
			p.Legend.Add("concurrent, variant build (experiment)", sc)
		}
	}
	p.X.Min, p.X.Max = -0.6, float64(len(fss))-0.4
	headroom(p, 5)
	return p, true
}

// writersPlot: median wall time against the writer pool for every writer
// cell, one line per (filesystem, N, build).
func writersPlot(d *data) (*plot.Plot, bool) {
	if len(d.writers) == 0 {
		return nil, false
	}
	p := plot.New()
	p.Title.Text = "concurrent renew-batch: writer pool (K = 16)"
	p.X.Label.Text = "writers"
	p.Y.Label.Text = "ms per record (median, whole process)"
	logAxes(p)
	p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 16, Label: "16"}, {Value: 32, Label: "32"}, {Value: 64, Label: "64"}, {Value: 128, Label: "128"}, {Value: 256, Label: "256"}})
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	var cs []cell
	for c := range d.writers {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].fs != cs[j].fs {
			return indexOf(d.fsOrder, cs[i].fs) < indexOf(d.fsOrder, cs[j].fs)
		}
		return cs[i].n < cs[j].n
	})
	palette := []color.Color{colors["concurrent"], colors["sequential"], colors["one-at-a-time"], colors["nosync"],
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}}
	lines := 0
	for ci, c := range cs {
		col := palette[ci%len(palette)]
		series := map[string]plotter.XYs{}
		for w, xs := range d.writers[c] {
			num, suffix, _ := strings.Cut(w, "-")
			n, err := strconv.Atoi(num)
			if err != nil {
				continue
			}
			series[suffix] = append(series[suffix], plotter.XY{X: float64(n), Y: median(walls(xs)) / float64(c.n)})
		}
		if _, ok := d.writers[c]["64"]; !ok && len(d.renew[c]["concurrent"]) > 0 {
			series[""] = append(series[""], plotter.XY{X: 64, Y: median(walls(d.renew[c]["concurrent"])) / float64(c.n)})
		}
		var keys []string
		for k := range series {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			xys := series[k]
			sort.Slice(xys, func(i, j int) bool { return xys[i].X < xys[j].X })
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				continue
			}
			l.Color, pts.Color = col, col
			if k != "" {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
				pts.Shape = draw.TriangleGlyph{}
			}
			p.Add(l, pts)
			name := fmt.Sprintf("%s N=%d", c.fs, c.n)
			if k != "" {
				name += " " + k
			}
			p.Legend.Add(name, l, pts)
			lines++
		}
	}
	headroom(p, 4)
	return p, lines > 0
}
