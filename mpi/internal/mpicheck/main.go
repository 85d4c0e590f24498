// Command mpicheck exercises package mpi under a real mpirun for mpi's
// tests (mpirun_test.go). Build it with -tags mpi.
//
//	mpicheck -seed S -out DIR [-timeout D]
//
// runs the plan of package plan and writes DIR/rank-R.json on every rank.
//
//	mpicheck -stall RANK -op Gather|Bcast|AllGather -timeout D [-die]
//
// makes rank RANK sleep a minute (or, with -die, exit 3) instead of
// entering the collective op, which every other rank calls: the watchdog
// must end the job.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/leasetool/lease/mpi"
	"github.com/leasetool/lease/mpi/internal/mpicheck/plan"
)

func main() {
	seed := flag.Uint64("seed", 1, "seed of the plan")
	out := flag.String("out", "", "directory for the per-rank reports")
	timeout := flag.Duration("timeout", 30*time.Second, "watchdog timeout")
	stall := flag.Int("stall", -1, "rank that does not enter the collective")
	op := flag.String("op", "Gather", "collective of the stall case")
	die := flag.Bool("die", false, "the stalled rank exits instead of sleeping")
	flag.Parse()

	w, err := mpi.Init(*timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpicheck:", err)
		os.Exit(2)
	}
	if *stall >= 0 {
		err = stallCase(w, *stall, *op, *die)
	} else {
		err = runPlan(w, *seed, *out)
	}
	if err == nil {
		err = w.Finalize()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mpicheck: rank %d: %v\n", w.Rank(), err)
		os.Exit(1)
	}
}

func stallCase(w *mpi.World, stall int, op string, die bool) error {
	if w.Rank() == stall {
		if die {
			os.Exit(3)
		}
		time.Sleep(time.Minute)
	}
	var err error
	switch op {
	case "Gather":
		_, err = w.Gather(0, []byte("x"))
	case "Bcast":
		_, err = w.Bcast(0, []byte("x"))
	case "AllGather":
		_, err = w.AllGather([]byte("x"))
	default:
		return fmt.Errorf("unknown collective %q", op)
	}
	if err != nil {
		return err
	}
	fmt.Printf("mpicheck: rank %d: %s completed\n", w.Rank(), op)
	return nil
}

func runPlan(w *mpi.World, seed uint64, out string) error {
	size, rank := w.Size(), w.Rank()
	rep := plan.Report{Rank: rank, Size: size, Compiled: mpi.Compiled, Host: w.Host()}
	l, _ := mpi.Detect()
	rep.Launcher, rep.LaunchSize, rep.LaunchRank, rep.LaunchTask = l.Launcher, l.Size, l.Rank, l.Task

	for round, b := range plan.Bcasts(seed, size) {
		data := plan.Payload(seed, "junk", round, rank, 17*rank+round)
		if rank == b.Root {
			data = plan.Payload(seed, "bcast", round, rank, b.Len)
		}
		got, err := w.Bcast(b.Root, data)
		if err != nil {
			return err
		}
		rep.Bcast = append(rep.Bcast, plan.Sum(got))
	}
	for round, g := range plan.Gathers(seed, "gather", size) {
		got, err := w.Gather(g.Root, plan.Payload(seed, "gather", round, rank, g.Lens[rank]))
		if err != nil {
			return err
		}
		rep.Gather = append(rep.Gather, sums(got))
	}
	for round, g := range plan.Gathers(seed, "allgather", size) {
		got, err := w.AllGather(plan.Payload(seed, "allgather", round, rank, g.Lens[rank]))
		if err != nil {
			return err
		}
		rep.AllGather = append(rep.AllGather, sums(got))
	}
	for _, vals := range plan.Values(seed, size) {
		got, err := w.AllMaxInt(vals[rank])
		if err != nil {
			return err
		}
		rep.Max = append(rep.Max, got)
	}
	if err := w.Barrier(); err != nil {
		return err
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, fmt.Sprintf("rank-%d.json", rank)), b, 0o644)
}

// sums keeps nil apart from empty: a non-root Gather must return nil.
func sums(parts [][]byte) []plan.Digest {
	if parts == nil {
		return nil
	}
	out := make([]plan.Digest, len(parts))
	for i, p := range parts {
		out[i] = plan.Sum(p)
	}
	return out
}
