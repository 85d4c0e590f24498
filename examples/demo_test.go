// Package examples holds the demo campaign, a fuzz-wrapper script and an
// mpirun job script; this test runs the demo as the README tells a new user.
package examples

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
)

// TestDemo runs ./examples/demo.sh from the repository root on a fresh table
// in a temp dir and checks that it ends with its summary and exit 0.
func TestDemo(t *testing.T) {
	testenv.NeedTools(t, "bash", "go", "sha256sum")
	if testing.Short() {
		t.Skip("the demo takes about 10 s; skipped with -short")
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", "examples/demo.sh")
	cmd.Dir = ".."
	env := []string{"DEMO_ROOT=" + filepath.Join(dir, "demo-table"), "DEMO_BIN_DIR=" + filepath.Join(dir, "bin")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASE_") && !strings.HasPrefix(kv, "DEMO_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute): // a hang, not a slow machine
		cmd.Process.Kill()
		<-done
		t.Fatalf("demo.sh did not finish:\n%s", out)
	}
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		"== 3 workers: lease work --owner worker-N", // the long-lived worker, not lease run loops
		"== summary",
		"items done:  12 of 12 (6 seeds, 6 children found)",
		"refusals:    1 stale publish refused",
		"late publish with token 1 refused (exit 1), nothing moved",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`reclaimed:   (\d+) `).FindStringSubmatch(text); m == nil || m[1] == "0" {
		t.Errorf("the dead holder's item was not reclaimed")
	}
	if !strings.HasSuffix(text, "demo: OK\n") {
		t.Errorf("demo output does not end with its verdict")
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", text)
	}
	if _, err := os.Stat(filepath.Join(dir, "demo-table", "public")); err != nil {
		t.Errorf("the demo table is not where DEMO_ROOT said: %v", err)
	}
	// The demo builds lease as make does: with MPI support when Open MPI
	// is installed, so that it never replaces a bin/lease mpirun needs.
	v, err := exec.Command(filepath.Join(dir, "bin", "lease"), "version").Output()
	if err != nil {
		t.Fatalf("lease version: %v", err)
	}
	withMPI := exec.Command("pkg-config", "--exists", "ompi").Run() == nil
	if got := strings.Contains(string(v), "with MPI support"); got != withMPI {
		t.Errorf("the demo's lease says %q; pkg-config finds Open MPI: %v", v, withMPI)
	}
}
