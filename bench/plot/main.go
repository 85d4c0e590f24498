// Command plot turns the raw samples of bench/matrix into the Markdown
// tables of bench/results/matrix.md (medians, goal ratios, fitted slopes
// of wall time against N, memory, per-process claims, group claims, fsck,
// writer pool) and the plots beside it (gonum/plot, PNG):
//
//	plot --raw FILE --dir DIR [--prefix NAME]
//	plot --worker RAW.jsonl --dir DIR
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
// With --worker it draws bench/worker's plots instead (worker.go).
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
	"flag"
	"fmt"
	"image/color"
	"os"
	"strings"
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
	worker := flag.String("worker", "", "bench/worker's raw.jsonl: write its plots (worker-floor-FS.png) to --dir instead")
	flag.Parse()
	if *worker != "" {
		names, err := workerPlots(*worker, *dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "plot:", err)
			os.Exit(1)
		}
		for _, n := range names {
			fmt.Println(n)
		}
		return
	}
	if *rawPath == "" {
		fmt.Fprintln(os.Stderr, "usage: plot --raw FILE --dir DIR [--prefix NAME] | plot --worker RAW.jsonl --dir DIR")
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
