package commands_test

// lease qualify as one process (docs/design.md#mpi) on the root filesystem, on
// loop-mounted ext4 and xfs, and on FUSE filesystems (faultfs) that refuse
// directory fsync or whose locks do not exclude. The binary is the one
// TestMain built: the lock checks start it again as their second process.

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leasetool/lease/faultfs"
	"github.com/leasetool/lease/faultfs/faultfstest"
	"github.com/leasetool/lease/internal/testenv"
)

// qualProof is the proof qualify prints; decoding refuses unknown fields,
// so the schema is exactly docs/design.md#mpi's.
type qualProof struct {
	Members []struct {
		Rank int    `json:"rank"`
		Host string `json:"host"`
	} `json:"members"`
	Clean         bool    `json:"clean"`
	Verified      bool    `json:"verified"`
	Rounds        int     `json:"rounds"`
	Contention    int     `json:"contention"`
	Release       int     `json:"release"`
	Identity      int     `json:"identity"`
	MaxClockSkewS float64 `json:"max_clock_skew_s"`
	Checks        []struct {
		Name   string `json:"name"`
		Rank   int    `json:"rank"`
		Pass   bool   `json:"pass"`
		Detail string `json:"detail"`
	} `json:"checks"`
	Error string `json:"error"`
}

// qualLocalChecks are the checks every rank makes on its own.
var qualLocalChecks = []string{"filesystem", "inodes", "o-excl-create", "file-fsync", "atomic-rename", "directory-fsync",
	"lock-exclusion", "lock-release-on-death", "filesystem-clock-skew", "sync"}

// qualDecode decodes the one line qualify prints.
func qualDecode(t *testing.T, out string) qualProof {
	t.Helper()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("qualify printed %q, want one JSON line", mpiClip(out))
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var p qualProof
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("qualify's proof %q: %v", mpiClip(out), err)
	}
	return p
}

// qualCheck returns the pass value of the check name of rank, and whether
// the proof has it exactly once.
func qualCheck(p qualProof, name string, rank int) (pass, once bool) {
	n := 0
	for _, c := range p.Checks {
		if c.Name == name && c.Rank == rank {
			pass = c.Pass
			n++
		}
	}
	return pass, n == 1
}

// qualPasses fails t unless the single-process proof is verified, clean,
// has every local check passing once, and no rounds.
func qualPasses(t *testing.T, p qualProof, out string) {
	t.Helper()
	if !p.Verified || !p.Clean || p.Error != "" {
		t.Errorf("proof not verified/clean: %s", mpiClip(out))
	}
	if p.Rounds != 0 || p.Contention != 0 || p.Release != 0 || p.Identity != 0 || len(p.Members) != 1 || p.Members[0].Rank != 0 {
		t.Errorf("one process: want rounds, contention, release and identity 0 and one member, got %s", mpiClip(out))
	}
	for _, name := range qualLocalChecks {
		if pass, once := qualCheck(p, name, 0); !pass || !once {
			t.Errorf("check %s: pass=%v, once=%v; want it once and passing", name, pass, once)
		}
	}
	if len(p.Checks) != len(qualLocalChecks) {
		t.Errorf("%d checks, want %d: %s", len(p.Checks), len(qualLocalChecks), mpiClip(out))
	}
}

// qualNoScratchLeft fails t if qualify left its scratch directory.
func qualNoScratchLeft(t *testing.T, root string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(root, ".qualify.*"))
	if len(left) > 0 {
		t.Errorf("qualify left %v behind", left)
	}
}

// TestQualifyRootFilesystem: on the machine's own filesystem every check
// passes, the proof is verified and qualify exits 0.
func TestQualifyRootFilesystem(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "table")
	out, errOut, code := mpiExec(t, procBin, "", "qualify", "--json", "--root", root)
	if code != 0 {
		t.Errorf("exit %d, want 0; stderr %q", code, errOut)
	}
	qualPasses(t, qualDecode(t, out), out)
	qualNoScratchLeft(t, root)
}

// qualLoopMount makes a fresh 512 MiB image of fstype, loop-mounts it and
// returns the mountpoint; skipped without root or the mkfs tool.
func qualLoopMount(t *testing.T, fstype string) string {
	t.Helper()
	return testenv.LoopMount(t, fstype, 512<<20)
}

// TestQualifyLoopFilesystems: qualify passes on freshly made ext4 and xfs
// filesystems.
func TestQualifyLoopFilesystems(t *testing.T) {
	t.Parallel()
	for _, fstype := range []string{"ext4", "xfs"} {
		t.Run(fstype, func(t *testing.T) {
			mnt := qualLoopMount(t, fstype)
			root := filepath.Join(mnt, "table")
			out, errOut, code := mpiExec(t, procBin, "", "qualify", "--json", "--root", root)
			if code != 0 {
				t.Errorf("exit %d, want 0; stderr %q", code, errOut)
			}
			qualPasses(t, qualDecode(t, out), out)
			qualNoScratchLeft(t, root)
		})
	}
}

// qualFails runs qualify on root and checks that it fails, with exit 1,
// because of the check bad (on rank 0) while the checks in good pass.
func qualFails(t *testing.T, root, bad string, good []string) {
	t.Helper()
	out, errOut, code := mpiExec(t, procBin, "", "qualify", "--json", "--root", root)
	if code != 1 {
		t.Errorf("exit %d, want 1; stderr %q", code, errOut)
	}
	p := qualDecode(t, out)
	if p.Verified || p.Clean {
		t.Errorf("proof verified=%v clean=%v, want both false: %s", p.Verified, p.Clean, mpiClip(out))
	}
	if pass, once := qualCheck(p, bad, 0); pass || !once {
		t.Errorf("check %s: pass=%v once=%v; want it once and failing: %s", bad, pass, once, mpiClip(out))
	}
	if !strings.Contains(p.Error, bad) {
		t.Errorf("error %q does not name %s", p.Error, bad)
	}
	for _, name := range good {
		if pass, _ := qualCheck(p, name, 0); !pass {
			t.Errorf("check %s failed, want only %s to fail: %s", name, bad, mpiClip(out))
		}
	}
	qualNoScratchLeft(t, root)
}

// TestQualifyRefusesNoDirectoryFsync: on a FUSE filesystem whose directory
// fsync fails with EINVAL, the directory-fsync check fails (the others
// pass) and qualify exits 1.
func TestQualifyRefusesNoDirectoryFsync(t *testing.T) {
	t.Parallel()
	m := faultfstest.Mount(t, faultfs.Options{Rules: []faultfs.Rule{{Op: faultfs.OpFsyncDir, Errno: syscall.EINVAL}}})
	qualFails(t, m.Dir, "directory-fsync", []string{"o-excl-create", "file-fsync", "atomic-rename", "lock-exclusion", "lock-release-on-death"})
	if n := m.Injected()[faultfs.OpFsyncDir]; n < 1 {
		t.Errorf("faultfs failed %d directory fsyncs, want at least 1", n)
	}
	// A root still to be made on such a filesystem: making it durably
	// fails (its parent cannot be fsynced), and every check is still run.
	out, _, code := mpiExec(t, procBin, "", "qualify", "--json", "--root", filepath.Join(m.Dir, "new"))
	p := qualDecode(t, out)
	if code != 1 || p.Verified {
		t.Errorf("new root: exit %d, verified %v; want 1, false", code, p.Verified)
	}
	for _, name := range []string{"root", "directory-fsync"} {
		if pass, once := qualCheck(p, name, 0); pass || !once {
			t.Errorf("new root: check %s pass=%v once=%v, want it once and failing: %s", name, pass, once, mpiClip(out))
		}
	}
	if pass, _ := qualCheck(p, "atomic-rename", 0); !pass {
		t.Errorf("new root: atomic-rename was not run or failed: %s", mpiClip(out))
	}
}

// TestQualifyRefusesLocksThatDoNotExclude: on a FUSE filesystem whose
// locks all succeed, the lock-exclusion check fails (directory fsync
// passes) and qualify exits 1.
func TestQualifyRefusesLocksThatDoNotExclude(t *testing.T) {
	t.Parallel()
	m := faultfstest.Mount(t, faultfs.Options{Locks: faultfs.LocksBroken})
	qualFails(t, m.Dir, "lock-exclusion", []string{"o-excl-create", "file-fsync", "atomic-rename", "directory-fsync"})
	// The same mount with locks that exclude qualifies: the failure above
	// is the locks', not the mount's.
	if err := m.SetLockMode(faultfs.LocksForward); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := mpiExec(t, procBin, "", "qualify", "--json", "--root", m.Dir)
	if code != 0 {
		t.Errorf("locks that exclude: exit %d, want 0; stderr %q", code, errOut)
	}
	qualPasses(t, qualDecode(t, out), out)
}
