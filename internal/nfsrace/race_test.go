//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/internal/uml"
)

// TestNFSRace runs scripts/nfs-race.sh, an NFS server kernel and two
// client kernels (User-Mode Linux) with two processes each locking,
// reading and rewriting one record through lease's filesystem seam, on
// NFSv3 and on NFSv4.2: no token may be written twice. On NFSv4.2 the
// seam's revalidation of the record's directory under the lock is what
// keeps it so (with a plain open, MODE=rec, 4 and 5 of 320 tokens were
// written twice: docs/safety.md, NFS).
func TestNFSRace(t *testing.T) {
	uml.Need(t)
	testenv.NeedTools(t, "uml_switch", "rpc.nfsd", "exportfs", "mount.nfs", "rpc.statd", "rpcbind", "go")
	script, err := filepath.Abs("../../scripts/nfs-race.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []struct{ vers, rounds string }{{"3", "40"}, {"4.2", "80"}} {
		vers := run.vers
		// A server lease time of 15 s: its grace period after the start, in
		// which clients wait, is as long (90 s by default).
		cmd := exec.Command(script, vers, run.rounds, "400", "15")
		cmd.Env = append(os.Environ(), "MODE=seam", "OFD_ROUNDS=20")
		out, err := cmd.CombinedOutput()
		t.Logf("NFSv%s: %s", vers, strings.TrimSpace(string(out)))
		if err != nil {
			t.Errorf("scripts/nfs-race.sh %s (MODE=seam): %v", vers, err)
		}
		if !strings.Contains(string(out), "tokens written twice: 0,") {
			t.Errorf("NFSv%s: no line saying no token was written twice", vers)
		}
	}
}
