//go:build mpi

package commands_test

// lease qualify under mpirun: the cluster proven on a shared filesystem,
// one negative proof on every rank where it is not. Run with
// `go test -tags mpi ./commands/`.

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/faultfs"
	"github.com/leasetool/lease/faultfs/faultfstest"
)

// mpiQualify runs qualify under mpirun with np ranks and returns every
// rank's proof, checking that all ranks printed the identical line and
// exited with the same status as mpirun.
func mpiQualify(t *testing.T, np int, apps ...string) (qualProof, mpiJob) {
	t.Helper()
	job := mpiLaunch(t, 2*time.Minute, np, "", apps...)
	mpiSameExit(t, job)
	job.code = job.ranks[0].exit
	for r, rr := range job.ranks {
		if rr.out != job.ranks[0].out {
			t.Errorf("np %d: rank %d printed another proof than rank 0:\n%s\nrank 0:\n%s", np, r, mpiClip(rr.out), mpiClip(job.ranks[0].out))
		}
	}
	return qualDecode(t, job.ranks[0].out), job
}

// TestMPIQualify: on the root filesystem qualify is verified as one
// process and under mpirun -np 2, 3, 4: every rank prints the identical
// proof, with every rank a member, contention = identity =
// rounds*(size-1) and release = rounds. Ranks that do not share the
// filesystem, or share one whose locks do not exclude, get one identical
// negative proof and exit 1 on every rank.
func TestMPIQualify(t *testing.T) {
	bin := mpiBinary(t)
	const rounds = 3
	root := filepath.Join(t.TempDir(), "table")
	out, errOut, code := mpiExec(t, bin, "", "qualify", "--json", "--root", root, "--rounds", "5")
	if code != 0 {
		t.Errorf("one process: exit %d, stderr %q", code, errOut)
	}
	qualPasses(t, qualDecode(t, out), out)
	for _, np := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("np %d", np), func(t *testing.T) {
			p, job := mpiQualify(t, np, mpiNP(np, bin, "qualify", "--json", "--root", root, "--rounds", strconv.Itoa(rounds))...)
			if job.code != 0 || !p.Verified || !p.Clean || p.Error != "" {
				t.Errorf("exit %d, proof %s", job.code, mpiClip(job.ranks[0].out))
			}
			if p.Rounds != rounds || p.Contention != rounds*(np-1) || p.Identity != rounds*(np-1) || p.Release != rounds {
				t.Errorf("rounds %d contention %d identity %d release %d; want %d, %d, %d, %d",
					p.Rounds, p.Contention, p.Identity, p.Release, rounds, rounds*(np-1), rounds*(np-1), rounds)
			}
			if len(p.Members) != np {
				t.Errorf("%d members, want %d", len(p.Members), np)
			}
			for r := 0; r < np; r++ {
				if r < len(p.Members) && p.Members[r].Rank != r {
					t.Errorf("member %d is rank %d", r, p.Members[r].Rank)
				}
				for _, name := range qualLocalChecks {
					if pass, once := qualCheck(p, name, r); !pass || !once {
						t.Errorf("rank %d check %s: pass=%v once=%v", r, name, pass, once)
					}
				}
			}
			for _, name := range []string{"cluster-rounds", "rank-clock-skew"} {
				if pass, once := qualCheck(p, name, 0); !pass || !once {
					t.Errorf("check %s: pass=%v once=%v", name, pass, once)
				}
			}
			qualNoScratchLeft(t, root)
		})
	}
	t.Run("not shared", func(t *testing.T) {
		// Rank 1 has a table root of its own: it cannot see rank 0's
		// scratch directory, takes a lock rank 0 holds, and reads no
		// identity record.
		other := filepath.Join(t.TempDir(), "table")
		p, job := mpiQualify(t, 2, slices.Concat(
			mpiNP(1, bin, "qualify", "--json", "--root", root, "--rounds", strconv.Itoa(rounds)), []string{":"},
			mpiNP(1, bin, "qualify", "--json", "--root", other, "--rounds", strconv.Itoa(rounds)))...)
		if job.code != 1 || p.Verified || p.Clean {
			t.Errorf("exit %d verified %v clean %v; want 1, false, false", job.code, p.Verified, p.Clean)
		}
		if p.Contention != 0 || p.Identity != 0 {
			t.Errorf("contention %d identity %d, want 0 and 0: %s", p.Contention, p.Identity, mpiClip(job.ranks[0].out))
		}
		if pass, _ := qualCheck(p, "scratch-directory", 1); pass {
			t.Errorf("rank 1's scratch-directory check passed: %s", mpiClip(job.ranks[0].out))
		}
		if !strings.Contains(p.Error, "on rank 1") {
			t.Errorf("error %q does not name rank 1", p.Error)
		}
	})
	t.Run("locks do not exclude", func(t *testing.T) {
		m := faultfstest.Mount(t, faultfs.Options{Locks: faultfs.LocksBroken})
		p, job := mpiQualify(t, 2, mpiNP(2, bin, "qualify", "--json", "--root", m.Dir, "--rounds", strconv.Itoa(rounds))...)
		if job.code != 1 || p.Verified {
			t.Errorf("exit %d verified %v; want 1, false", job.code, p.Verified)
		}
		for r := 0; r < 2; r++ {
			if pass, once := qualCheck(p, "lock-exclusion", r); pass || !once {
				t.Errorf("rank %d lock-exclusion pass=%v once=%v, want failing", r, pass, once)
			}
		}
		if p.Contention != 0 {
			t.Errorf("contention %d, want 0: every rank took the held lock", p.Contention)
		}
		if pass, _ := qualCheck(p, "cluster-rounds", 0); pass {
			t.Errorf("cluster-rounds passed")
		}
	})
}
