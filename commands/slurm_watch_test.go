//go:build !mpi

package commands_test

// renew-batch --watch stopped the ways a batch system stops a job: its
// time limit, scancel, scancel --full --signal=TERM (every process of the
// job gets SIGTERM; mpirun kills its ranks a second later), and the
// recipe of lease-renew-batch(1) (#SBATCH --signal=B:USR1@T, a trap that
// passes USR1 on to mpirun, wait twice). Whatever stops it, the job leaves
// the complete held set: with --output FILE, replaced whole after every
// round, even when the ranks are killed; on stdout when the watch may end
// by itself.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
)

// watchJob is a --watch job script over the site's held file: LAUNCH
// replaced by how the job starts lease.
const watchJob = `#!/bin/bash
#SBATCH --ntasks=2
#SBATCH --time=TIME
LAUNCH lease renew-batch --root table --watch --interval 1 -v OUTPUT held
`

// watchScript is watchJob with its blanks filled.
func watchScript(minutes, launch, output string) string {
	return strings.NewReplacer("TIME", minutes, "LAUNCH ", launch, "OUTPUT", output).Replace(watchJob)
}

// watchRecipe is the recipe of lease-renew-batch(1), with the table of
// the site, OUTPUT for where the lines go, and -v to see the rounds.
const watchRecipe = `#!/bin/bash
#SBATCH --ntasks=2
#SBATCH --time=5
#SBATCH --signal=B:USR1@60
trap 'kill -USR1 "$keeper" 2>/dev/null' USR1
mpirun --stdin none lease renew-batch --root table --watch --interval 1 -v OUTPUT held &
keeper=$!
wait "$keeper"   # returns when USR1 arrives
wait "$keeper"   # the watch's own exit status
`

// watchRunning waits until the job's watch has ended its second round
// (its -v line, written after the round's held set), so that a stop comes
// in a later round or between two.
func watchRunning(t *testing.T, dir, id, name string) {
	t.Helper()
	testenv.WaitFor(t, "job "+id+"'s second round", 2*time.Minute, func() bool {
		if strings.Contains(slurmRead(dir, name+".err"), "lease renew-batch: round 2:") {
			return true
		}
		if states, _ := slurmState(id); slurmFinished(states) {
			t.Fatalf("job %s ended before its second round: %v\n%s", id, states, slurmFiles(dir, name))
		}
		return false
	})
}

// watchHeldTable makes dir/table with n leases claimed now for an hour,
// in 16 shards, and returns the held lines, also in dir/held.
func watchHeldTable(t *testing.T, dir string, n int) string {
	t.Helper()
	root := filepath.Join(dir, "table")
	if _, errOut, code := mpiExec(t, procBin, "", "init", "--root", root, "--shards", "16"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	out, errOut, code := mpiExec(t, procBin, strings.Join(mpiIDs(filepath.Base(dir), n), "\n")+"\n", "claim", "--root", root, "--ttl", "3600", "-")
	if code != 0 || strings.Count(out, "\n") != n {
		t.Fatalf("claim: exit %d, %d lines: %s", code, strings.Count(out, "\n"), mpiClip(errOut))
	}
	if err := os.WriteFile(filepath.Join(dir, "held"), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// stoppedByUSR1 checks that a watch stopped cleanly by SIGUSR1.
func stoppedByUSR1(t *testing.T, r slurmJobResult) {
	t.Helper()
	if r.code != 0 || !strings.Contains(r.err, "stopped by SIGUSR1") {
		t.Errorf("%s; want exit 0 and stopped by SIGUSR1", r)
	}
}

// TestSlurmWatchStops: every way of stopping a watch job leaves held.final
// holding every lease of held, whole lines only, and the leases still held
// in the table.
func TestSlurmWatchStops(t *testing.T) {
	s := slurmSetup(t)
	for _, tc := range []struct {
		name   string
		script string
		stop   []string // the scancel arguments; nil: the time limit
		state  string
		check  func(t *testing.T, r slurmJobResult)
	}{
		{"time limit, mpirun --output", watchScript("1", "mpirun --stdin none ", "--output held.final"), nil, "TIMEOUT", nil},
		{"scancel, mpirun --output", watchScript("5", "mpirun --stdin none ", "--output held.final"), []string{}, "CANCELLED", nil},
		{"scancel --full --signal=TERM, mpirun --output", watchScript("5", "mpirun --stdin none ", "--output held.final"),
			[]string{"--full", "--signal=TERM"}, "", nil},
		{"scancel, srun --mpi=pmix --output", watchScript("5", "srun --mpi=pmix ", "--output held.final"), []string{}, "CANCELLED", nil},
		// One process: exec makes lease the batch script itself. Without it
		// scancel's SIGTERM ends bash at once, and slurmstepd then kills
		// what is left of the job (lease, still writing its last round)
		// without waiting for KillWait: whether its last lines are written
		// is a race it loses on a loaded machine.
		{"scancel, one process to stdout", watchScript("5", "exec ", "> held.final"), []string{}, "CANCELLED",
			func(t *testing.T, r slurmJobResult) {
				if !strings.Contains(r.err, "stopped by SIGTERM") {
					t.Errorf("stderr does not say it stopped by SIGTERM: %s", mpiClip(r.err))
				}
			}},
		{"USR1 recipe, mpirun to stdout", strings.Replace(watchRecipe, "OUTPUT", "> held.final", 1), []string{"--batch", "--signal=USR1"}, "COMPLETED", stoppedByUSR1},
		{"USR1 recipe, mpirun --output", strings.Replace(watchRecipe, "OUTPUT", "--output held.final", 1), []string{"--batch", "--signal=USR1"}, "COMPLETED", stoppedByUSR1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // the time limit takes a minute and more
			dir := t.TempDir()
			heldText := watchHeldTable(t, dir, 1024)
			id, name := slurmSubmit(t, dir, s.withMP, tc.script, nil)
			bound := 2 * time.Minute
			if tc.stop == nil {
				bound = 4 * time.Minute
			} else {
				watchRunning(t, dir, id, name)
				if out, err := exec.Command("scancel", append(tc.stop, id)...).CombinedOutput(); err != nil {
					t.Fatalf("scancel %v: %v %s", tc.stop, err, out)
				}
			}
			r := slurmWait(t, dir, id, name, bound)
			slurmNoStragglers(t, dir, 20*time.Second)
			if tc.state != "" && r.state != tc.state {
				t.Errorf("%s; want state %s", r, tc.state)
			}
			if got := slurmRead(dir, "held.final"); got != heldText {
				t.Errorf("%s\nheld.final: %d of %d bytes, %d lines; want every held lease:\n%s", r, len(got), len(heldText), strings.Count(got, "\n"), mpiClip(got))
			}
			if tc.check != nil {
				tc.check(t, r)
			}
			if out, errOut, code := mpiExec(t, procBin, "", "verify", "--root", filepath.Join(dir, "table"), filepath.Join(dir, "held")); code != 0 || out != heldText {
				t.Errorf("lease verify held after the stop: exit %d, %d lines: %s", code, strings.Count(out, "\n"), mpiClip(errOut))
			}
		})
	}
}
