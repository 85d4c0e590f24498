package examples

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/internal/testenv"
)

// TestMakeInstall runs the README's `make install` with a PREFIX of its
// own: lease lands in PREFIX/bin and runs from PATH, its pages where man
// finds them, the completions where the shells look; and make says how to
// get lease on PATH when it is not.
func TestMakeInstall(t *testing.T) {
	testenv.NeedTools(t, "make", "go", "install", "man")
	if testing.Short() {
		t.Skip("make install builds lease; skipped with -short")
	}
	prefix := filepath.Join(t.TempDir(), "prefix")
	cmd := exec.Command("make", "install", "PREFIX="+prefix)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make install PREFIX=%s: %v\n%s", prefix, err, out)
	}
	if !strings.Contains(string(out), prefix+"/bin is not on PATH: export PATH=") {
		t.Errorf("make install did not say how to put %s/bin on PATH:\n%s", prefix, out)
	}
	run := exec.Command("sh", "-c", "lease version && MANPATH=\"$PREFIX/share/man:\" man -w lease-work lease-format")
	run.Env = append(os.Environ(), "PATH="+filepath.Join(prefix, "bin")+":"+os.Getenv("PATH"), "PREFIX="+prefix)
	got, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "lease ") || !strings.Contains(string(got), prefix+"/share/man/man1/lease-work.1") ||
		!strings.Contains(string(got), prefix+"/share/man/man5/lease-format.5") {
		t.Errorf("lease from PATH and its pages from MANPATH: %v\n%s", err, got)
	}
	for _, f := range []string{"share/bash-completion/completions/lease", "share/zsh/site-functions/_lease", "share/fish/vendor_completions.d/lease.fish"} {
		if _, err := os.Stat(filepath.Join(prefix, f)); err != nil {
			t.Errorf("completion: %v", err)
		}
	}
}
