//go:build !mpi

package commands_test

// lease in job scripts as HPC users write them (docs/design.md#mpi), run by sbatch on
// a real one-node Slurm cluster (internal/testenv.NeedSlurm brings it up
// with .ci/slurm-up.sh): mpirun inside an allocation, srun with each MPI
// plugin, both builds. Only the program a launcher started is a rank; a
// launch whose tasks cannot join one program refuses before touching the
// table. The pools of workers are in slurm_pool_test.go, the stopped
// watches in slurm_watch_test.go.
//
// These tests use both binaries (the plain one of TestMain and the MPI
// build of mpiBinary) and run only in the build without -tags mpi, so that
// they run once. make test-cluster runs them (the Makefile's CLUSTER_TESTS
// names them, TestSlurm* and TestReadmeClusterWorkers); make test skips them.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
)

// slurmSite is what the job scripts of a test find: a directory to run in
// and two PATHs, one with each build of lease as `lease`.
type slurmSite struct {
	dir           string
	plain, withMP string // directories holding a `lease`
}

// slurmSetup brings up (or skips without) Slurm and the MPI build, and
// makes a site for job scripts.
func slurmSetup(t *testing.T) slurmSite {
	t.Helper()
	testenv.NeedRoot(t, "the Slurm cluster of .ci/slurm-up.sh")
	testenv.NeedSlurm(t)
	mpiBin := mpiBinary(t)
	testenv.NeedTools(t, "mpirun")
	s := slurmSite{dir: t.TempDir()}
	s.plain, s.withMP = filepath.Join(s.dir, "bin"), filepath.Join(s.dir, "bin-mpi")
	for dir, bin := range map[string]string{s.plain: procBin, s.withMP: mpiBin} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(bin, filepath.Join(dir, "lease")); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// slurmJobResult is a finished batch job.
type slurmJobResult struct {
	id       string
	state    string // Slurm's JobState: COMPLETED, FAILED, TIMEOUT, CANCELLED, ...
	code     int    // the job's exit status (of an array, the largest)
	out, err string // the job's stdout and stderr files
}

var slurmJobs atomic.Int64

// slurmEnv is the environment of a job: the test's without any launcher's
// variables, with lease from binDir first on PATH and extra added.
func slurmEnv(binDir string, extra ...string) []string {
	env := append(mpiEnv(), extra...)
	for i, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			env[i] = "PATH=" + binDir + ":" + strings.TrimPrefix(kv, "PATH=")
		}
	}
	return env
}

// slurmSubmit submits script (a job script as a user writes it) from dir
// with lease from binDir first on PATH and env added to the test's
// environment (sbatch passes it on), and returns the job's id and the
// name of its files. sbatch's own arguments come before the script.
func slurmSubmit(t *testing.T, dir, binDir, script string, env []string, sbatchArgs ...string) (id, name string) {
	t.Helper()
	name = fmt.Sprintf("job-%d", slurmJobs.Add(1))
	path := filepath.Join(dir, name+".sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--parsable", "-o", name + ".out", "-e", name + ".err"}, sbatchArgs...)
	cmd := exec.Command("sbatch", append(args, path)...)
	cmd.Dir = dir
	cmd.Env = slurmEnv(binDir, env...)
	out, err := cmd.Output()
	id = strings.TrimSpace(strings.SplitN(string(out), ";", 2)[0])
	if _, aerr := strconv.Atoi(id); err != nil || aerr != nil {
		t.Fatalf("sbatch %s: %v, %q", name, err, out)
	}
	t.Cleanup(func() { exec.Command("scancel", "--full", id).Run() }) // a no-op once it ended
	return id, name
}

// slurmState returns the states and exit statuses of job id's tasks
// (several for an array) from scontrol, which remembers a finished job for
// MinJobAge (5 minutes in .ci/slurm-up.sh's cluster).
func slurmState(id string) (states []string, codes []int) {
	out, err := exec.Command("scontrol", "-o", "show", "job", id).Output()
	if err != nil {
		return nil, nil
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		for _, f := range strings.Fields(line) {
			switch {
			case strings.HasPrefix(f, "JobState="):
				states = append(states, strings.TrimPrefix(f, "JobState="))
			case strings.HasPrefix(f, "ExitCode="):
				code, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(f, "ExitCode="), ":", 2)[0])
				codes = append(codes, code)
			}
		}
	}
	return states, codes
}

// slurmFinished reports whether every task of the job is over.
func slurmFinished(states []string) bool {
	for _, st := range states {
		switch st {
		case "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT":
			return false
		}
	}
	return len(states) > 0
}

// slurmListed reports whether squeue still lists the job: pending,
// running, or completing (its processes not all ended yet).
func slurmListed(id string) bool {
	out, err := exec.Command("squeue", "-h", "-j", id, "-o", "%T").Output()
	return err == nil && strings.TrimSpace(string(out)) != ""
}

// slurmWait waits for job id at most bound (then cancels it and fails t:
// a hang) and returns what it did.
func slurmWait(t *testing.T, dir, id, name string, bound time.Duration) slurmJobResult {
	t.Helper()
	deadline := time.Now().Add(bound)
	var states []string
	var codes []int
	for {
		if states, codes = slurmState(id); slurmFinished(states) && !slurmListed(id) {
			break
		}
		if time.Now().After(deadline) {
			exec.Command("scancel", "--full", id).Run()
			t.Fatalf("job %s (%s) still %v after %v: cancelled (a hang)\n%s", id, name, states, bound, slurmFiles(dir, name))
		}
		time.Sleep(200 * time.Millisecond)
	}
	r := slurmJobResult{id: id, state: strings.Join(states, ",")}
	for _, c := range codes {
		r.code = max(r.code, c)
	}
	r.out, r.err = slurmRead(dir, name+".out"), slurmRead(dir, name+".err")
	return r
}

// slurmStragglers are the processes whose working directory is dir or
// below: those a job started there, still running.
func slurmStragglers(dir string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// slurmNoStragglers fails t when processes a job started in dir outlive
// the job by more than bound (a rank that went on without its launcher),
// and ends them.
func slurmNoStragglers(t *testing.T, dir string, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		pids := slurmStragglers(dir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var cmds []string
			for _, pid := range pids {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				cmds = append(cmds, fmt.Sprintf("%d: %s", pid, strings.ReplaceAll(string(b), "\x00", " ")))
				syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Errorf("%d processes of the job still running %v after it ended (killed):\n%s", len(pids), bound, strings.Join(cmds, "\n"))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// slurmRun submits script and waits for it (bound: 3 minutes).
func slurmRun(t *testing.T, dir, binDir, script string, sbatchArgs ...string) slurmJobResult {
	t.Helper()
	id, name := slurmSubmit(t, dir, binDir, script, nil, sbatchArgs...)
	return slurmWait(t, dir, id, name, 3*time.Minute)
}

func slurmFiles(dir, name string) string {
	var b strings.Builder
	for _, ext := range []string{".out", ".err"} {
		data, _ := os.ReadFile(filepath.Join(dir, name+ext))
		fmt.Fprintf(&b, "%s%s: %s\n", name, ext, mpiClip(string(data)))
	}
	return b.String()
}

func (r slurmJobResult) String() string {
	return fmt.Sprintf("job %s: %s, exit %d\nstdout: %s\nstderr: %s", r.id, r.state, r.code, mpiClip(r.out), mpiClip(r.err))
}

// slurmRead is the content of dir/name ("" when missing).
func slurmRead(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return string(b)
}

// slurmHeldSite makes, under the site, a table of n held leases in 16
// shards, its copy for the one-process run and a pristine copy
// (dir/pristine), with the held lines in dir/held.
func slurmHeldSite(t *testing.T, s slurmSite, n int) (root, copyRoot string, held []string) {
	t.Helper()
	root, held = mpiHeldTable(t, procBin, s.dir, 16, n)
	if err := os.WriteFile(filepath.Join(s.dir, "held"), []byte(strings.Join(held, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	copyRoot = filepath.Join(s.dir, "one-process")
	mpiCopyTable(t, root, copyRoot)
	mpiCopyTable(t, root, filepath.Join(s.dir, "pristine"))
	return root, copyRoot, held
}

const slurmRenew = "lease renew-batch --root table --now 2000 --ttl 1e6 held > renewed\n"

// TestSlurmRenewBatch: renew-batch inside a job, as one program. mpirun
// inside the allocation and srun --mpi=pmix (the MPI build) print exactly
// what one process prints and leave the same table; every launch that
// cannot make one program of the tasks (the build without MPI under srun,
// srun --mpi=none, srun --mpi=pmi2 whose PMI Debian's Open MPI lacks)
// exits 2 on every task, names srun and the fix, prints nothing and
// leaves the table as it was.
func TestSlurmRenewBatch(t *testing.T) {
	s := slurmSetup(t)
	root, copyRoot, held := slurmHeldSite(t, s, 512)
	want, errOut, code := mpiExec(t, procBin, "", "renew-batch", "--root", copyRoot, "--now", "2000", "--ttl", "1e6", filepath.Join(s.dir, "held"))
	if code != 0 || want != strings.Join(held, "\n")+"\n" {
		t.Fatalf("one process: exit %d, %d bytes, stderr %s", code, len(want), mpiClip(errOut))
	}
	wantTree := mpiTree(t, copyRoot)
	for _, tc := range []struct {
		name, bin, launch string
		ok                bool
		says              []string
	}{
		{"mpirun", s.withMP, "mpirun --stdin none ", true, nil},
		{"srun --mpi=pmix", s.withMP, "srun --mpi=pmix ", true, nil},
		{"srun --mpi=pmix without MPI", s.plain, "srun --mpi=pmix ", false, []string{"srun --mpi=pmix as task", "built without MPI support", "LEASE_MPI=off"}},
		{"srun --mpi=none", s.withMP, "srun --mpi=none ", false, []string{"srun --mpi=none as task", "use srun --mpi=pmix"}},
		{"srun --mpi=none without MPI", s.plain, "srun --mpi=none ", false, []string{"srun --mpi=none as task", "built without MPI support"}},
		{"srun --mpi=pmi2", s.withMP, "srun --mpi=pmi2 ", false, []string{"srun --mpi=pmi2 as task", "PMI2", "use srun --mpi=pmix"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := mpiTree(t, root)
			os.Remove(filepath.Join(s.dir, "renewed"))
			r := slurmRun(t, s.dir, tc.bin, "#!/bin/bash\n#SBATCH --ntasks=4\n#SBATCH --time=5\n"+tc.launch+slurmRenew)
			got := slurmRead(s.dir, "renewed")
			if tc.ok {
				if r.code != 0 || got != want {
					t.Errorf("%s; renewed %d bytes, want %d (one process's)", r, len(got), len(want))
				}
				mpiSameTree(t, tc.name, wantTree, mpiTree(t, root))
				mpiCopyTable(t, filepath.Join(s.dir, "pristine"), root) // back to the table before the renewal
				return
			}
			if r.code != 2 || got != "" {
				t.Errorf("%s; renewed %q; want exit 2 and nothing", r, mpiClip(got))
			}
			for _, w := range tc.says {
				if strings.Count(r.err, w) != 4 {
					t.Errorf("stderr does not say %q once per task: %s", w, mpiClip(r.err))
				}
			}
			mpiSameTree(t, "after the refusal", before, mpiTree(t, root))
		})
	}
}

// TestSlurmOneOutput: one output per job. qualify under srun --mpi=pmix
// and under mpirun in the allocation prints one proof with every task a
// member (parseable: `> proof.json`); under srun --mpi=none it refuses
// instead of printing four one-member proofs. claim --first 1 under srun
// takes one item, init refuses, status prints once.
func TestSlurmOneOutput(t *testing.T) {
	s := slurmSetup(t)
	root, _, _ := slurmHeldSite(t, s, 8)
	head := "#!/bin/bash\n#SBATCH --ntasks=4\n#SBATCH --time=5\nexport LEASE_ROOT=" + root + "\n"
	for _, tc := range []struct{ name, launch string }{
		{"srun --mpi=pmix", "srun --mpi=pmix"},
		{"mpirun", "mpirun --stdin none"},
	} {
		t.Run("qualify "+tc.name, func(t *testing.T) {
			r := slurmRun(t, s.dir, s.withMP, head+tc.launch+" lease qualify --json --rounds 2 > proof.json\n")
			var p qualProof
			doc := slurmRead(s.dir, "proof.json")
			if err := json.Unmarshal([]byte(doc), &p); err != nil {
				t.Fatalf("%s\nproof.json (%d bytes) is not one JSON document: %v\n%s", r, len(doc), err, mpiClip(doc))
			}
			if r.code != 0 || !p.Verified || len(p.Members) != 4 {
				t.Errorf("%s\nverified %v with %d members; want exit 0, verified, 4 members", r, p.Verified, len(p.Members))
			}
		})
	}
	t.Run("qualify srun --mpi=none", func(t *testing.T) {
		r := slurmRun(t, s.dir, s.withMP, head+"srun --mpi=none lease qualify --json > proof.json\n")
		if doc := slurmRead(s.dir, "proof.json"); r.code != 2 || doc != "" || !strings.Contains(r.err, "srun --mpi=none") {
			t.Errorf("%s\nproof.json %q; want exit 2, no proof, a message naming srun --mpi=none", r, mpiClip(doc))
		}
	})
	t.Run("claim --first 1", func(t *testing.T) {
		ids := strings.Join(mpiIDs("slurm-todo", 8), "\n") + "\n"
		os.WriteFile(filepath.Join(s.dir, "todo"), []byte(ids), 0o644)
		r := slurmRun(t, s.dir, s.withMP, head+"srun --mpi=pmix lease claim --first 1 - < todo > got\n")
		if got := strings.Count(slurmRead(s.dir, "got"), "\n"); r.code != 0 || got != 1 {
			t.Errorf("%s\nclaimed %d items, want 1", r, got)
		}
	})
	t.Run("init", func(t *testing.T) {
		fresh := filepath.Join(s.dir, "fresh")
		r := slurmRun(t, s.dir, s.withMP, head+"srun lease init --root "+fresh+"\n")
		if _, err := os.Stat(fresh); r.code != 2 || err == nil || strings.Count(r.err, "runs as one process, not as one of 4 tasks") != 4 {
			t.Errorf("%s\nstat %s: %v; want exit 2, no table, the refusal from every task", r, fresh, err)
		}
	})
	t.Run("status", func(t *testing.T) {
		want, _, _ := mpiExec(t, procBin, "", "status", "--root", root, "--now", "1500")
		for _, bin := range []string{s.plain, s.withMP} {
			r := slurmRun(t, s.dir, bin, head+"srun lease status --now 1500 > status.txt\n")
			if got := slurmRead(s.dir, "status.txt"); r.code != 0 || got != want {
				t.Errorf("%s: %s\nstatus printed %d bytes, want one copy (%d bytes)", bin, r, len(got), len(want))
			}
		}
	})
}
