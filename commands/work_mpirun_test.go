//go:build !mpi

package commands_test

// lease work under a real mpirun (beside jobscript_test.go, whose job
// site it uses): started by a worker script, each lease work is one
// process; started by mpirun itself it refuses.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkUnderMpirun: mpirun -np 3 worker.sh whose script runs lease
// work: three independent workers (with either build) do every item once;
// lease work started by mpirun itself refuses.
func TestWorkUnderMpirun(t *testing.T) {
	s := jobSite(t)
	worker := filepath.Join(s.dir, "worker.sh")
	os.WriteFile(worker, []byte("#!/bin/sh\nexec lease work -- sh -c 'echo \"$LEASE_ID\" >> \"$LOG\"; sleep 0.1'\n"), 0o755)
	for _, build := range []string{"plain", "mpi"} {
		t.Run(build, func(t *testing.T) {
			bin := map[string]string{"plain": s.plain, "mpi": s.withMP}[build]
			root := filepath.Join(s.dir, "table-"+build)
			logPath := filepath.Join(s.dir, "log-"+build)
			if _, errOut, code := jobRun(t, s.dir, bin, "lease init && lease id $(seq 12) | lease add > /dev/null", "LEASE_ROOT="+root); code != 0 {
				t.Fatalf("init: %s", errOut)
			}
			_, errOut, code := jobRun(t, s.dir, bin, "mpirun --stdin none -np 3 ./worker.sh", "LEASE_ROOT="+root, "LOG="+logPath)
			if code != 0 {
				t.Fatalf("mpirun -np 3 worker.sh: exit %d\n%s", code, mpiClip(errOut))
			}
			data, _ := os.ReadFile(logPath)
			seen := map[string]int{}
			for _, l := range strings.Fields(string(data)) {
				seen[l]++
			}
			if len(seen) != 12 {
				t.Errorf("%d items run, want 12:\n%s", len(seen), data)
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("item %s run %d times", id, n)
				}
			}
			_, errOut, code = jobRun(t, s.dir, bin, "mpirun --stdin none -np 2 lease work -- true", "LEASE_ROOT="+root)
			if code != 2 || !strings.Contains(errOut, "worker.sh") {
				t.Errorf("mpirun -np 2 lease work: exit %d, want 2 naming the worker script fix\n%s", code, mpiClip(errOut))
			}
		})
	}
}
