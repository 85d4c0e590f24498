package mpi

import (
	"errors"
	"strings"
	"testing"
)

// withProcess makes Detect see env (nothing else), pid and names.
func withProcess(t *testing.T, env map[string]string, pid int, names ...string) {
	t.Helper()
	oldEnv, oldPid, oldNames := getenv, getpid, ownNames
	getenv = func(k string) string { return env[k] }
	getpid = func() int { return pid }
	ownNames = func() []string { return names }
	t.Cleanup(func() { getenv, getpid, ownNames = oldEnv, oldPid, oldNames })
}

// The environments below are those Open MPI 4.1.4 and Slurm 22.05.8 gave
// (mpirun -np 2, srun --mpi=pmix|pmi2|none -n 2, sbatch), cut to the
// variables Detect reads.
var (
	mpirunRank1  = map[string]string{"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMMAND": "lease", "PMIX_RANK": "1"}
	mpirunScript = map[string]string{"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMMAND": "worker.sh", "PMIX_RANK": "1"}
	srunPMIx     = map[string]string{"SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4", "SLURM_PROCID": "3", "SLURM_TASK_PID": "500", "SLURM_MPI_TYPE": "pmix", "PMIX_RANK": "3"}
	srunPMI2     = map[string]string{"SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "1", "SLURM_TASK_PID": "500", "SLURM_MPI_TYPE": "pmi2", "PMI_FD": "11", "PMI_RANK": "1", "PMI_SIZE": "4"}
	srunNone     = map[string]string{"SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "0", "SLURM_TASK_PID": "500"}
	sbatchScript = map[string]string{"SLURM_JOB_ID": "5", "SLURM_NTASKS": "4", "SLURM_PROCID": "0", "SLURM_TASK_PID": "500"}
	// mpirun inside an sbatch job: the batch script's Slurm variables and
	// the rank's own.
	mpirunInJob = map[string]string{"SLURM_JOB_ID": "5", "SLURM_NTASKS": "4", "SLURM_PROCID": "0", "SLURM_TASK_PID": "400",
		"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMMAND": "lease"}
)

func with(env map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range env {
		if a != k {
			out[a] = b
		}
	}
	return out
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		pid   int
		names []string
		want  Launch
	}{
		{"no launcher", nil, 500, []string{"lease"}, Launch{PMI: "none", Mode: "auto"}},
		{"mpirun lease", mpirunRank1, 500, []string{"lease"}, Launch{"mpirun", 2, 1, true, "pmix", "auto", true}},
		{"mpirun lease by the executable's name", mpirunRank1, 500, []string{"lease-wrapper", "lease"}, Launch{"mpirun", 2, 1, true, "pmix", "auto", true}},
		{"lease in a script mpirun started", mpirunScript, 500, []string{"lease"}, Launch{"mpirun", 2, 1, false, "pmix", "auto", false}},
		{"mpirun without OMPI_COMMAND", with(mpirunRank1, "OMPI_COMMAND", ""), 500, []string{"lease"}, Launch{"mpirun", 2, 1, true, "pmix", "auto", true}},
		{"srun --mpi=pmix lease", srunPMIx, 500, []string{"lease"}, Launch{"srun", 4, 3, true, "pmix", "auto", true}},
		{"lease in a script srun started", srunPMIx, 501, []string{"lease"}, Launch{"srun", 4, 3, false, "pmix", "auto", false}},
		{"srun --mpi=pmi2 lease", srunPMI2, 500, []string{"lease"}, Launch{"srun", 4, 1, true, "pmi2", "auto", true}},
		{"srun --mpi=none lease", srunNone, 500, []string{"lease"}, Launch{"srun", 4, 0, true, "none", "auto", true}},
		{"srun -n 1 lease", with(srunNone, "SLURM_STEP_NUM_TASKS", "1"), 500, []string{"lease"}, Launch{"srun", 1, 0, true, "none", "auto", true}},
		{"sbatch script's lease", sbatchScript, 500, []string{"lease"}, Launch{PMI: "none", Mode: "auto"}},
		{"mpirun in an sbatch job", mpirunInJob, 401, []string{"lease"}, Launch{"mpirun", 2, 0, true, "pmix", "auto", true}},
		{"hydra", map[string]string{"PMI_SIZE": "8", "PMI_RANK": "7"}, 500, []string{"lease"}, Launch{"mpiexec", 8, 7, true, "pmi", "auto", true}},
		{"pmix launcher", map[string]string{"PMIX_RANK": "1"}, 500, []string{"lease"}, Launch{"mpiexec", 0, 1, true, "pmix", "auto", true}},
		{"malformed numbers", map[string]string{"PMI_SIZE": "many", "PMI_RANK": "-1"}, 500, []string{"lease"}, Launch{"mpiexec", 0, 0, true, "pmi", "auto", true}},
		{"LEASE_MPI=on in a script", with(mpirunScript, ModeEnv, "on"), 500, []string{"lease"}, Launch{"mpirun", 2, 1, true, "pmix", "on", false}},
		{"LEASE_MPI=on without a launcher", map[string]string{ModeEnv: "on"}, 500, []string{"lease"}, Launch{PMI: "none", Mode: "on"}},
		{"LEASE_MPI=off under srun", with(srunPMIx, ModeEnv, "off"), 500, []string{"lease"}, Launch{"srun", 4, 3, false, "pmix", "off", true}},
		{"LEASE_MPI=auto", with(srunPMIx, ModeEnv, " auto "), 500, []string{"lease"}, Launch{"srun", 4, 3, true, "pmix", "auto", true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withProcess(t, tc.env, tc.pid, tc.names...)
			got, err := Detect()
			if err != nil || got != tc.want {
				t.Errorf("Detect() = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	withProcess(t, map[string]string{ModeEnv: "yes"}, 1, "lease")
	if _, err := Detect(); !errors.Is(err, ErrMode) || !strings.Contains(err.Error(), `LEASE_MPI="yes"`) {
		t.Errorf("Detect() with LEASE_MPI=yes: %v; want ErrMode naming the value", err)
	}
}

func TestLaunchCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Launch
		// ok: the tasks can join in this build; want: what the error says.
		ok   bool
		want []string
	}{
		{"no launcher", Launch{PMI: "none", Mode: "auto"}, true, nil},
		{"one task", Launch{"srun", 1, 0, true, "none", "auto", true}, true, nil},
		{"a script's child", Launch{"srun", 4, 0, false, "none", "auto", false}, true, nil},
		{"srun --mpi=none", Launch{"srun", 4, 2, true, "none", "auto", true}, false, []string{"srun --mpi=none as task 2 of 4", "srun --mpi=pmix", "LEASE_MPI=off", "4 independent copies"}},
		{"srun --mpi=pmix", Launch{"srun", 4, 2, true, "pmix", "auto", true}, Compiled, []string{"srun --mpi=pmix as task 2 of 4", "built without MPI support", "-tags mpi"}},
		{"mpirun", Launch{"mpirun", 3, 1, true, "pmix", "auto", true}, Compiled, []string{"mpirun as rank 1 of 3", "built without MPI support"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.l.Check()
			if (err == nil) != tc.ok {
				t.Fatalf("Check() = %v; want ok %v", err, tc.ok)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, ErrCannotJoin) {
				t.Errorf("Check() = %v; want ErrCannotJoin", err)
			}
			for _, w := range tc.want {
				if !Compiled || !strings.Contains(w, "without MPI") {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Check() = %q; want it to say %q", err, w)
					}
				}
			}
		})
	}
	// PMI-2: this build's Open MPI (Debian 12's 4.1.4) has no PMI-2
	// component; LEASE_MPI=on tries anyway.
	pmi2 := Launch{"srun", 4, 1, true, "pmi2", "auto", true}
	err := pmi2.Check()
	if err == nil && !speaks("pmi2") || err != nil && !strings.Contains(err.Error(), "srun --mpi=pmi2 as task 1 of 4") {
		t.Errorf("Check() under srun --mpi=pmi2 = %v", err)
	}
	if Compiled && !speaks("pmi2") && (err == nil || !strings.Contains(err.Error(), "PMI2") || !strings.Contains(err.Error(), "srun --mpi=pmix")) {
		t.Errorf("Check() under srun --mpi=pmi2 with %s = %v; want it to name PMI2 and srun --mpi=pmix", library(), err)
	}
	pmi2.Mode = "on"
	if err := pmi2.Check(); Compiled && err != nil {
		t.Errorf("Check() under srun --mpi=pmi2 with LEASE_MPI=on = %v; want nil", err)
	}
}

func TestLaunchString(t *testing.T) {
	for l, want := range map[Launch]string{
		{}: "no launcher",
		{Launcher: "srun", Size: 4, Task: true, PMI: "pmix"}:            "srun --mpi=pmix as task 0 of 4 tasks",
		{Launcher: "mpirun", Size: 3, Rank: 2, Task: true, PMI: "pmix"}: "mpirun as rank 2 of 3 ranks",
		{Launcher: "mpiexec", Rank: 1, Task: true, PMI: "pmi"}:          "mpiexec as rank 1 of ? ranks",
	} {
		if got := l.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", l, got, want)
		}
	}
}
