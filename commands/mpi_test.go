//go:build mpi

package commands_test

// lease as one program under a real mpirun (docs/design.md#mpi, seed F357): batch
// commands give the same bytes and exit status as one process, a rank that
// fails turns into the same negative result on every rank within the
// watchdog bound, and qualify proves the cluster. Run with
// `go test -tags mpi ./commands/`; the MPI binary is built once, beside
// the plain one TestMain built. This file holds the mpi* helpers and the
// tests of the MPI build as a whole; the batch commands are tested in
// mpi_batch_test.go, a failing rank in mpi_failure_test.go and qualify in
// mpi_qualify_test.go.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mpiNP is the mpirun arguments of np copies of BIN ARGS, each under the
// rank wrapper.
func mpiNP(np int, bin string, args ...string) []string {
	return append([]string{"-np", strconv.Itoa(np), "@RANK", bin}, args...)
}

// mpiBatchDoc is the --json document of a batch command.
type mpiBatchDoc struct {
	Command string `json:"command"`
	Results []struct {
		ID           string          `json:"id"`
		Token        int64           `json:"token"`
		OK           bool            `json:"ok"`
		Reason       string          `json:"reason"`
		Detail       string          `json:"detail"`
		CurrentToken int64           `json:"current_token"`
		Path         string          `json:"path"`
		LatencyS     float64         `json:"latency_s"`
		Record       json.RawMessage `json:"record"`
	} `json:"results"`
	Stats struct {
		Batches               int64   `json:"batches"`
		Renewals              int64   `json:"renewals"`
		Lost                  int64   `json:"lost"`
		FileSyncs             int64   `json:"file_syncs"`
		DirectorySyncs        int64   `json:"directory_syncs"`
		DirectorySyncsAvoided int64   `json:"directory_syncs_avoided"`
		Failures              int64   `json:"failures"`
		DurationS             float64 `json:"duration_s"`
		LatencyP50            float64 `json:"latency_p50_s"`
		LatencyP99            float64 `json:"latency_p99_s"`
		Ranks                 int     `json:"ranks"`
		CollectiveS           float64 `json:"collective_s"`
	} `json:"stats"`
	Counts map[string]int `json:"counts"`
	Exit   int            `json:"exit"`
}

// mpiRankOutcome is what a batch run gave: rank 0's streams (the job's
// output), the exit status every rank agreed on, and the other ranks'
// streams, which must be empty.
type mpiRankOutcome struct {
	stdout, stderr string
	code           int
}

// mpiInput writes input to a file of its own and returns its path.
func mpiInput(t *testing.T, input string) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "input")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(input); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// mpiRunBatch runs lease ARGS FILE, FILE holding input, as one process (np
// 0) or under mpirun with np ranks, and returns the job's outcome; under
// mpirun it checks that every rank exited with the same status and that
// only rank 0 printed.
func mpiRunBatch(t *testing.T, bin string, np int, input string, args ...string) mpiRankOutcome {
	t.Helper()
	args = append(args, mpiInput(t, input))
	if np == 0 {
		out, errOut, code := mpiExec(t, bin, "", args...)
		return mpiRankOutcome{out, errOut, code}
	}
	job := mpiLaunch(t, 2*time.Minute, np, "", mpiNP(np, bin, args...)...)
	mpiSameExit(t, job)
	for r, rr := range job.ranks {
		if r > 0 && (rr.out != "" || rr.err != "") {
			t.Errorf("np %d: rank %d printed: stdout %q stderr %q; only rank 0 speaks", np, r, mpiClip(rr.out), mpiClip(rr.err))
		}
	}
	return mpiRankOutcome{job.ranks[0].out, job.ranks[0].err, job.ranks[0].exit}
}

// mpiSameExit fails t unless every rank of job finished with the same
// exit status.
func mpiSameExit(t *testing.T, job mpiJob) {
	t.Helper()
	for r, rr := range job.ranks {
		if rr.exit < 0 {
			t.Errorf("rank %d of %d did not finish (killed?); mpirun exit %d, stderr %s", r, len(job.ranks), job.code, mpiClip(job.stderr))
		} else if rr.exit != job.ranks[0].exit {
			t.Errorf("rank %d exited %d, rank 0 %d (stderr %q)", r, rr.exit, job.ranks[0].exit, mpiClip(rr.err))
		}
	}
}

// mpiShardOf is the work shard of id in a table of n shards (docs/design.md#layout).
func mpiShardOf(t *testing.T, id string, n int) int {
	t.Helper()
	v, err := strconv.ParseUint(id[:8], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return int(v % uint64(n))
}

// TestMPIVersion: the MPI build says so.
func TestMPIVersion(t *testing.T) {
	bin := mpiBinary(t)
	out, _, code := mpiExec(t, bin, "", "version")
	if code != 0 || !strings.Contains(out, "with MPI support") || strings.Contains(out, "without") {
		t.Errorf("lease version (MPI build): exit %d, %q; want it to say: with MPI support", code, out)
	}
}

// TestMPISingleProcessCommandsRefuseRanks: the writing commands that do
// not run across ranks refuse, on every rank, to run as several copies
// (fsck with its usage status 16), and write nothing.
func TestMPISingleProcessCommandsRefuseRanks(t *testing.T) {
	bin := mpiBinary(t)
	root := filepath.Join(t.TempDir(), "table")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"init", "--root", root}, 2},
		{[]string{"complete", "--root", root, os.DevNull}, 2},
		{[]string{"fsck", "--repair", "--root", root}, 16},
		{[]string{"run", "--root", root, strings.Repeat("a", 64), "--", "true"}, 125},
	} {
		job := mpiLaunch(t, time.Minute, 2, "", mpiNP(2, bin, tc.args...)...)
		mpiSameExit(t, job)
		if got := job.ranks[0].exit; got != tc.code || !strings.Contains(job.ranks[0].err, "runs as one process") {
			t.Errorf("mpirun -np 2 lease %s: exit %d, stderr %q; want exit %d and a refusal", tc.args[0], got, mpiClip(job.ranks[0].err), tc.code)
		}
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Fatalf("lease %s under 2 ranks touched %s (%v)", tc.args[0], root, err)
		}
	}
}
