package mpi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Launch detection (docs/design.md#mpi). A launcher's variables are inherited by
// every process its tasks start, so their presence alone does not make a
// process a rank: `mpirun -np 4 worker.sh` and `srun -n 4 worker.sh` start
// scripts whose every `lease` would otherwise join one program. A process
// is a task of the launcher only when it is the program the launcher
// started, which each launcher lets us tell:
//
//   - Open MPI's mpirun (orte/orted/orted_submit.c, create_app) sets
//     OMPI_COMMAND to the basename of the application it starts, beside
//     OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK; a task is a process
//     whose own name is OMPI_COMMAND (a script's children have another).
//   - Slurm's slurmstepd sets SLURM_TASK_PID to the pid of the process it
//     forks for each task, just before exec (src/slurmd/slurmstepd/task.c,
//     exec_task; src/common/env.c, setup_env), with SLURM_PROCID and
//     SLURM_STEP_NUM_TASKS; a task is the process whose pid it is (also
//     through `exec` of a wrapper). The batch script of sbatch has
//     SLURM_TASK_PID too but no SLURM_STEP_NUM_TASKS: it is one process.
//     srun --mpi=pmix adds PMIX_RANK, --mpi=pmi2 PMI_FD, PMI_RANK and
//     PMI_SIZE, --mpi=none nothing.
//   - Other launchers (MPICH's Hydra, PMI_RANK and PMI_SIZE; PMIx
//     launchers, PMIX_RANK) give no way to tell; a process that has their
//     variables is taken for a task.
//
// Checked against Open MPI 4.1.4 and Slurm 22.05.8 by printing the
// environment of mpirun -np 2, srun --mpi=pmix|pmi2|none -n 2, and of
// mpirun and srun inside an sbatch job (commands/slurm_test.go runs each).

// ModeEnv is the variable that overrides the detection: auto (the
// default), on (every process with a launcher's variables is a task, the
// detection before job scripts were told apart), off (no process is: every
// copy runs on its own).
const ModeEnv = "LEASE_MPI"

// Launch is how this process was started, as its environment says.
type Launch struct {
	// Launcher is "mpirun" (Open MPI), "srun" (Slurm), "mpiexec" (another
	// MPI launcher) or "" when no launcher's variables are set.
	Launcher string
	// Size is the number of tasks the launcher started (0 when it does not
	// say) and Rank this process's among them.
	Size, Rank int
	// Task reports whether this process is one of the tasks the launcher
	// started, rather than a process one of them started, after LEASE_MPI:
	// whether it acts as one.
	Task bool
	// PMI is how a task reaches its launcher to join an MPI job: "pmix",
	// "pmi2", "pmi" (Hydra's PMI-1), another plugin's name of srun
	// --mpi=, or "none".
	PMI string
	// Mode is the value of LEASE_MPI: "auto", "on" or "off".
	Mode string
	// Started is what the detection said of Task before LEASE_MPI
	// overrode it.
	Started bool
}

// Test seams: the process's environment, pid and names.
var (
	getenv = os.Getenv
	getpid = os.Getpid
	// ownNames are the names this program may have been started by: the
	// basename of argv[0] and of the executable.
	ownNames = func() []string {
		names := []string{filepath.Base(os.Args[0])}
		if exe, err := os.Executable(); err == nil {
			names = append(names, filepath.Base(exe))
		}
		return names
	}
)

// ErrMode is wrapped by the error of Detect for a malformed LEASE_MPI.
var ErrMode = errors.New("bad " + ModeEnv)

// Detect reads how this process was started. Its only error is a
// LEASE_MPI that is not auto, on or off (wrapping ErrMode).
func Detect() (Launch, error) {
	mode := strings.TrimSpace(getenv(ModeEnv))
	switch mode {
	case "":
		mode = "auto"
	case "auto", "on", "off":
	default:
		return Launch{}, fmt.Errorf("%w: %s=%q: want auto, on or off", ErrMode, ModeEnv, mode)
	}
	l := detect()
	l.Mode, l.Started = mode, l.Task
	switch mode {
	case "on":
		l.Task = l.Launcher != ""
	case "off":
		l.Task = false
	}
	return l, nil
}

func detect() Launch {
	set := func(name string) bool { return getenv(name) != "" }
	switch {
	case set("OMPI_COMM_WORLD_SIZE") || set("OMPI_COMM_WORLD_RANK"):
		l := Launch{Launcher: "mpirun", Size: envInt("OMPI_COMM_WORLD_SIZE"), Rank: envInt("OMPI_COMM_WORLD_RANK"), PMI: "pmix"}
		cmd := getenv("OMPI_COMMAND")
		// Without OMPI_COMMAND (Open MPI unsets it in MPI_Finalize) nothing
		// tells a task from its children: take it for a task.
		l.Task = cmd == ""
		for _, n := range ownNames() {
			l.Task = l.Task || n == cmd
		}
		return l
	case set("SLURM_STEP_NUM_TASKS") && set("SLURM_TASK_PID"):
		l := Launch{Launcher: "srun", Size: envInt("SLURM_STEP_NUM_TASKS"), Rank: envInt("SLURM_PROCID")}
		l.Task = getenv("SLURM_TASK_PID") == strconv.Itoa(getpid())
		switch {
		case set("PMIX_RANK"):
			l.PMI = "pmix"
		case set("PMI_FD") || set("PMI_RANK"):
			l.PMI = "pmi2"
		case set("SLURM_MPI_TYPE") && getenv("SLURM_MPI_TYPE") != "none":
			l.PMI = getenv("SLURM_MPI_TYPE")
		default:
			l.PMI = "none"
		}
		return l
	case set("PMIX_RANK"):
		return Launch{Launcher: "mpiexec", Size: envInt("PMI_SIZE"), Rank: envInt("PMIX_RANK"), PMI: "pmix", Task: true}
	case set("PMI_RANK") || set("PMI_SIZE"):
		return Launch{Launcher: "mpiexec", Size: envInt("PMI_SIZE"), Rank: envInt("PMI_RANK"), PMI: "pmi", Task: true}
	}
	return Launch{PMI: "none"}
}

// envInt returns the first of names that holds a non-negative integer, or 0.
func envInt(names ...string) int {
	for _, name := range names {
		if n, err := strconv.Atoi(getenv(name)); err == nil && n >= 0 {
			return n
		}
	}
	return 0
}

// Distributed reports whether this process is one of several tasks of a
// launcher: one of the ranks of one program. A launcher that does not say
// how many tasks it started is taken to have started several.
func (l Launch) Distributed() bool { return l.Task && l.Size != 1 }

// Unit is what the launcher calls its processes: "tasks" for srun,
// "ranks" for the MPI launchers.
func (l Launch) Unit() string {
	if l.Launcher == "srun" {
		return "tasks"
	}
	return "ranks"
}

// String says how this process was started, for messages:
// "srun --mpi=none as task 0 of 4 tasks", "mpirun as rank 2 of 3 ranks".
func (l Launch) String() string {
	if l.Launcher == "" {
		return "no launcher"
	}
	name := l.Launcher
	if l.Launcher == "srun" {
		name += " --mpi=" + l.PMI
	}
	size := "?"
	if l.Size > 0 {
		size = strconv.Itoa(l.Size)
	}
	return fmt.Sprintf("%s as %s %d of %s %s", name, strings.TrimSuffix(l.Unit(), "s"), l.Rank, size, l.Unit())
}

// ErrCannotJoin is wrapped by the error of Check: the launcher started
// several tasks that cannot become one program.
var ErrCannotJoin = errors.New("cannot run as one program")

// Check reports whether the tasks of a distributed launch can join one
// MPI program in this build, before anything is done: nil when they can
// (or when the process is not one of several tasks), else an error
// wrapping ErrCannotJoin that names the launcher and the fix. A binary
// built without MPI cannot join; nor can tasks that srun started without
// an MPI plugin (--mpi=none), nor a PMI this build's MPI library does not
// speak (LEASE_MPI=on tries anyway).
func (l Launch) Check() error {
	if !l.Distributed() {
		return nil
	}
	n := "the"
	if l.Size > 0 {
		n = strconv.Itoa(l.Size)
	}
	copies := fmt.Sprintf("; to run %s independent copies instead, set %s=off", n, ModeEnv)
	if !Compiled {
		fix := "build it with `make` (with Open MPI installed: apt-get install openmpi-bin libopenmpi-dev) or `go build -tags mpi`"
		if l.Launcher == "srun" {
			fix += " and start it with srun --mpi=pmix, or with mpirun inside the allocation"
		}
		return fmt.Errorf("%w: started by %s, but this lease was built without MPI support: %s%s", ErrCannotJoin, l, fix, copies)
	}
	if l.PMI == "none" {
		return fmt.Errorf("%w: started by %s, which gives the tasks no way to join one MPI program: use srun --mpi=pmix (srun --mpi=list shows the plugins), or mpirun inside the allocation%s", ErrCannotJoin, l, copies)
	}
	if l.Mode != "on" && !speaks(l.PMI) {
		alt := "srun --mpi=pmix, or mpirun inside the allocation"
		if l.Launcher != "srun" {
			alt = "Open MPI's mpirun"
		}
		return fmt.Errorf("%w: started by %s through %s, which this lease's MPI library (%s) does not speak: use %s (%s=on tries anyway)%s",
			ErrCannotJoin, l, strings.ToUpper(l.PMI), library(), alt, ModeEnv, copies)
	}
	return nil
}
