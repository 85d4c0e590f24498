package qualify

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/mpi"
	"github.com/leasetool/lease/mpi/mpitest"
)

// The test binary is also the second process of the lock checks: the
// "qualify lock holder" role (testenv.Role) runs HoldLock on its one
// argument, the file.
func init() {
	testenv.Role("qualify lock holder", func(a []string) int {
		if len(a) != 1 || HoldLock(context.Background(), a[0], os.Stdout) != nil {
			return 5
		}
		return 0
	})
}

func holder(file string) *exec.Cmd {
	return testenv.RoleCmd(context.Background(), "qualify lock holder", file)
}

// TestRunOneRank: the local checks pass on the test's filesystem, the
// scratch directory is removed, and the proof is verified.
func TestRunOneRank(t *testing.T) {
	root := t.TempDir()
	ws, _ := mpitest.Worlds(1, time.Minute)
	p := Run(context.Background(), ws[0], root, Options{Rounds: 4, MaxSkew: 2, Holder: holder})
	if !p.Verified || !p.Clean || len(p.Members) != 1 || p.Rounds != 0 {
		t.Fatalf("proof on one rank: %+v", p)
	}
	names := map[string]bool{}
	for _, c := range p.Checks {
		names[c.Name] = c.Pass
	}
	for _, n := range []string{"o-excl-create", "file-fsync", "atomic-rename", "directory-fsync", "lock-exclusion", "lock-release-on-death", "filesystem-clock-skew"} {
		if !names[n] {
			t.Errorf("check %s missing or failed: %+v", n, p.Checks)
		}
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("the scratch directory was left: %v", ents)
	}
}

// TestRunThreeRanks: three in-process ranks share one directory: every
// round one holds the lock, the two others are refused and read its
// identity, and the lock passes on.
func TestRunThreeRanks(t *testing.T) {
	root := t.TempDir()
	ws, _ := mpitest.Worlds(3, time.Minute)
	proofs := make([]Proof, 3)
	errs := mpitest.Run(ws, func(w *mpi.World) error {
		proofs[w.Rank()] = Run(context.Background(), w, root, Options{Rounds: 3, MaxSkew: 2, Holder: holder})
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	p := proofs[0]
	if !p.Verified || p.Rounds != 3 || p.Contention != 6 || p.Identity != 6 || p.Release != 3 || len(p.Members) != 3 {
		t.Fatalf("proof over 3 ranks: %+v", p)
	}
	if p.MaxClockSkewS <= 0 {
		t.Errorf("no skew measured: %v", p.MaxClockSkewS)
	}
}

// TestRunFailsWithoutHolder: without a second process the lock checks
// fail, and so does the proof.
func TestRunFailsWithoutHolder(t *testing.T) {
	ws, _ := mpitest.Worlds(1, time.Minute)
	p := Run(context.Background(), ws[0], filepath.Join(t.TempDir(), "t"), Options{Rounds: 1, MaxSkew: 2})
	if p.Verified || p.Clean || p.Error == "" {
		t.Fatalf("a proof without lock checks: %+v", p)
	}
}
