package commands_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/commit/seam"
)

// TestRenewInPlace: renew-batch --in-place held renews the lines of held
// and replaces it by those still held, also when one was lost (exit 1);
// when nothing could be renewed (exit 2 or 4) held stays as it was.
func TestRenewInPlace(t *testing.T) {
	root := uxTable(t)
	dir := t.TempDir()
	held := filepath.Join(dir, "held")
	ids := []string{string(uxID("in-place-a")), string(uxID("in-place-b")), string(uxID("in-place-c"))}
	lines := uxMust(t, 0, strings.Join(ids, "\n")+"\n", "claim", "--root", root, "--now", "1000", "-").out
	os.WriteFile(held, []byte(lines), 0o640)
	uxMust(t, 0, "", "revoke", "--root", root, "--now", "1001", ids[1])
	r := uxMust(t, 1, "", "renew-batch", "--root", root, "--now", "1002", "--in-place", held)
	if r.out != "" || !strings.Contains(r.errOut, "released "+ids[1]) {
		t.Errorf("renew-batch --in-place with a lost lease: %q / %q", r.out, r.errOut)
	}
	want := ""
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		if !strings.HasPrefix(l, ids[1]) {
			want += l + "\n"
		}
	}
	got, _ := os.ReadFile(held)
	if string(got) != want {
		t.Errorf("held after the lost lease: %q, want %q", got, want)
	}
	if fi, _ := os.Stat(held); fi.Mode().Perm() != 0o640 {
		t.Errorf("held lost its mode: %v", fi.Mode())
	}
	// An I/O error: nothing reported renewed, held as it was.
	restore := commands.SetWrapFS(func(f seam.FS) seam.FS {
		return seam.WithHook(f, func(op seam.Op, name string) error {
			if op == seam.OpSyncDir {
				return &fs.PathError{Op: "fsync", Path: name, Err: syscall.EIO}
			}
			return nil
		})
	})
	r = uxMust(t, 4, "", "renew-batch", "--root", root, "--now", "1003", "-i", held)
	restore()
	if again, _ := os.ReadFile(held); string(again) != want || !strings.Contains(r.errOut, "left as it was") {
		t.Errorf("held after an I/O error: %q (stderr %q), want it unchanged %q", again, r.errOut, want)
	}
	// Usage errors change nothing either.
	uxMust(t, 2, "", "renew-batch", "--root", filepath.Join(dir, "no-table"), "-i", held)
	uxMust(t, 2, "", "renew-batch", "--root", root, "-i")
	uxMust(t, 2, "", "renew-batch", "--root", root, "-i", held, held)
	uxMust(t, 2, "", "renew-batch", "--root", root, "-i", "--watch", held)
	uxMust(t, 2, "", "renew-batch", "--root", root, "-i", "--json", held)
	if again, _ := os.ReadFile(held); string(again) != want {
		t.Errorf("held after usage errors: %q", again)
	}
	// Every lease lost: held becomes empty, which is the truth.
	uxMust(t, 0, "", "revoke", "--root", root, "--now", "1004", ids[0], ids[2])
	uxMust(t, 1, "", "renew-batch", "--root", root, "--now", "1005", "-i", held)
	if again, _ := os.ReadFile(held); len(again) != 0 {
		t.Errorf("held after every lease was lost: %q", again)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".held.lease-*"))
	if len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}
}
