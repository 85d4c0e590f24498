package mpi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/mpi/internal/mpicheck/plan"
)

// needOpenMPI skips the test when Open MPI is not installed, or fails it
// when LEASE_TEST_REQUIRE=all says that every test must run.
func needOpenMPI(t *testing.T) {
	t.Helper()
	missing := ""
	if _, err := exec.LookPath("mpirun"); err != nil {
		missing = "mpirun not found: apt-get install openmpi-bin libopenmpi-dev"
	} else if _, err := exec.LookPath("pkg-config"); err != nil {
		missing = "pkg-config not found: apt-get install pkg-config libopenmpi-dev"
	} else if err := exec.Command("pkg-config", "--exists", "ompi").Run(); err != nil {
		missing = "pkg-config --exists ompi failed: apt-get install libopenmpi-dev"
	}
	if missing == "" {
		return
	}
	testenv.Missing(t, "mpi", missing)
}

// buildMPICheck builds internal/mpicheck with -tags mpi and returns its path.
func buildMPICheck(t *testing.T) string {
	t.Helper()
	needOpenMPI(t)
	bin := filepath.Join(t.TempDir(), "mpicheck")
	cmd := exec.Command("go", "build", "-tags", "mpi", "-o", bin, "./internal/mpicheck")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags mpi ./internal/mpicheck: %v\n%s", err, out)
	}
	return bin
}

type jobResult struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

// mpirun runs bin on np ranks and fails the test if the job outlives bound.
func mpirun(t *testing.T, bin string, np int, bound time.Duration, args ...string) jobResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	argv := append([]string{"--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(np), bin}, args...)
	cmd := exec.CommandContext(ctx, "mpirun", argv...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) } // mpirun then kills its ranks
	cmd.WaitDelay = 5 * time.Second
	if l, _ := Detect(); l.Launcher != "" {
		// A test run itself under a launcher must not hand its job on.
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "OMPI_") && !strings.HasPrefix(kv, "PMIX_") && !strings.HasPrefix(kv, "PMI_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := jobResult{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("mpirun -np %d %v still running after %s\nstderr:\n%s", np, args, bound, r.stderr)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("mpirun: %v", err)
	}
	return r
}

// TestMpirunCollectives runs the plan of package plan on 2, 3 and 4 real
// ranks and checks every rank's report against payloads computed here.
func TestMpirunCollectives(t *testing.T) {
	bin := buildMPICheck(t)
	for np := 2; np <= 4; np++ {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			out := t.TempDir()
			r := mpirun(t, bin, np, 60*time.Second, "-seed", strconv.FormatUint(seed, 10), "-out", out, "-timeout", "20s")
			if r.code != 0 {
				t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			for rank := range np {
				checkReport(t, seed, np, rank, readReport(t, out, rank))
			}
		})
	}
}

func readReport(t *testing.T, dir string, rank int) plan.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%d.json", rank)))
	if err != nil {
		t.Fatal(err)
	}
	var rep plan.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("rank %d report: %v", rank, err)
	}
	return rep
}

func checkReport(t *testing.T, seed uint64, np, rank int, rep plan.Report) {
	t.Helper()
	if rep.Rank != rank || rep.Size != np || !rep.Compiled || rep.Host == "" {
		t.Errorf("rank %d: report says rank %d of %d, compiled %v, host %q", rank, rep.Rank, rep.Size, rep.Compiled, rep.Host)
	}
	if rep.Launcher != "mpirun" || rep.LaunchSize != np || rep.LaunchRank != rank || !rep.LaunchTask {
		t.Errorf("rank %d: Detect() said %s, rank %d of %d, task %v under mpirun -np %d", rank, rep.Launcher, rep.LaunchRank, rep.LaunchSize, rep.LaunchTask, np)
	}

	bcasts := plan.Bcasts(seed, np)
	if len(rep.Bcast) != len(bcasts) {
		t.Fatalf("rank %d: %d Bcast results, want %d", rank, len(rep.Bcast), len(bcasts))
	}
	for i, b := range bcasts {
		if want := plan.Sum(plan.Payload(seed, "bcast", i, b.Root, b.Len)); rep.Bcast[i] != want {
			t.Errorf("rank %d: Bcast round %d from root %d: got %+v, want %+v", rank, i, b.Root, rep.Bcast[i], want)
		}
	}

	gathers := plan.Gathers(seed, "gather", np)
	if len(rep.Gather) != len(gathers) {
		t.Fatalf("rank %d: %d Gather results, want %d", rank, len(rep.Gather), len(gathers))
	}
	for i, g := range gathers {
		switch {
		case rank != g.Root && rep.Gather[i] != nil:
			t.Errorf("rank %d: Gather round %d to root %d returned %d parts off root; want nil", rank, i, g.Root, len(rep.Gather[i]))
		case rank == g.Root && !slices.Equal(rep.Gather[i], expected(seed, "gather", i, g.Lens)):
			t.Errorf("rank %d: Gather round %d (lengths %v): got %+v", rank, i, g.Lens, rep.Gather[i])
		}
	}

	allgathers := plan.Gathers(seed, "allgather", np)
	if len(rep.AllGather) != len(allgathers) {
		t.Fatalf("rank %d: %d AllGather results, want %d", rank, len(rep.AllGather), len(allgathers))
	}
	for i, g := range allgathers {
		if !slices.Equal(rep.AllGather[i], expected(seed, "allgather", i, g.Lens)) {
			t.Errorf("rank %d: AllGather round %d (lengths %v): got %+v", rank, i, g.Lens, rep.AllGather[i])
		}
	}

	values := plan.Values(seed, np)
	if len(rep.Max) != len(values) {
		t.Fatalf("rank %d: %d AllMaxInt results, want %d", rank, len(rep.Max), len(values))
	}
	for i, vals := range values {
		if rep.Max[i] != slices.Max(vals) {
			t.Errorf("rank %d: AllMaxInt round %d of %v = %d", rank, i, vals, rep.Max[i])
		}
	}
}

// expected returns the digests of every rank's payload, in rank order.
func expected(seed uint64, op string, round int, lens []int) []plan.Digest {
	out := make([]plan.Digest, len(lens))
	for rank, n := range lens {
		out[rank] = plan.Sum(plan.Payload(seed, op, round, rank, n))
	}
	return out
}

// TestMpirunWatchdog keeps one rank out of a collective (asleep for a
// minute, or dead): with a 1s timeout the job must end within seconds,
// with exit status 4 from the watchdog's MPI_Abort and its line naming the
// collective.
func TestMpirunWatchdog(t *testing.T) {
	bin := buildMPICheck(t)
	for _, tc := range []struct {
		np, stall int
		op        string
		die       bool
	}{
		{np: 2, stall: 1, op: "Gather"},
		{np: 3, stall: 0, op: "Bcast"},
		{np: 4, stall: 2, op: "AllGather"},
		{np: 3, stall: 1, op: "Gather", die: true},
	} {
		name := fmt.Sprintf("np=%d/%s/rank%d", tc.np, tc.op, tc.stall)
		if tc.die {
			name += "-dies"
		}
		t.Run(name, func(t *testing.T) {
			const bound = 20 * time.Second // the sleeper alone would take 60s
			r := mpirun(t, bin, tc.np, bound, "-timeout", "1s", "-stall", strconv.Itoa(tc.stall), "-op", tc.op, "-die="+strconv.FormatBool(tc.die))
			t.Logf("ended in %s with exit status %d", r.elapsed.Round(time.Millisecond), r.code)
			if strings.Contains(r.stdout, "completed") {
				t.Errorf("a rank completed %s without its peer:\n%s", tc.op, r.stdout)
			}
			if tc.die {
				// mpirun may notice the death before the watchdog fires.
				if r.code == 0 {
					t.Errorf("exit status 0 after a rank died\nstderr:\n%s", r.stderr)
				}
				return
			}
			if r.code != 4 {
				t.Errorf("exit status %d; want 4\nstderr:\n%s", r.code, r.stderr)
			}
			line := regexp.MustCompile(`(?m)^lease: mpi: ` + tc.op + ` did not complete within 1s on rank \d of ` + strconv.Itoa(tc.np) +
				` \(a peer rank is stuck or dead\); aborting$`)
			if !line.MatchString(r.stderr) {
				t.Errorf("stderr has no watchdog line for %s:\n%s", tc.op, r.stderr)
			}
		})
	}
}
