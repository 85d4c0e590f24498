package commands_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leasetool/lease/internal/testenv"
)

// TestReadOnlyFilesystem: a table on a read-only filesystem is exit 4
// (the machine's state, docs/design.md#cli) for every command that
// writes, with the hint, nothing written, and --json says the same status
// and reason; reading it works. Before, claim, renew-batch, complete,
// release and revoke exited 2 there, and their --json said io-error with
// exit 2.
func TestReadOnlyFilesystem(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "a read-only bind mount")
	root := uxTable(t)
	id := string(uxID("read-only"))
	held := uxMust(t, 0, "", "claim", "--root", root, id).out
	queued := string(uxID("read-only-q"))
	uxMust(t, 0, queued+"\n", "add", "--root", root, "-")
	ro := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(ro, 0o755)
	if err := syscall.Mount(root, ro, "", syscall.MS_BIND, ""); err != nil {
		testenv.Missing(t, "root", "bind mount: "+err.Error())
	}
	t.Cleanup(func() { syscall.Unmount(ro, syscall.MNT_DETACH) })
	if err := syscall.Mount("", ro, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	before := coreSnapshot(t, root)
	for _, args := range [][]string{{"renew-batch", "--root", ro}, {"claim", "--root", ro, string(uxID("read-only-2"))},
		{"complete", "--root", ro}, {"release", "--root", ro}, {"revoke", "--root", ro, id}} {
		r := uxMust(t, 4, held, args...)
		if !strings.Contains(r.errOut, "read-only filesystem: "+ro+"/work/") || !strings.Contains(r.errOut, "hint: the table's filesystem is mounted read-only") {
			t.Errorf("lease %v on a read-only filesystem: %q", args, r.errOut)
		}
	}
	for _, args := range [][]string{{"complete", "--root", ro, "--publish", "r.bin"}, {"claim", "--root", ro, "--next", "1"},
		// lease work waits a read-only table out (lease-work(1)); --max-wait
		// bounds the wait, and then it exits 4 as the others do.
		{"claim", "--root", ro, "--first", "1", "-"}, {"add", "--root", ro, "-"}, {"retry", "--root", ro, id}, {"work", "--root", ro, "--max-wait", "0.5", "--", "true"}} {
		in := held
		if args[0] == "add" || args[0] == "claim" {
			in = string(uxID("read-only-3")) + "\n"
		}
		uxMust(t, 4, in, args...)
	}
	for _, args := range [][]string{{"renew-batch"}, {"complete"}, {"release"}, {"claim", "--next", "1"}} {
		r := uxMust(t, 4, held, append(append(args[:1:1], "--root", ro, "--json"), args[1:]...)...)
		var doc struct {
			Exit    int `json:"exit"`
			Results []struct {
				Reason string `json:"reason"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(r.out), &doc); err != nil || doc.Exit != 4 || len(doc.Results) == 0 || doc.Results[0].Reason != "io-error" {
			t.Errorf("lease %v --json on a read-only filesystem: %v %q\nwant exit 4 and io-error, as the status", args, err, r.out)
		}
	}
	coreSame(t, "read-only filesystem", before, coreSnapshot(t, root))
	if r := uxMust(t, 0, held, "verify", "--root", ro); r.out != held {
		t.Errorf("verify on a read-only filesystem: %q", r.out)
	}
	uxMust(t, 0, "", "status", "--root", ro, id)
}
