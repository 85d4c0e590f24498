package commands

import (
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/mpi"
)

// What each command does when a launcher (mpirun, srun) started it as one
// of several tasks (SPEC §8). Whether it was is package mpi's answer
// (mpi.Detect: only the program the launcher started is a task, so a
// lease that a job script calls is a plain process); what a command does
// then is decided here, once, before its action runs and before anything
// is read or written.

// launchPolicy is what a command does as one of several tasks.
type launchPolicy int

const (
	// distributed: the tasks run the command as one program (package
	// cluster); rank 0 reads the input and alone writes stdout. A launch
	// whose tasks cannot join one program refuses (exit 2).
	distributed launchPolicy = iota
	// once: a command that only looks runs on task 0 alone; the other
	// tasks exit 0 at once and print nothing, so the job prints once.
	once
	// alone: a command that writes and does not run across tasks refuses
	// (its usage status), since every task would do it.
	alone
)

// launchPolicies gives every command of NewApp its policy (a test checks
// that none is missing).
var launchPolicies = map[string]launchPolicy{
	"add":           distributed,
	"claim":         distributed,
	"renew-batch":   distributed,
	"release":       distributed,
	"revoke":        distributed,
	"retry":         distributed,
	"verify":        distributed,
	"qualify":       distributed,
	"status":        once,
	"config":        once,
	"version":       once,
	"id":            once,
	"init":          alone,
	"complete":      alone,
	"group-claim":   alone,
	"group-renew":   alone,
	"group-release": alone,
	"run":           alone,
	"fsck":          alone,
}

// commandsWith lists the commands of a policy, sorted, for messages and
// man pages.
func commandsWith(p launchPolicy) string {
	var names []string
	for n, q := range launchPolicies {
		if q == p {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// launch is how this process was started (mpi.Detect; its error, a bad
// LEASE_MPI, is reported by launchGate before any command runs).
func launch() mpi.Launch {
	l, _ := mpi.Detect()
	return l
}

// launchGate is the Before of command name, whose usage errors exit with
// code: it applies the command's policy under a launcher.
func launchGate(name string, code int) cli.BeforeFunc {
	return func(c *cli.Context) error {
		l, err := mpi.Detect()
		if err != nil {
			return cli.Exit(leasefmt.Bound(err.Error()), code)
		}
		if !l.Distributed() {
			return nil
		}
		switch launchPolicies[name] {
		case once:
			if l.Rank != 0 {
				return cli.Exit("", 0) // task 0 prints for the job
			}
			return nil
		case alone:
			return cli.Exit(leasefmt.Bound(aloneMessage(name, l)), code)
		}
		if err := l.Check(); err != nil {
			return cli.Exit(leasefmt.Bound(err.Error()), 2)
		}
		return nil
	}
}

// aloneMessage says why a command refuses to run as several tasks, and
// what to do instead.
func aloneMessage(name string, l mpi.Launch) string {
	n := "several"
	if l.Size > 0 {
		n = fmt.Sprint(l.Size)
	}
	fix := "run it once, outside the launcher (or with -np 1 / -n 1)"
	if name == "run" || name == "complete" {
		fix = fmt.Sprintf("to start %s independent workers, let the launcher start a script that calls lease (%s %s worker.sh)", n, l.Launcher, npFlag(l))
	}
	return fmt.Sprintf("runs as one process, not as one of %s %s (started by %s): %s; %s=off makes every task run it on its own (%s run as one program across %s)",
		n, l.Unit(), l, fix, mpi.ModeEnv, commandsWith(distributed), l.Unit())
}

func npFlag(l mpi.Launch) string {
	if l.Launcher == "srun" {
		return fmt.Sprintf("-n %d", l.Size)
	}
	return fmt.Sprintf("-np %d", l.Size)
}

// launchNote is the paragraph of a command's man page on what it does
// under mpirun and srun.
func launchNote(name string) string {
	switch launchPolicies[name] {
	case once:
		return "Started by mpirun or srun as several tasks, only task 0 runs it and prints; the others exit 0 at once, printing nothing."
	case alone:
		return "Started by mpirun or srun as several tasks it refuses to run (every task would do it), naming the launcher; a `lease` that a job script calls is one process and runs normally (" + mpi.ModeEnv + "=off makes every task run it on its own)."
	}
	return "Started by mpirun or srun as several tasks (built with MPI support; under srun with --mpi=pmix) the tasks run it as one program and only rank 0 writes stdout; a launch whose tasks cannot join one program (a build without MPI, srun --mpi=none, a PMI the MPI library lacks) refuses with exit 2 before anything is read or written. A `lease` that a job script calls is one process and runs on its own."
}

// launchParagraph is what lease(1) says of launchers.
func launchParagraph() string {
	return "Under a launcher (mpirun, srun) only the program the launcher started is one of its tasks: " +
		"`mpirun -np 64 lease renew-batch held` and `srun --mpi=pmix -n 64 lease renew-batch held` (built with MPI support) " +
		"run as one program whose rank 0 alone reads the input and writes stdout, while the lease commands of a worker script " +
		"started by `mpirun -np 64 worker.sh` or `srun -n 64 worker.sh` (or by a job array) run as 64 separate processes. " +
		commandsWith(distributed) + " run as one program across the tasks; " + commandsWith(once) +
		" run on task 0 alone, which prints for the job; " + commandsWith(alone) + " refuse to run as several tasks. " +
		"A launch whose tasks cannot become one program (a build without MPI, srun --mpi=none, a PMI the MPI library lacks) " +
		"refuses with exit 2 before it reads or writes anything, naming the launcher and the fix. " + mpi.ModeEnv + " overrides the detection."
}
