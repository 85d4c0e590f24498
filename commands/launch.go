package commands

import (
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/mpi"
)

// What each command does when a launcher (mpirun, srun) started it as one
// of several tasks (docs/design.md#mpi). Whether it was is package mpi's answer
// (mpi.Detect: only the program the launcher started is a task, so a
// lease that a job script calls is a plain process); what a command does
// then is its Descriptor's Launch, applied here, once, before its action
// runs and before anything is read or written.

// LaunchPolicy is what a command does as one of several tasks (its
// Descriptor's Launch).
type LaunchPolicy int

const (
	// launchUnset: a descriptor must name its policy (register refuses
	// one that does not).
	launchUnset LaunchPolicy = iota
	// Distributed: the tasks run the command as one program (package
	// cluster); rank 0 reads the input and alone writes stdout. A launch
	// whose tasks cannot join one program refuses (exit 2).
	Distributed
	// Once: a command that only looks runs on task 0 alone; the other
	// tasks exit 0 at once and print nothing, so the job prints once.
	Once
	// Alone: a command that writes and does not run across tasks refuses
	// (its usage status), since every task would do it.
	Alone
)

// String names the policy: distributed, once or alone.
func (p LaunchPolicy) String() string {
	switch p {
	case Distributed:
		return "distributed"
	case Once:
		return "once"
	case Alone:
		return "alone"
	}
	return "unset"
}

// commandsWith lists the commands of a policy, sorted, for messages and
// man pages.
func commandsWith(p LaunchPolicy) string {
	var names []string
	for _, d := range descriptors {
		if d.Launch == p {
			names = append(names, d.Command.Name)
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

// launchGate is the Before of the command of d: it applies the command's
// policy under a launcher.
func launchGate(d *Descriptor) cli.BeforeFunc {
	code := d.usageExit()
	return func(c *cli.Context) error {
		l, err := mpi.Detect()
		if err != nil {
			return cli.Exit(leasefmt.Bound(err.Error()), code)
		}
		if !l.Distributed() {
			return nil
		}
		switch d.Launch {
		case Once:
			if l.Rank != 0 {
				return cli.Exit("", exitcode.OK) // task 0 prints for the job
			}
			return nil
		case Alone:
			return cli.Exit(leasefmt.Bound(aloneMessage(d.Worker, l)), code)
		}
		if err := l.Check(); err != nil {
			return cli.Exit(leasefmt.Bound(err.Error()), exitcode.Usage)
		}
		return nil
	}
}

// aloneMessage says why a command refuses to run as several tasks, and
// what to do instead: for a worker's command, a script that calls lease.
func aloneMessage(worker bool, l mpi.Launch) string {
	n := "several"
	if l.Size > 0 {
		n = fmt.Sprint(l.Size)
	}
	fix := "run it once, outside the launcher (or with -np 1 / -n 1)"
	if worker {
		fix = fmt.Sprintf("to start %s independent workers, let the launcher start a script that calls lease (%s %s worker.sh)", n, l.Launcher, npFlag(l))
		if l.Launcher == "srun" {
			// Slurm names a task by its pid, which exec keeps: a script
			// that ends in `exec lease ...` is the task itself.
			fix += "; under srun that script must not exec lease, which would make lease the task"
		}
	}
	return fmt.Sprintf("runs as one process, not as one of %s %s (started by %s): %s; %s=off makes every task run it on its own (%s run as one program across %s)",
		n, l.Unit(), l, fix, mpi.ModeEnv, commandsWith(Distributed), l.Unit())
}

func npFlag(l mpi.Launch) string {
	if l.Launcher == "srun" {
		return fmt.Sprintf("-n %d", l.Size)
	}
	return fmt.Sprintf("-np %d", l.Size)
}

// launchNote is the paragraph of a man page on what a command of policy p
// does under mpirun and srun.
func launchNote(p LaunchPolicy) string {
	switch p {
	case Once:
		return "Started by mpirun or srun as several tasks, only task 0 runs it and prints; the others exit 0 at once, printing nothing."
	case Alone:
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
		commandsWith(Distributed) + " run as one program across the tasks; " + commandsWith(Once) +
		" run on task 0 alone, which prints for the job; " + commandsWith(Alone) + " refuse to run as several tasks. " +
		"A launch whose tasks cannot become one program (a build without MPI, srun --mpi=none, a PMI the MPI library lacks) " +
		"refuses with exit 2 before it reads or writes anything, naming the launcher and the fix. " + mpi.ModeEnv + " overrides the detection."
}
