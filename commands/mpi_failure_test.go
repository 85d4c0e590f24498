//go:build mpi

package commands_test

// A rank that fails under mpirun (seed F357): its failure is the same
// negative result on every rank within the watchdog bound, never a hang.
// Run with `go test -tags mpi ./commands/`.

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/faultfs"
	"github.com/leasetool/lease/faultfs/faultfstest"
)

// TestMPIRankFailureIsAgreed: one rank's view of the table is missing or
// read-only, or one rank is stuck in its filesystem. Every rank that
// finishes exits with the same status, within the watchdog bound, and
// nothing is printed as renewed (seed F357: one rank's failure is the
// same negative result on all ranks, never a hang).
func TestMPIRankFailureIsAgreed(t *testing.T) {
	bin := mpiBinary(t)
	dir := t.TempDir()
	root, held := mpiHeldTable(t, bin, dir, 16, 200)
	input := mpiInput(t, strings.Join(held, "\n")+"\n")
	missing := filepath.Join(dir, "no", "such", "table")
	renew := []string{"renew-batch", "--now", "2000", "--mpi-timeout", "30", input}
	// app is one MPMD application: a rank of lease ARGS with LEASE_ROOT.
	app := func(leaseRoot string) []string {
		return append([]string{"-np", "1", "@RANK", "env", "LEASE_ROOT=" + leaseRoot, bin}, renew...)
	}
	agreed := func(t *testing.T, job mpiJob, code int, say ...string) {
		t.Helper()
		for r, rr := range job.ranks {
			if rr.exit != code {
				t.Errorf("rank %d: exit %d, want %d (stderr %q)", r, rr.exit, code, mpiClip(rr.err))
			}
			if rr.out != "" {
				t.Errorf("rank %d printed on stdout %q: nothing may be reported renewed", r, mpiClip(rr.out))
			}
		}
		for _, s := range say {
			if !strings.Contains(job.ranks[0].err, s) {
				t.Errorf("rank 0's stderr does not say %q: %q", s, mpiClip(job.ranks[0].err))
			}
		}
	}
	t.Run("rank 1 root missing", func(t *testing.T) {
		before := mpiTree(t, root)
		job := mpiLaunch(t, 2*time.Minute, 2, "", slices.Concat(app(root), []string{":"}, app(missing))...)
		agreed(t, job, 2, "rank 1 of 2", "no lease table at "+missing)
		mpiSameTree(t, "after the failed run", before, mpiTree(t, root))
		if _, err := os.Stat(missing); err == nil {
			t.Errorf("rank 1 made a table at %s", missing)
		}
		// mpirun itself exits with the agreed status.
		job = mpiLaunchDefault(t, 2*time.Minute, 2, "", slices.Concat(app(root), []string{":"}, app(missing))...)
		if job.code != 2 {
			t.Errorf("mpirun exit %d, want 2; stderr %s", job.code, mpiClip(job.stderr))
		}
	})
	t.Run("rank 0 root missing", func(t *testing.T) {
		// Only lease init creates a table: rank 0 refuses, and so do all.
		os.RemoveAll(filepath.Join(dir, "no"))
		before := mpiTree(t, root)
		job := mpiLaunch(t, 2*time.Minute, 2, "", slices.Concat(app(missing), []string{":"}, app(root))...)
		agreed(t, job, 2, "rank 0 of 2", "no lease table at "+missing)
		mpiSameTree(t, "after the failed run", before, mpiTree(t, root))
		if _, err := os.Stat(missing); err == nil {
			t.Errorf("rank 0 made a table at %s", missing)
		}
	})
	t.Run("watch, rank 1 on another table", func(t *testing.T) {
		// renew-batch --watch across ranks checks, as one-shot batches do,
		// that every rank opened rank 0's table (it did not before).
		other := filepath.Join(dir, "other")
		mpiCopyTable(t, root, other)
		os.Chtimes(filepath.Join(other, "TABLE"), time.Unix(1, 0), time.Unix(1, 0))
		before := mpiTree(t, root)
		watch := []string{"renew-batch", "--watch", "--interval", "0.5", "--mpi-timeout", "30", input}
		wapp := func(leaseRoot string) []string {
			return append([]string{"-np", "1", "@RANK", "env", "LEASE_ROOT=" + leaseRoot, bin}, watch...)
		}
		job := mpiLaunch(t, 2*time.Minute, 2, "", slices.Concat(wapp(root), []string{":"}, wapp(other))...)
		agreed(t, job, 2, "rank 1 of 2", "opened another table than rank 0")
		mpiSameTree(t, "after the refused watch", before, mpiTree(t, root))
	})
	t.Run("rank 1 root read-only", func(t *testing.T) {
		mpiNeedRoot(t, "a read-only bind mount")
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o777); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "--bind", root, ro).CombinedOutput(); err != nil {
			mpiMissing(t, "mount --bind: "+strings.TrimSpace(string(out)))
		}
		t.Cleanup(func() {
			if out, err := exec.Command("umount", ro).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v: %s", ro, err, out)
				exec.Command("umount", "-l", ro).Run()
			}
		})
		if out, err := exec.Command("mount", "-o", "remount,ro,bind", ro).CombinedOutput(); err != nil {
			t.Fatalf("mount -o remount,ro,bind: %v: %s", err, out)
		}
		job := mpiLaunch(t, 2*time.Minute, 2, "", slices.Concat(app(root), []string{":"}, app(ro))...)
		agreed(t, job, 4)
		// Every line is on stderr as an I/O error. Rank 0 renewed its
		// shards, but reports none: they name rank 1's read-only
		// filesystem as the cause.
		lines := strings.Split(strings.TrimSuffix(job.ranks[0].err, "\n"), "\n")
		if len(lines) != len(held) {
			t.Fatalf("rank 0 printed %d stderr lines, want %d: %q", len(lines), len(held), mpiClip(job.ranks[0].err))
		}
		var mine, theirs int
		for _, l := range lines {
			switch {
			case !strings.HasPrefix(l, "io-error "):
				t.Errorf("stderr line %q, want reason io-error", l)
			case strings.Contains(l, "("+ro+"/"):
				theirs++
			case strings.Contains(l, "("+root+"/"):
				mine++
				if !strings.Contains(l, "batch failed, not renewed: rank 1 of 2") || !strings.Contains(l, "read-only file system") {
					t.Errorf("rank 0's line %q does not name rank 1's read-only filesystem", l)
				}
			default:
				t.Errorf("stderr line %q names neither root", l)
			}
		}
		if mine == 0 || theirs == 0 || !strings.Contains(job.ranks[0].err, "read-only file system (the table's filesystem is mounted read-only") {
			t.Errorf("%d lines of rank 0's shards, %d of rank 1's; want some of each, and rank 1's cause", mine, theirs)
		}
	})
	t.Run("rank 1 stuck", func(t *testing.T) {
		// Rank 1 sees the table through a FUSE mount whose file fsyncs
		// never return: rank 0 waits for it in a collective until the
		// watchdog (--mpi-timeout 3) aborts the whole job.
		m := faultfstest.MountOn(t, root, t.TempDir(), faultfs.Options{Rules: []faultfs.Rule{{Op: faultfs.OpFsync, Delay: time.Hour}}})
		stuck := slices.Clone(renew)
		stuck[len(stuck)-2] = "3" // --mpi-timeout
		start := time.Now()
		job := mpiLaunch(t, 2*time.Minute, 2, "", slices.Concat(
			[]string{"-np", "1", "@RANK", "env", "LEASE_ROOT=" + root, bin}, stuck, []string{":"},
			[]string{"-np", "1", "@RANK", "env", "LEASE_ROOT=" + m.Dir, bin}, stuck)...)
		if job.code != 4 {
			t.Errorf("mpirun exit %d, want 4 (the watchdog's); stderr %s", job.code, mpiClip(job.stderr))
		}
		for r, rr := range job.ranks {
			if rr.out != "" {
				t.Errorf("rank %d printed on stdout %q", r, mpiClip(rr.out))
			}
		}
		if !strings.Contains(job.ranks[0].err, "did not complete within 3s") {
			t.Errorf("rank 0's stderr does not name the watchdog: %q", mpiClip(job.ranks[0].err))
		}
		t.Logf("the stuck job ended after %v", time.Since(start).Round(time.Millisecond))
	})
}
