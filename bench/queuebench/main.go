// Command queuebench measures the table's work queue (issue 20): what a
// campaign of a million items costs as it progresses.
//
//	queuebench enqueue  --lease BIN --dir DIR --items N --shards K --reps R
//	    lease add of N IDs into a fresh table, against a floor that creates
//	    the same empty queue files from one process with no fsync (one
//	    syncfs(2) at the end); wall time, peak RSS, directory fsyncs.
//	queuebench sweep    --lease BIN --dir DIR --items N --shards K --reps R [--fuse-delay D --faultfs BIN]
//	    a table of N queued items, brought to 0%, 50%, 90% and 99% done
//	    (done records written directly, their entries removed); at each
//	    point R interleaved `lease claim --next 1` and `lease claim ID` (of
//	    a known free ID) processes: p50, p99, peak RSS; with --fuse-delay the
//	    claims go through a faultfs mount of the table that delays create,
//	    fsync, rename and fsyncdir by D, and the FUSE requests per grant are
//	    counted.
//	queuebench campaign --lease BIN --dir DIR --items N --workers W --mode next|first|parallel
//	    W workers over N items until all are done: `lease run --next
//	    --complete -- true` loops, `claim --first 1 - < todo` loops, or GNU
//	    parallel's SQL queue (--sqlmaster/--sqlworker on sqlite3 in DIR);
//	    items/s over the campaign and per decile of it.
//	queuebench report   --dir DIR
//	    DIR/queue.md and its plots from the JSON files bench/queue wrote.
//
// Each prints one JSON object on stdout; bench/queue runs them on loop
// images and writes bench/results/queue.md.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"sort"
	"syscall"
	"time"

	"github.com/leasetool/lease/bench/internal/spread"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fl := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	o := opts{}
	fl.StringVar(&o.lease, "lease", "lease", "the lease binary")
	fl.StringVar(&o.dir, "dir", "", "work directory on the filesystem measured (required)")
	fl.IntVar(&o.items, "items", 1000000, "items")
	fl.IntVar(&o.shards, "shards", 64, "work shards")
	fl.IntVar(&o.reps, "reps", 30, "repetitions")
	fl.IntVar(&o.workers, "workers", 16, "campaign workers")
	fl.StringVar(&o.mode, "mode", "next", "campaign workers: next, first, parallel")
	fl.DurationVar(&o.fuseDelay, "fuse-delay", 0, "measure claims through a faultfs mount with this delay")
	fl.StringVar(&o.faultfs, "faultfs", "lease-faultfs", "the lease-faultfs binary")
	fl.StringVar(&o.fractions, "fractions", "0,0.5,0.9,0.99", "fractions done of the sweep")
	fl.Parse(os.Args[2:])
	if o.dir == "" {
		usage()
	}
	var res any
	var err error
	switch os.Args[1] {
	case "enqueue":
		res, err = enqueue(o)
	case "sweep":
		res, err = sweep(o)
	case "campaign":
		res, err = campaign(o)
	case "report":
		if err := report(o.dir); err != nil {
			fmt.Fprintln(os.Stderr, "queuebench:", err)
			os.Exit(1)
		}
		return
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "queuebench:", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	enc.Encode(res)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: queuebench enqueue|sweep|campaign --dir DIR [--lease BIN] [--items N] [--shards K] [--reps R] ...")
	os.Exit(2)
}

type opts struct {
	lease, dir, mode, faultfs, fractions string
	items, shards, reps, workers         int
	fuseDelay                            time.Duration
}

// proc is one timed process.
type proc struct {
	wall   time.Duration
	maxRSS int64 // KiB
	code   int
	out    []byte
	errOut []byte
}

// run runs name args with stdin from file in ("" for none), timing it from
// just before fork to just after wait.
func run(in string, name string, args ...string) (proc, error) {
	cmd := exec.Command(name, args...)
	if in != "" {
		f, err := os.Open(in)
		if err != nil {
			return proc{}, err
		}
		defer f.Close()
		cmd.Stdin = f
	}
	var out, errOut limited
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	p := proc{wall: time.Since(start), out: out.b, errOut: errOut.b}
	if cmd.ProcessState != nil {
		p.code = cmd.ProcessState.ExitCode()
		p.maxRSS = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
	}
	if _, ok := err.(*exec.ExitError); ok {
		err = nil
	}
	return p, err
}

// limited keeps the first 1 MiB written to it.
type limited struct{ b []byte }

func (l *limited) Write(p []byte) (int, error) {
	if room := 1<<20 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// stats are percentiles of durations, in milliseconds.
type stats struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func summarize(ds []time.Duration) stats {
	if len(ds) == 0 {
		return stats{}
	}
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = d.Seconds() * 1e3
	}
	sort.Float64s(ms)
	pct := func(p float64) float64 { return ms[max(0, int(math.Ceil(p*float64(len(ms))))-1)] }
	return stats{N: len(ms), P50: pct(0.5), P99: pct(0.99), Max: ms[len(ms)-1]}
}

// writeIDs writes IDs [from, to) to file, one per line.
func writeIDs(file string, from, to int) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	b := make([]byte, 0, 1<<20)
	for i := from; i < to; i++ {
		b = append(b, spread.ID(i)...)
		b = append(b, '\n')
		if len(b) > 1<<20-100 {
			if _, err := f.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	if _, err := f.Write(b); err != nil {
		return err
	}
	return f.Close()
}
