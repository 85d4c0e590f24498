package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	slurmOnce sync.Once
	slurmErr  string
)

// NeedSlurm skips (or fails, under LEASE_TEST_REQUIRE with "slurm") t
// unless a Slurm cluster answers: sbatch, srun and sinfo on PATH and a node
// that takes jobs. When Slurm is installed but not up (its daemons are not
// running, as after a reboot) it runs the repository's .ci/slurm-up.sh
// once per test binary, as root, and leaves the cluster up for the tests
// that follow (.ci/slurm-down.sh stops it). Installing Slurm is .ci/run's
// job, not the tests'.
func NeedSlurm(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"sbatch", "srun", "sinfo", "scancel"} {
		if _, err := exec.LookPath(tool); err != nil {
			Missing(t, "slurm", tool+" is not installed: run .ci/slurm-up.sh (it installs slurm-wlm and munge and starts a one-node cluster)")
		}
	}
	slurmOnce.Do(func() { slurmErr = bringUpSlurm() })
	if slurmErr != "" {
		Missing(t, "slurm", slurmErr)
	}
}

// slurmUp reports whether the cluster takes jobs: a node idle, mixed or
// allocated.
func slurmUp() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sinfo", "-h", "-o", "%T").Output()
	if err != nil {
		return false
	}
	for _, st := range strings.Fields(string(out)) {
		st = strings.TrimRight(st, "*~#$@+")
		if st == "idle" || st == "mixed" || st == "allocated" {
			return true
		}
	}
	return false
}

// bringUpSlurm makes the cluster answer, or says why it does not.
func bringUpSlurm() string {
	if slurmUp() {
		return ""
	}
	if os.Geteuid() != 0 {
		return "Slurm is installed but not up, and bringing it up (.ci/slurm-up.sh) needs root"
	}
	script, err := repoFile(".ci/slurm-up.sh")
	if err != nil {
		return fmt.Sprintf("Slurm is not up and %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", script).CombinedOutput()
	if err != nil || !slurmUp() {
		return fmt.Sprintf("Slurm is not up, and %s failed (%v):\n%s", script, err, out)
	}
	return ""
}

// repoFile finds rel in the repository holding the working directory: the
// closest parent with a go.mod that has rel.
func repoFile(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, rel)); err == nil {
				return filepath.Join(dir, rel), nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s above the working directory", rel)
		}
		dir = parent
	}
}
