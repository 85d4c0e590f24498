//go:build linux

package commands_test

// A full filesystem keeps every live lease (issue 28;
// docs/design.md#durability): holders renew and complete through the
// table's reserve while claims are refused with exit 4, on a loop-mounted
// ext4 filled to 100% by another process, and through faultfs failing
// every create with ENOSPC. Before the reserve, every renewal and complete
// there failed with exit 4 and every lease lapsed.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leasetool/lease/faultfs"
	"github.com/leasetool/lease/faultfs/faultfstest"
	"github.com/leasetool/lease/internal/testenv"
)

// fill takes every byte left on the filesystem at dir (testenv.Fill).
func fill(t *testing.T, dir string) { testenv.Fill(t, dir) }

// fullDiskRun runs the proof on the table at root once fillUp made its
// filesystem full: held leases renewed three times and half of them
// completed, all with exit 0 and nothing lost; a claim of new work
// refused with exit 4 on one line; fsck clean.
func fullDiskRun(t *testing.T, root string, fillUp func()) {
	run := func(stdin string, args ...string) coreResult {
		out, errOut, code := mpiExec(t, procBin, stdin, append([]string{args[0], "--root", root}, args[1:]...)...)
		return coreResult{code, out, errOut}
	}
	must := func(want int, stdin string, args ...string) coreResult {
		t.Helper()
		r := run(stdin, args...)
		if r.code != want {
			t.Fatalf("lease %s: %s\nwant exit %d", strings.Join(args, " "), r, want)
		}
		return r
	}
	must(0, "", "init", "--shards", "4")
	if n, _ := os.ReadDir(filepath.Join(root, "reserve")); len(n) == 0 {
		t.Fatalf("lease init made no reserve in %s", root)
	}
	var ids strings.Builder
	for _, id := range coreIDs("fulldisk", 120) {
		ids.WriteString(string(id) + "\n")
	}
	must(0, ids.String(), "add", "-")
	held := must(0, "", "claim", "--next", "100", "--ttl", "600").out
	if got := len(lines(held)); got != 100 {
		t.Fatalf("claimed %d, want 100", got)
	}
	fillUp()
	for round := 1; round <= 3; round++ {
		r := must(0, held, "renew-batch", "-v")
		if r.out != held || !strings.Contains(r.errOut, "spares_used=100 ") {
			t.Fatalf("renewal %d on a full filesystem: %s\nwant every lease renewed through the reserve", round, r)
		}
	}
	ls := lines(held)
	done := strings.Join(ls[:50], "\n") + "\n"
	if r := must(0, done, "complete"); r.out != done {
		t.Fatalf("complete on a full filesystem: %s", r)
	}
	keep := strings.Join(ls[50:], "\n") + "\n"
	if r := must(0, keep, "verify"); r.out != keep {
		t.Fatalf("verify after the full-disk episode: %s", r)
	}
	// Claims of new work may not use the reserve: refused, exit 4, one
	// line beside the record's own.
	r := must(4, "", "claim", "--next", "5")
	if r.out != "" || !(strings.Contains(r.errOut, "out of space") || strings.Contains(r.errOut, "no space left")) {
		t.Errorf("claim --next on a full filesystem: %s\nwant nothing granted, out of space", r)
	}
	r = must(4, string(coreID("fulldisk-new"))+"\n", "claim", "-")
	if r.out != "" || len(lines(r.errOut)) > 2 {
		t.Errorf("claim on a full filesystem: %s\nwant nothing granted and a bounded report", r)
	}
	if r := must(0, "", "fsck"); !strings.Contains(r.out, "errors: none") || !strings.Contains(r.out, "reserve: ") {
		t.Errorf("fsck after the full-disk episode: %s", r)
	}
}

// TestFullDiskKeepsLiveLeases: ext4 (4 KiB blocks) filled to 100%.
func TestFullDiskKeepsLiveLeases(t *testing.T) {
	t.Parallel()
	mnt := testenv.LoopMount(t, "ext4", 64<<20, "-b", "4096", "-m", "0")
	fullDiskRun(t, filepath.Join(mnt, "table"), func() { fill(t, mnt) })
}

// TestFullDiskThroughFaultfs: faultfs fails every create with ENOSPC, as a
// full filesystem does (writes into allocated blocks still work).
func TestFullDiskThroughFaultfs(t *testing.T) {
	t.Parallel()
	m := faultfstest.Mount(t, faultfs.Options{})
	fullDiskRun(t, filepath.Join(m.Dir, "table"), func() {
		if err := m.SetRules([]faultfs.Rule{{Op: faultfs.OpCreate, Errno: syscall.ENOSPC}}); err != nil {
			t.Fatal(err)
		}
	})
	if m.Injected()[faultfs.OpCreate] == 0 {
		t.Fatal("faultfs failed no create: the test proved nothing")
	}
}

// TestFullDiskWithoutReserve: a table without reserve/ (made by another
// program) works as before: on a full filesystem a renewal fails with
// exit 4, once per batch, and nothing is written.
func TestFullDiskWithoutReserve(t *testing.T) {
	t.Parallel()
	mnt := testenv.LoopMount(t, "ext4", 64<<20, "-b", "4096", "-m", "0")
	root := filepath.Join(mnt, "table")
	if _, _, code := mpiExec(t, procBin, "", "init", "--root", root, "--shards", "4"); code != 0 {
		t.Fatal("init failed")
	}
	if out, err := exec.Command("rm", "-rf", filepath.Join(root, "reserve")).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	held, _, code := mpiExec(t, procBin, string(coreID("no-reserve"))+"\n", "claim", "--root", root, "--ttl", "600", "-")
	if code != 0 {
		t.Fatal("claim failed")
	}
	fill(t, mnt)
	out, errOut, code := mpiExec(t, procBin, held, "renew-batch", "--root", root)
	if code != 4 || out != "" || !strings.Contains(errOut, "no reserve") {
		t.Errorf("renew-batch on a full filesystem without a reserve: exit %d\n%s%s\nwant exit 4, the reserve named", code, out, errOut)
	}
	if out, _, code := mpiExec(t, procBin, held, "verify", "--root", root); code != 0 || out != held {
		t.Errorf("the lease after a failed renewal: exit %d %q", code, out)
	}
}
