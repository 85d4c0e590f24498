package examples

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leasetool/lease/internal/testenv"
)

// TestHarnessModule builds examples/harness, a module of its own that
// reaches this repository by a replace directive in its go.mod, and runs
// it: it queues three inputs by content through the leases package,
// claims, publishes and so completes each one. It also follows README's
// "From Go" recipe on a copy of the harness's code in a fresh module beside
// a "clone" (a link to this repository), and builds that.
func TestHarnessModule(t *testing.T) {
	testenv.NeedTools(t, "go", "bash")
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "harness")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = "harness"
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in examples/harness (its own module, replace ../..): %v\n%s", err, out)
	}
	t.Run("README recipe", func(t *testing.T) { readmeRecipe(t, filepath.Join(dir, "recipe")) })
	mod, err := os.ReadFile(filepath.Join("harness", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^module example\.com/harness$`).Match(mod) ||
		!regexp.MustCompile(`(?m)^replace github\.com/leasetool/lease => \.\./\.\.$`).Match(mod) {
		t.Errorf("examples/harness/go.mod is not an outside module reaching the repository by replace:\n%s", mod)
	}
	root := filepath.Join(dir, "table")
	inputs := []string{"seed-1", "seed-2", "seed-3"}
	out, err := exec.Command(bin, append([]string{root}, inputs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("harness: %v\n%s", err, out)
	}
	got, want := strings.Split(strings.TrimSpace(string(out)), "\n"), []string(nil)
	for _, in := range inputs {
		sum := sha256.Sum256([]byte(in))
		id := hex.EncodeToString(sum[:])
		want = append(want, id+" token 1 published "+id[:12]+".out")
		data, err := os.ReadFile(filepath.Join(root, "public", id[:12]+".out"))
		if err != nil || string(data) != "ran "+id+"\n" {
			t.Errorf("public/%s.out: %q %v", id[:12], data, err)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("harness printed\n%s\nwant (in any order)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// readmeRecipe runs the README's "From Go" block in dir, on a fresh module
// holding examples/harness/main.go, with dir/lease a link to this
// repository for the clone its first line makes.
func readmeRecipe(t *testing.T, dir string) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## From Go\n.*?```sh\n(git clone [^\n]*\n)(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal(`README.md's "From Go" has no sh block starting with git clone`)
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	harness := filepath.Join(dir, "harness")
	if err := os.MkdirAll(harness, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo, filepath.Join(dir, "lease")); err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(filepath.Join("harness", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(harness, "main.go"), code, 0o644); err != nil {
		t.Fatal(err)
	}
	script := "set -e\ncd harness\ngo mod init example.com/harness >/dev/null 2>&1\ncd ..\n" + string(m[2])
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README's recipe after the clone:\n%s\n%v\n%s", m[2], err, out)
	}
}
