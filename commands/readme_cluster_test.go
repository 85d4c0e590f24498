//go:build !mpi

package commands_test

// The README's cluster workers ("On a cluster"), run as written under a
// real mpirun, srun and sbatch (the one-node cluster of .ci/slurm-up.sh):
// its first line writes worker.sh, each other line starts the workers of
// one campaign. Like slurm_test.go, this runs in the build without -tags
// mpi only, with both builds as lease.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readmeClusterBlock returns the lines of the README block that
// TestReadmeClusterWorkers runs (the one whose marker names it).
func readmeClusterBlock(t *testing.T) []string {
	t.Helper()
	for _, b := range readmeBlocks(t) {
		for _, n := range b.marker["run-by"] {
			if n == "TestReadmeClusterWorkers" {
				return strings.Split(strings.TrimSuffix(b.code, "\n"), "\n")
			}
		}
	}
	t.Fatal("README.md has no block run by TestReadmeClusterWorkers")
	return nil
}

// TestReadmeClusterWorkers: the README's worker.sh, started by mpirun, by
// srun inside an allocation and by sbatch, each with either build: every
// worker is a lease work of its own, and every item of the campaign is
// run once and done. The README's 64 workers become 2 on this machine;
// sbatch gets --wait (to wait for the job here) and the job's output
// files.
func TestReadmeClusterWorkers(t *testing.T) {
	lines := readmeClusterBlock(t)
	if len(lines) != 4 || !strings.Contains(lines[0], "worker.sh") || !strings.HasPrefix(lines[1], "mpirun ") ||
		!strings.HasPrefix(lines[2], "srun ") || !strings.HasPrefix(lines[3], "sbatch ") {
		t.Fatalf("the README's cluster block is not worker.sh, then mpirun, srun and sbatch lines:\n%s", strings.Join(lines, "\n"))
	}
	s := slurmSetup(t)
	// The stand-in harness: logs the item it ran.
	os.WriteFile(filepath.Join(s.dir, "fuzz-one.sh"), []byte("#!/bin/sh\necho \"$LEASE_ID\" >> \"$LOG\"\n"), 0o755)
	if _, errOut, code := jobRun(t, s.dir, s.plain, lines[0]); code != 0 {
		t.Fatalf("%s: exit %d\n%s", lines[0], code, errOut)
	}
	launch := map[string]string{"mpirun": lines[1], "srun": lines[2], "sbatch": lines[3]}
	for _, how := range []string{"mpirun", "srun", "sbatch"} {
		for _, build := range []string{"plain", "mpi"} {
			t.Run(how+"-"+build, func(t *testing.T) {
				bin := map[string]string{"plain": s.plain, "mpi": s.withMP}[build]
				name := how + "-" + build
				root, logPath := filepath.Join(s.dir, "table-"+name), filepath.Join(s.dir, "log-"+name)
				const n = 12
				if _, errOut, code := jobRun(t, s.dir, bin, fmt.Sprintf("lease init > /dev/null && lease id $(seq %d) | lease add > /dev/null", n),
					"LEASE_ROOT="+root); code != 0 {
					t.Fatalf("init: %s", errOut)
				}
				line := strings.NewReplacer("-np 64", "-np 2", "-n 64", "-n 2").Replace(launch[how])
				if how == "sbatch" {
					line = strings.Replace(line, "sbatch ", "sbatch --wait -o "+name+".out -e "+name+".err ", 1)
				}
				_, errOut, code := jobRun(t, s.dir, bin, line, "LEASE_ROOT="+root, "LOG="+logPath)
				if code != 0 {
					t.Fatalf("%s: exit %d\n%s\n%s", line, code, mpiClip(errOut), slurmFiles(s.dir, name))
				}
				data, _ := os.ReadFile(logPath)
				seen := map[string]int{}
				for _, id := range strings.Fields(string(data)) {
					seen[id]++
				}
				if len(seen) != n {
					t.Errorf("%s: %d items run, want %d:\n%s", line, len(seen), n, data)
				}
				for id, k := range seen {
					if k != 1 {
						t.Errorf("%s: item %s run %d times", line, id, k)
					}
				}
				if out, _, _ := jobRun(t, s.dir, bin, "lease status --summary --json", "LEASE_ROOT="+root); !strings.Contains(out, fmt.Sprintf(`"done":%d`, n)) {
					t.Errorf("%s: status --summary %s, want %d done", line, out, n)
				}
			})
		}
	}
}
