package commands_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/internal/testenv"
)

// TestID: lease id makes the IDs a script needs, as sha256sum would, with
// no table: of NAMEs, of stdin lines, of files' contents.
func TestID(t *testing.T) {
	t.Parallel()
	r := uxMust(t, 0, "", "id", "item-1", "a b", "item-1")
	want := string(uxID("item-1")) + "\n" + string(uxID("a b")) + "\n" + string(uxID("item-1")) + "\n"
	if r.out != want {
		t.Errorf("lease id item-1 'a b' item-1: %q, want %q", r.out, want)
	}
	r = uxMust(t, 0, "x\n\ny z\n", "id", "--with-name", "-")
	if want := string(uxID("x")) + " x\n" + string(uxID("y z")) + " y z\n"; r.out != want {
		t.Errorf("lease id --with-name - : %q, want %q", r.out, want)
	}
	if r := uxMust(t, 0, "solo", "id"); r.out != string(uxID("solo"))+"\n" {
		t.Errorf("a last line without its newline: %q", r.out)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "input")
	os.WriteFile(f, []byte("crash\x00bytes\n"), 0o644)
	r = uxMust(t, 0, "", "id", "--content", f)
	if r.out != string(uxID("crash\x00bytes\n"))+"\n" {
		t.Errorf("lease id --content: %q", r.out)
	}
	// Refused, printing nothing: an empty NAME, a missing file (even after
	// a good one), a directory, --content on stdin.
	for _, args := range [][]string{{"id", ""}, {"id", "--content", f, filepath.Join(dir, "nope")}, {"id", "--content", dir}, {"id", "--content", "-"}} {
		if r := uxMust(t, 2, "", args...); r.out != "" || r.errOut == "" {
			t.Errorf("lease %q: stdout %q stderr %q", args, r.out, r.errOut)
		}
	}
	// What lease id prints, lease claim takes.
	root := uxTable(t)
	ids := uxMust(t, 0, "", "id", "w-1", "w-2").out
	if r := uxMust(t, 0, ids, "claim", "--root", root, "-"); len(strings.Split(strings.TrimSpace(r.out), "\n")) != 2 {
		t.Errorf("claim - < (lease id): %q", r.out)
	}
}

// TestIDMatchesSha256sum: the IDs are those sha256sum prints, so that
// other programs make the same ones.
func TestIDMatchesSha256sum(t *testing.T) {
	t.Parallel()
	testenv.NeedTools(t, "sha256sum")
	for _, name := range []string{"demo-input-01", "ünïcode", "with space"} {
		cmd := exec.Command("sha256sum")
		cmd.Stdin = strings.NewReader(name)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := uxMust(t, 0, "", "id", name).out; got != string(out[:64])+"\n" {
			t.Errorf("lease id %q = %q, sha256sum says %q", name, got, out[:64])
		}
	}
}
