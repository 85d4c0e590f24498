package mpi

import (
	"bytes"
	"errors"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// launcherVars are the variables Detect reads.
var launcherVars = []string{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMMAND", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "PMI_FD",
	"SLURM_STEP_NUM_TASKS", "SLURM_TASK_PID", "SLURM_PROCID", "SLURM_MPI_TYPE", ModeEnv}

// noLauncher hides the launcher's variables, should the tests run under one.
func noLauncher(t *testing.T) {
	t.Helper()
	for _, v := range launcherVars {
		t.Setenv(v, "")
	}
}

func initSingle(t *testing.T) *World {
	t.Helper()
	noLauncher(t)
	w, err := Init(0)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestInitSingle(t *testing.T) {
	w := initSingle(t)
	host, _ := os.Hostname()
	if w.Rank() != 0 || w.Size() != 1 || w.Host() != host {
		t.Errorf("rank %d size %d host %q; want 0, 1, %q", w.Rank(), w.Size(), w.Host(), host)
	}
	if _, err := Init(-time.Second); err == nil {
		t.Error("Init(-1s) succeeded")
	}
}

// lengths are the payload sizes every collective must carry.
var lengths = []int{0, 1, 7, 4096, 1 << 20}

func payload(n, salt int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + salt)
	}
	return b
}

func TestSingleAnyLength(t *testing.T) {
	w := initSingle(t)
	for _, n := range lengths {
		data := payload(n, n)
		want := slices.Clone(data)

		got, err := w.Bcast(0, data)
		if err != nil || got == nil || !bytes.Equal(got, want) {
			t.Fatalf("Bcast(%d bytes) = %d bytes (nil %v), %v", n, len(got), got == nil, err)
		}
		if n > 0 {
			data[0]++ // the result is a copy
			if got[0] != want[0] {
				t.Errorf("Bcast(%d bytes) returned the caller's slice", n)
			}
			data[0]--
		}
		for name, gather := range map[string]func([]byte) ([][]byte, error){
			"Gather":    func(b []byte) ([][]byte, error) { return w.Gather(0, b) },
			"AllGather": w.AllGather,
		} {
			parts, err := gather(data)
			if err != nil || len(parts) != 1 || parts[0] == nil || !bytes.Equal(parts[0], want) {
				t.Fatalf("%s(%d bytes) = %d parts, %v", name, n, len(parts), err)
			}
		}
	}
}

func TestSingleAllMaxInt(t *testing.T) {
	w := initSingle(t)
	for _, v := range []int{0, -1, 42, math.MinInt, math.MaxInt} {
		if got, err := w.AllMaxInt(v); got != v || err != nil {
			t.Errorf("AllMaxInt(%d) = %d, %v", v, got, err)
		}
	}
	if err := w.Barrier(); err != nil {
		t.Error(err)
	}
}

func TestRootOutOfRange(t *testing.T) {
	w := initSingle(t)
	if _, err := w.Bcast(1, nil); err == nil || !strings.Contains(err.Error(), "root 1 out of range") {
		t.Errorf("Bcast(root 1 of 1) error = %v", err)
	}
	if _, err := w.Gather(-1, nil); err == nil || !strings.Contains(err.Error(), "root -1 out of range") {
		t.Errorf("Gather(root -1 of 1) error = %v", err)
	}
}

func TestFinalize(t *testing.T) {
	w := initSingle(t)
	if err := w.Finalize(); err != nil {
		t.Fatal(err)
	}
	if err := w.Finalize(); err != nil {
		t.Errorf("second Finalize: %v", err)
	}
	if _, err := w.AllGather(nil); err == nil || !strings.Contains(err.Error(), "AllGather after Finalize") {
		t.Errorf("AllGather after Finalize: %v", err)
	}
}

func TestPayloadLimit(t *testing.T) {
	defer func(old int64) { maxPayload = old }(maxPayload)
	maxPayload = 10
	w := initSingle(t)
	if _, err := w.Bcast(0, make([]byte, 10)); err != nil {
		t.Errorf("Bcast at the limit: %v", err)
	}
	if _, err := w.Bcast(0, make([]byte, 11)); err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Errorf("Bcast over the limit: %v", err)
	}
	if _, err := w.Gather(0, make([]byte, 11)); err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Errorf("Gather over the limit: %v", err)
	}
}

// TestAbortExits runs Abort in a child copy of the test binary: it must
// end the process with the given status.
func TestAbortExits(t *testing.T) {
	if os.Getenv("LEASE_MPI_ABORT_CHILD") == "1" {
		w, err := Init(0)
		if err != nil {
			os.Exit(90)
		}
		w.Abort(7)
		os.Exit(91) // Abort returned
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAbortExits$")
	cmd.Env = append(os.Environ(), "LEASE_MPI_ABORT_CHILD=1")
	for _, v := range launcherVars {
		cmd.Env = append(cmd.Env, v+"=")
	}
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("child ended with %v; want exit status 7", err)
	}
}
