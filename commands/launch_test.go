package commands_test

// What each command does when a launcher started it as one of several
// tasks (docs/design.md#mpi), in process: the launcher's variables are set as srun
// sets them for the task whose pid is this process's.

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/mpi"
)

// asSrunTask makes this process task rank of size of srun --mpi=none.
func asSrunTask(t *testing.T, rank, size int) {
	t.Helper()
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMMAND", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "PMI_FD", "SLURM_MPI_TYPE", mpi.ModeEnv} {
		t.Setenv(v, "")
	}
	t.Setenv("SLURM_STEP_NUM_TASKS", strconv.Itoa(size))
	t.Setenv("SLURM_PROCID", strconv.Itoa(rank))
	t.Setenv("SLURM_TASK_PID", strconv.Itoa(os.Getpid()))
}

func launchRun(args ...string) (code int, out, errOut string) {
	var o, e bytes.Buffer
	code = commands.Run(append([]string{"lease"}, args...), strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

// TestLaunchPolicies: every command says what it does as one of several
// tasks.
func TestLaunchPolicies(t *testing.T) {
	t.Parallel()
	for _, c := range commands.NewApp().Commands {
		if p, ok := commands.LaunchPolicyOf(c.Name); !ok {
			t.Errorf("lease %s has no launch policy", c.Name)
		} else {
			t.Logf("%s: %s", c.Name, p)
		}
	}
}

// TestLaunchGate: as task 1 of 4 of srun, a command that only looks
// prints nothing and exits 0 (task 0 prints for the job), one that writes
// alone refuses naming srun, and, in a build without MPI, a distributed
// one refuses naming the build; nothing is created. As task 0 the looking
// command prints. A bad LEASE_MPI is a usage error.
func TestLaunchGate(t *testing.T) {
	root := t.TempDir() + "/table"
	asSrunTask(t, 1, 4)
	if code, out, errOut := launchRun("version"); code != 0 || out != "" || errOut != "" {
		t.Errorf("version as task 1: exit %d, %q, %q; want 0 and silence", code, out, errOut)
	}
	code, out, errOut := launchRun("init", "--root", root)
	if code != 2 || out != "" || !strings.Contains(errOut, "not as one of 4 tasks (started by srun --mpi=none as task 1 of 4 tasks)") || !strings.Contains(errOut, "LEASE_MPI=off") {
		t.Errorf("init as task 1: exit %d, %q, %q", code, out, errOut)
	}
	code, _, errOut = launchRun("run", "--root", root, strings.Repeat("a", 64), "--", "true")
	if code != 125 || !strings.Contains(errOut, "srun -n 4 worker.sh") {
		t.Errorf("run as task 1: exit %d, %q; want 125 and the worker script fix", code, errOut)
	}
	code, _, errOut = launchRun("renew-batch", "--root", root)
	if mpi.Compiled {
		if code != 2 || !strings.Contains(errOut, "srun --mpi=none") {
			t.Errorf("renew-batch as task 1 under srun --mpi=none: exit %d, %q", code, errOut)
		}
	} else if code != 2 || !strings.Contains(errOut, "built without MPI support") || !strings.Contains(errOut, "srun --mpi=pmix") {
		t.Errorf("renew-batch as task 1 without MPI: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(root); err == nil {
		t.Errorf("a refused command created %s", root)
	}
	asSrunTask(t, 0, 4)
	if code, out, _ := launchRun("version"); code != 0 || !strings.Contains(out, "lease ") {
		t.Errorf("version as task 0: exit %d, %q", code, out)
	}
	t.Setenv(mpi.ModeEnv, "off")
	if code, _, errOut := launchRun("init", "--root", root); code != 0 {
		t.Errorf("init with LEASE_MPI=off: exit %d, %s", code, errOut)
	}
	t.Setenv(mpi.ModeEnv, "maybe")
	if code, _, errOut := launchRun("status", "--root", root); code != 2 || !strings.Contains(errOut, `LEASE_MPI="maybe"`) {
		t.Errorf("status with LEASE_MPI=maybe: exit %d, %q", code, errOut)
	}
}
