package commands_test

// lease under a real mpirun (docs/design.md#mpi), the part that needs no MPI build: a
// binary built without -tags mpi refuses to run as several ranks. The
// helpers here also serve mpi_test.go and the mpi_*_test.go files beside
// it (built with -tags mpi).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
)

// mpiRequireAll reports whether LEASE_TEST_REQUIRE makes a missing
// prerequisite a failure: "all", or a comma-separated list with "all".
func mpiRequireAll() bool {
	for _, w := range strings.Split(os.Getenv("LEASE_TEST_REQUIRE"), ",") {
		if strings.TrimSpace(w) == "all" {
			return true
		}
	}
	return false
}

// mpiMissing skips t with why, or fails it under LEASE_TEST_REQUIRE=all.
func mpiMissing(t *testing.T, why string) {
	t.Helper()
	testenv.Missing(t, "mpi", why)
}

// mpiNeedLauncher skips t when mpirun is missing.
func mpiNeedLauncher(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		mpiMissing(t, "mpirun not found: apt-get install openmpi-bin libopenmpi-dev")
	}
}

// mpiNeedRoot skips t unless it runs as root.
func mpiNeedRoot(t *testing.T, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		mpiMissing(t, what+" needs root")
	}
}

var (
	mpiBuildOnce sync.Once
	mpiBinPath   string
	mpiBuildErr  string
)

// mpiBinary returns the lease binary built with -tags mpi (once per test
// binary, in TestMain's directory, which TestMain removes); skipped when
// Open MPI is missing. The MPI tests (-tags mpi) and the job-script tests
// (slurm_test.go, jobscript_test.go, which run in the build without the
// tag and use both binaries) share it.
func mpiBinary(t *testing.T) string {
	t.Helper()
	mpiNeedLauncher(t)
	if _, err := exec.LookPath("pkg-config"); err != nil {
		mpiMissing(t, "pkg-config not found: apt-get install pkg-config libopenmpi-dev")
	}
	if err := exec.Command("pkg-config", "--exists", "ompi").Run(); err != nil {
		mpiMissing(t, "pkg-config --exists ompi failed: apt-get install libopenmpi-dev")
	}
	mpiBuildOnce.Do(func() {
		bin := filepath.Join(filepath.Dir(procBin), "lease-mpi")
		out, err := exec.Command("go", "build", "-tags", "mpi", "-o", bin, "github.com/leasetool/lease").CombinedOutput()
		if err != nil {
			mpiBuildErr = fmt.Sprintf("go build -tags mpi: %v\n%s", err, out)
			return
		}
		mpiBinPath = bin
	})
	if mpiBuildErr != "" {
		t.Fatal(mpiBuildErr)
	}
	return mpiBinPath
}

// mpiCopyTable copies the table src to dst (cp -a), replacing dst.
func mpiCopyTable(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
}

// mpiRankResult is what one rank printed and its exit status (-1: the rank
// never finished, it was killed).
type mpiRankResult struct {
	out, err string
	exit     int
}

// mpiJob is one finished mpirun.
type mpiJob struct {
	stdout, stderr string // mpirun's own
	code           int
	ranks          []mpiRankResult
	elapsed        time.Duration
}

// mpiWrapper runs one rank's command with its stdout, stderr and exit
// status in files named after the rank, so that a test sees every rank
// apart (mpirun merges their output and returns only one status). It is
// meant to be transparent: it names the command it runs in OMPI_COMMAND,
// as mpirun would had it started the command itself, so that lease takes
// itself for the rank (docs/design.md#mpi: a lease that a script mpirun started runs
// on its own). slurm_test.go and the job-script tests launch lease without
// it.
const mpiWrapper = `#!/bin/sh
out=$1
shift
r=${OMPI_COMM_WORLD_RANK:-x}
cmd=$1
if [ "$cmd" = env ]; then # env VAR=VALUE... CMD: the rank is CMD
  for a in "$@"; do case $a in env|*=*) ;; *) cmd=$a; break ;; esac; done
fi
OMPI_COMMAND=$(basename "$cmd")
export OMPI_COMMAND
"$@" >"$out/rank-$r.out" 2>"$out/rank-$r.err"
rc=$?
echo $rc >"$out/rank-$r.exit"
exit $rc
`

// mpiLaunch runs `mpirun --allow-run-as-root --oversubscribe ARGS` where
// every application of ARGS is written as "@RANK" followed by its command:
// "@RANK" stands for the wrapper that records the rank's streams. stdin
// goes to rank 0; with no stdin, mpirun runs with --stdin none: Open MPI
// 4.x's mpirun now and then crashes forwarding stdin to a rank that runs
// for a while (open-mpi/ompi#7483, SIGSEGV in
// orte_iof_hnp_read_local_handler), so the tests give their input as FILE
// arguments and only TestMPIStdinGoesToRank0 forwards stdin. A job that
// outlives bound is killed and fails the test: a hang is exactly what must
// not happen (seed F357).
//
// mpirun runs with orte_abort_on_non_zero_status=0: by default it kills
// the other ranks as soon as one exits with a non-zero status, and so
// hides their own statuses; with it, every rank finishes and the test sees
// every status, but mpirun itself then exits 0. mpiLaunchDefault keeps
// mpirun's default to check the status mpirun reports.
func mpiLaunch(t *testing.T, bound time.Duration, np int, stdin string, args ...string) mpiJob {
	t.Helper()
	return mpiLaunchEnv(t, []string{"OMPI_MCA_orte_abort_on_non_zero_status=0"}, bound, np, stdin, args...)
}

// mpiLaunchDefault is mpiLaunch with mpirun's default handling of a rank
// that exits with a non-zero status (the other ranks may be killed).
func mpiLaunchDefault(t *testing.T, bound time.Duration, np int, stdin string, args ...string) mpiJob {
	t.Helper()
	return mpiLaunchEnv(t, nil, bound, np, stdin, args...)
}

func mpiLaunchEnv(t *testing.T, env []string, bound time.Duration, np int, stdin string, args ...string) mpiJob {
	t.Helper()
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "rank.sh")
	if err := os.WriteFile(wrapper, []byte(mpiWrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(dir, "ranks")
	if err := os.Mkdir(outDir, 0o777); err != nil {
		t.Fatal(err)
	}
	argv := []string{"--allow-run-as-root", "--oversubscribe"}
	if stdin == "" {
		argv = append(argv, "--stdin", "none")
	}
	for _, a := range args {
		if a == "@RANK" {
			argv = append(argv, wrapper, outDir)
			continue
		}
		argv = append(argv, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mpirun", argv...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) } // mpirun then ends its ranks
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(mpiEnv(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	job := mpiJob{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("mpirun %s: still running after %v, killed (a hang)\nstderr: %s\n%s", strings.Join(args, " "), bound, job.stderr, mpiRankFiles(outDir, np))
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		job.code = ee.ExitCode()
	default:
		t.Fatalf("mpirun: %v", err)
	}
	for r := 0; r < np; r++ {
		rr := mpiRankResult{exit: -1}
		b, _ := os.ReadFile(filepath.Join(outDir, fmt.Sprintf("rank-%d.out", r)))
		rr.out = string(b)
		b, _ = os.ReadFile(filepath.Join(outDir, fmt.Sprintf("rank-%d.err", r)))
		rr.err = string(b)
		if b, err := os.ReadFile(filepath.Join(outDir, fmt.Sprintf("rank-%d.exit", r))); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				rr.exit = n
			}
		}
		job.ranks = append(job.ranks, rr)
	}
	return job
}

// mpiRankFiles is every rank file of dir, for failure messages.
func mpiRankFiles(dir string, np int) string {
	var b strings.Builder
	for r := 0; r < np; r++ {
		for _, ext := range []string{"exit", "out", "err"} {
			data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%d.%s", r, ext)))
			if err == nil {
				fmt.Fprintf(&b, "rank %d %s: %s\n", r, ext, mpiClip(string(data)))
			}
		}
	}
	return b.String()
}

func mpiClip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// mpiEnv is this process's environment without launcher variables (a test
// run under a launcher must not hand its rank on), allowing mpirun as root.
func mpiEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OMPI_") || strings.HasPrefix(kv, "PMIX_") || strings.HasPrefix(kv, "PMI_") ||
			strings.HasPrefix(kv, "SLURM_") || strings.HasPrefix(kv, "LEASE_MPI=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_rmaps_base_oversubscribe=1")
}

// mpiIDs returns n distinct IDs named after prefix.
func mpiIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", prefix, i)))
		ids[i] = hex.EncodeToString(sum[:])
	}
	return ids
}

// mpiExec runs bin as one plain process and returns stdout, stderr and the
// exit status.
func mpiExec(t *testing.T, bin, stdin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = mpiEnv()
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: timed out", bin, strings.Join(args, " "))
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	return stdout.String(), stderr.String(), code
}

// mpiTree maps every regular file under root (relative slash path) to
// its bytes.
func mpiTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mpiSameTree fails t unless the two trees hold the same files with the
// same bytes.
func mpiSameTree(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	var diff []string
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			diff = append(diff, "missing "+name)
		case g != w:
			diff = append(diff, fmt.Sprintf("%s: %q, want %q", name, mpiClip(g), mpiClip(w)))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			diff = append(diff, "extra "+name)
		}
	}
	if len(diff) > 0 {
		if len(diff) > 3 {
			diff = append(diff[:3], fmt.Sprintf("... %d differences in all", len(diff)))
		}
		t.Errorf("%s: the table differs:\n%s", what, strings.Join(diff, "\n"))
	}
}

// mpiHeldTable makes a table with shards work shards under dir and claims
// n leases at --now 1000 for a very long TTL with bin (one process); it
// returns the root and the `ID TOKEN` lines held.
func mpiHeldTable(t *testing.T, bin, dir string, shards, n int) (string, []string) {
	t.Helper()
	root := filepath.Join(dir, "table")
	if _, errOut, code := mpiExec(t, bin, "", "init", "--root", root, "--shards", strconv.Itoa(shards)); code != 0 {
		t.Fatalf("init: exit %d: %s", code, errOut)
	}
	ids := mpiIDs(filepath.Base(dir), n)
	out, errOut, code := mpiExec(t, bin, strings.Join(ids, "\n")+"\n",
		"claim", "--root", root, "--now", "1000", "--ttl", "1e6", "--owner", "mpi-test", "-")
	if code != 0 {
		t.Fatalf("claim: exit %d: %s", code, mpiClip(errOut))
	}
	held := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(held) != n {
		t.Fatalf("claim granted %d of %d", len(held), n)
	}
	return root, held
}

// TestWithoutMPIRefusesUnderMpirun: a binary built without -tags mpi that
// mpirun starts as two ranks refuses every batch command and qualify with
// exit 2 on every rank, says how to build it with MPI, and writes nothing;
// as a single rank it runs normally. Its version says MPI is not compiled
// in.
func TestWithoutMPIRefusesUnderMpirun(t *testing.T) {
	t.Parallel() // processes only: no in-process lease, no environment, no knob
	out, _, code := mpiExec(t, procBin, "", "version")
	if code != 0 || !strings.Contains(out, "without MPI support") || !strings.Contains(out, "-tags mpi") {
		t.Errorf("lease version (no MPI): exit %d, %q; want it to say: without MPI support, build with -tags mpi", code, out)
	}
	mpiNeedLauncher(t)
	for _, name := range []string{"renew-batch", "release", "verify", "claim", "qualify"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			root, held := mpiHeldTable(t, procBin, dir, 16, 40)
			input := filepath.Join(dir, "held")
			if err := os.WriteFile(input, []byte(strings.Join(held, "\n")+"\n"), 0o666); err != nil {
				t.Fatal(err)
			}
			args := []string{name, "--root", root, "--now", "2000", input}
			switch name {
			case "claim":
				args = append([]string{name, "--root", root, "--now", "2000"}, mpiIDs("fresh", 5)...)
			case "qualify":
				args = []string{name, "--root", root}
			}
			before := mpiTree(t, root)
			job := mpiLaunch(t, 2*time.Minute, 2, "", append([]string{"-np", "2", "@RANK", procBin}, args...)...)
			for r, rr := range job.ranks {
				if rr.exit != 2 {
					t.Errorf("rank %d: exit %d, want 2 (stderr %q)", r, rr.exit, mpiClip(rr.err))
				}
				if rr.out != "" {
					t.Errorf("rank %d printed on stdout: %q", r, mpiClip(rr.out))
				}
				for _, want := range []string{"2 ranks", "without MPI support", "-tags mpi"} {
					if !strings.Contains(rr.err, want) {
						t.Errorf("rank %d: stderr %q does not say %q", r, mpiClip(rr.err), want)
					}
				}
			}
			mpiSameTree(t, "after the refused "+name, before, mpiTree(t, root))
			if name == "renew-batch" {
				// mpirun itself reports the status.
				job := mpiLaunchDefault(t, 2*time.Minute, 2, "", append([]string{"-np", "2", "@RANK", procBin}, args...)...)
				if job.code != 2 {
					t.Errorf("mpirun exit %d, want 2\nmpirun stderr: %s", job.code, mpiClip(job.stderr))
				}
			}
		})
	}
	dir := t.TempDir()
	root, held := mpiHeldTable(t, procBin, dir, 16, 40)
	input := filepath.Join(dir, "held")
	if err := os.WriteFile(input, []byte(strings.Join(held, "\n")+"\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	// One rank is one process: it runs.
	job := mpiLaunchDefault(t, 2*time.Minute, 1, "", "-np", "1", "@RANK", procBin, "verify", "--root", root, "--now", "2000", input)
	if job.code != 0 || len(job.ranks) != 1 || job.ranks[0].exit != 0 || job.ranks[0].out != strings.Join(held, "\n")+"\n" {
		t.Errorf("mpirun -np 1 lease verify: exit %d, ranks %+v; want exit 0 and the held lines", job.code, job.ranks)
	}
}
