//go:build !mpi

package commands_test

// Pools of workers, the ordinary way to spread fuzzers over the nodes of a
// job: the launcher starts N copies of a worker script, and the `lease`
// each worker calls is a plain process of its own (docs/design.md#mpi), whatever the
// build and whatever the launcher put in its environment.

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/leasefmt"
)

// poolWorker is a worker as a user writes it: claim one item, work on it,
// complete it, until nothing is left; each item done goes to $LOG as
// `ID TOKEN WORKER`.
const poolWorker = `#!/bin/bash
me=${SLURM_ARRAY_TASK_ID:+array-$SLURM_ARRAY_TASK_ID}
me=${me:-${SLURM_PROCID:-x}/${OMPI_COMM_WORLD_RANK:-x}}
while :; do
  held=$(lease claim --first 1 - < "$TODO"); rc=$?
  if [ $rc -eq 1 ] && [ -z "$held" ]; then exit 0; fi   # nothing left to claim
  [ $rc -eq 0 ] || { echo "worker $me: claim exit $rc" >&2; exit $rc; }
  sleep 0.05                                           # the work
  echo "$held" | lease complete > /dev/null || { echo "worker $me: complete exit $?" >&2; exit 3; }
  echo "$held $me" >> "$LOG"
done
`

// poolCheck checks that every item of todo was done exactly once: one log
// line each, and a done record each.
func poolCheck(t *testing.T, root, logPath string, todo []string) {
	t.Helper()
	data, _ := os.ReadFile(logPath)
	seen := map[string]int{}
	workers := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Errorf("log line %q: want ID TOKEN WORKER", line)
			continue
		}
		seen[f[0]]++
		workers[f[2]] = true
	}
	for _, id := range todo {
		if seen[id] != 1 {
			t.Errorf("item %s done %d times, want once", id, seen[id])
		}
		rec, err := os.ReadFile(corePath(root, leasefmt.ID(id)))
		if err != nil || !strings.Contains(string(rec), `"status":"done"`) {
			t.Errorf("item %s: record %q, %v; want done", id, mpiClip(string(rec)), err)
		}
	}
	if len(seen) != len(todo) {
		t.Errorf("%d items done, want %d", len(seen), len(todo))
	}
	names := make([]string, 0, len(workers))
	for w := range workers {
		names = append(names, w)
	}
	sort.Strings(names)
	t.Logf("%d items done by workers %v", len(seen), names)
}

// poolSite makes a table with no leases and a todo file of n items.
func poolSite(t *testing.T, dir, name string, n int) (root, todo, logPath string, ids []string) {
	t.Helper()
	root = filepath.Join(dir, name)
	if _, errOut, code := mpiExec(t, procBin, "", "init", "--root", root); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	ids = mpiIDs(name, n)
	todo = filepath.Join(dir, name+".todo")
	os.WriteFile(todo, []byte(strings.Join(ids, "\n")+"\n"), 0o644)
	return root, todo, filepath.Join(dir, name+".log"), ids
}

// TestSlurmWorkerPools: `srun -n 4 worker.sh`, `mpirun -np 4 worker.sh` and
// a job array of workers, each with both builds: every worker runs on its
// own (no claim joins another's, none refuses), the job exits 0 and every
// item is done exactly once.
func TestSlurmWorkerPools(t *testing.T) {
	s := slurmSetup(t)
	worker := filepath.Join(s.dir, "worker.sh")
	if err := os.WriteFile(worker, []byte(poolWorker), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, script string }{
		{"srun pmix", "#!/bin/bash\n#SBATCH --ntasks=4\n#SBATCH --time=5\nsrun --mpi=pmix ./worker.sh\n"},
		{"srun", "#!/bin/bash\n#SBATCH --ntasks=4\n#SBATCH --time=5\nsrun ./worker.sh\n"},
		{"mpirun", "#!/bin/bash\n#SBATCH --ntasks=4\n#SBATCH --time=5\nmpirun --stdin none ./worker.sh\n"},
	} {
		for _, build := range []string{"plain", "mpi"} {
			t.Run(tc.name+" "+build, func(t *testing.T) {
				bin := s.plain
				if build == "mpi" {
					bin = s.withMP
				}
				name := strings.ReplaceAll(tc.name+"-"+build, " ", "-")
				root, todo, logPath, ids := poolSite(t, s.dir, name, 16)
				id, job := slurmSubmit(t, s.dir, bin, tc.script, []string{"LEASE_ROOT=" + root, "TODO=" + todo, "LOG=" + logPath})
				r := slurmWait(t, s.dir, id, job, 3*time.Minute)
				if r.code != 0 {
					t.Errorf("%s", r)
				}
				poolCheck(t, root, logPath, ids)
			})
		}
	}
	t.Run("job array", func(t *testing.T) {
		root, todo, logPath, ids := poolSite(t, s.dir, "array", 16)
		script := "#!/bin/bash\n#SBATCH --array=0-3\n#SBATCH --time=5\nexec ./worker.sh\n"
		id, job := slurmSubmit(t, s.dir, s.withMP, script, []string{"LEASE_ROOT=" + root, "TODO=" + todo, "LOG=" + logPath},
			"-o", "array-%a.out", "-e", "array-%a.err")
		r := slurmWait(t, s.dir, id, job, 3*time.Minute)
		if r.code != 0 {
			t.Errorf("%s\n%s", r, slurmRead(s.dir, "array-0.err"))
		}
		poolCheck(t, root, logPath, ids)
	})
}
