//go:build !mpi

package commands_test

// Job scripts under a plain mpirun, as users run them outside a batch
// system (docs/design.md#mpi): lease launched directly (no rank wrapper), worker
// scripts that call lease, a proof redirected to a file, a watch killed
// through mpirun, and LEASE_MPI overriding the detection. Like
// slurm_test.go, these use both builds and run in the build without -tags
// mpi only.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
)

// jobRun runs a shell job script in dir with lease from binDir first on
// PATH and returns its stdout, stderr and exit status; a script that
// outlives bound fails t.
func jobRun(t *testing.T, dir, binDir, script string, env ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = dir, slurmEnv(binDir, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s: still running after 2 minutes (a hang)\n%s", script, mpiClip(errOut.String()))
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// jobSite is a slurmSite without Slurm: both builds as `lease`.
func jobSite(t *testing.T) slurmSite {
	t.Helper()
	mpiBin := mpiBinary(t)
	s := slurmSite{dir: t.TempDir()}
	s.plain, s.withMP = filepath.Join(s.dir, "bin"), filepath.Join(s.dir, "bin-mpi")
	for dir, bin := range map[string]string{s.plain: procBin, s.withMP: mpiBin} {
		os.Mkdir(dir, 0o755)
		if err := os.Symlink(bin, filepath.Join(dir, "lease")); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestMpirunWorkerScript: `mpirun -np 3 worker.sh` whose workers call
// lease claim and lease complete: each worker runs on its own with either
// build, and every item is done exactly once.
func TestMpirunWorkerScript(t *testing.T) {
	t.Parallel() // processes only: no in-process lease, no environment, no knob
	s := jobSite(t)
	worker := filepath.Join(s.dir, "worker.sh")
	os.WriteFile(worker, []byte(poolWorker), 0o755)
	for _, build := range []string{"plain", "mpi"} {
		t.Run(build, func(t *testing.T) {
			bin := map[string]string{"plain": s.plain, "mpi": s.withMP}[build]
			root, todo, logPath, ids := poolSite(t, s.dir, build, 12)
			_, errOut, code := jobRun(t, s.dir, bin, "mpirun --stdin none -np 3 ./worker.sh", "LEASE_ROOT="+root, "TODO="+todo, "LOG="+logPath)
			if code != 0 {
				t.Errorf("mpirun -np 3 worker.sh: exit %d\n%s", code, mpiClip(errOut))
			}
			poolCheck(t, root, logPath, ids)
		})
	}
}

// TestMpirunQualifyToFile: `mpirun -np 3 lease qualify --json > proof.json`
// writes one JSON document, with three members.
func TestMpirunQualifyToFile(t *testing.T) {
	t.Parallel() // processes only: no in-process lease, no environment, no knob
	s := jobSite(t)
	root := filepath.Join(s.dir, "table")
	_, errOut, code := jobRun(t, s.dir, s.withMP, "mpirun --stdin none -np 3 lease qualify --root "+root+" --rounds 2 --json > proof.json")
	doc, _ := os.ReadFile(filepath.Join(s.dir, "proof.json"))
	var p qualProof
	if err := json.Unmarshal(doc, &p); err != nil {
		t.Fatalf("proof.json (%d bytes, exit %d) is not one JSON document: %v\n%s\n%s", len(doc), code, err, mpiClip(string(doc)), mpiClip(errOut))
	}
	if code != 0 || !p.Verified || len(p.Members) != 3 {
		t.Errorf("exit %d, verified %v, %d members; want 0, true, 3\n%s", code, p.Verified, len(p.Members), mpiClip(errOut))
	}
}

// TestMpirunWatchKilled: SIGTERM to mpirun, which kills its ranks one
// second after passing SIGTERM on: the watch's --output FILE holds every
// lease, whole lines only, and the leases are still held.
func TestMpirunWatchKilled(t *testing.T) {
	t.Parallel() // processes only: no in-process lease, no environment, no knob
	s := jobSite(t)
	held := watchHeldTable(t, s.dir, 2048)
	cmd := exec.Command("mpirun", "--stdin", "none", "-np", "2", "lease", "renew-batch", "--root", "table", "--watch", "--interval", "1", "-v",
		"--output", "held.final", "held")
	cmd.Dir, cmd.Env = s.dir, slurmEnv(s.withMP)
	var errBuf bytes.Buffer
	errOut := &syncWriter{w: &errBuf}
	cmd.Stderr = errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	final := filepath.Join(s.dir, "held.final")
	// Into a later round: the -v line of the second round is written
	// after its held.final (watcher.round).
	testenv.WaitFor(t, "the watch's second round", time.Minute, func() bool {
		return strings.Contains(errOut.String(), "lease renew-batch: round 2:")
	})
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatal("mpirun still running a minute after SIGTERM")
	}
	if got, _ := os.ReadFile(final); string(got) != held {
		t.Errorf("held.final: %d of %d bytes, %d lines; want every lease\n%s", len(got), len(held), bytes.Count(got, []byte("\n")), mpiClip(errOut.String()))
	}
	if out, errOut, code := mpiExec(t, procBin, "", "verify", "--root", filepath.Join(s.dir, "table"), filepath.Join(s.dir, "held")); code != 0 || out != held {
		t.Errorf("verify after the kill: exit %d: %s", code, mpiClip(errOut))
	}
	slurmNoStragglers(t, s.dir, 20*time.Second)
}

// TestLeaseMPIOverride: LEASE_MPI=off makes every rank of mpirun run on
// its own (each prints its copy), LEASE_MPI=on makes the lease of a script
// a rank (one program, one copy). Each rank's stdout is read from its own
// file (mpirun --output-filename): mpirun forwards what ranks write to its
// own stdout in the chunks it reads, and two ranks' chunks may meet inside
// a line.
func TestLeaseMPIOverride(t *testing.T) {
	t.Parallel() // processes only: no in-process lease, no environment, no knob
	testenv.NeedTools(t, "mpirun")
	s := jobSite(t)
	_, held := mpiHeldTable(t, procBin, s.dir, 16, 32)
	want := strings.Join(held, "\n") + "\n"
	os.WriteFile(filepath.Join(s.dir, "held"), []byte(want), 0o644)
	verify := "lease verify --root table --now 2000 held"
	for i, tc := range []struct {
		name, script string
		want         []string // each rank's stdout
	}{
		{"off", "mpirun --stdin none -np 2 --output-filename OUT " + verify, []string{want, want}},
		{"on", "mpirun --stdin none -np 2 --output-filename OUT sh -c '" + verify + "'", []string{want, ""}},
		{"auto, from a script", "mpirun --stdin none -np 2 --output-filename OUT sh -c '" + verify + "'", []string{want, want}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mode := strings.TrimSuffix(strings.Fields(tc.name)[0], ",")
			outDir := filepath.Join(s.dir, fmt.Sprintf("out%d", i))
			script := strings.Replace(tc.script, "OUT", outDir, 1)
			_, errOut, code := jobRun(t, s.dir, s.withMP, script, "LEASE_MPI="+mode)
			if code != 0 {
				t.Fatalf("LEASE_MPI=%s %s: exit %d\n%s", mode, script, code, mpiClip(errOut))
			}
			for rank, w := range tc.want {
				got, err := os.ReadFile(filepath.Join(outDir, "1", fmt.Sprintf("rank.%d", rank), "stdout"))
				if err != nil && !(w == "" && os.IsNotExist(err)) {
					t.Fatalf("rank %d's stdout: %v", rank, err)
				}
				if string(got) != w {
					t.Errorf("LEASE_MPI=%s %s: rank %d printed %d lines, want %d\n%s", mode, script, rank,
						strings.Count(string(got), "\n"), strings.Count(w, "\n"), mpiClip(string(got)+errOut))
				}
			}
		})
	}
}
