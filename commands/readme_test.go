package commands_test

// The README's first example, "A worker in four lines", run as written,
// with real lease processes: it must be right, since it is what a new
// user copies.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/internal/testenv"
)

// readmeWorker returns the lines of the README's "A worker in four lines".
func readmeWorker(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(data), "## A worker in four lines\n")
	if !ok {
		t.Fatal("README.md has no section \"A worker in four lines\"")
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("the section has no sh block")
	}
	lines := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("the worker has %d lines, not four:\n%s", len(lines), block)
	}
	return lines
}

func TestReadmeWorker(t *testing.T) {
	testenv.NeedTools(t, "bash", "grep")
	lines := readmeWorker(t)
	const readmeRoot = "/scratch/campaign/table"
	if !strings.HasPrefix(lines[0], "export LEASE_ROOT="+readmeRoot) {
		t.Fatalf("the first line does not set LEASE_ROOT: %q", lines[0])
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "table")
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	os.Symlink(procBin, filepath.Join(bin, "lease"))
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "xdg"), "LEASE_OWNER=worker-1"}
	// step runs the first line (with the test's table) and then line n of
	// the worker in bash, in dir, with id set; it returns the exit status.
	step := func(n int, id string) int {
		t.Helper()
		script := strings.Replace(lines[0], readmeRoot, root, 1) + "\n" + lines[n]
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(env, "id="+id)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		t.Logf("line %d: exit %d\n%s", n+1, code, out)
		return code
	}
	lease := func(args ...string) string {
		t.Helper()
		if args[0] != "id" {
			args = append([]string{"--root", root}, args...)
		}
		cmd := exec.Command(procBin, args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("lease %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	lease("init")
	ids := strings.Fields(lease("id", "input-1", "input-2", "input-3"))
	os.WriteFile(filepath.Join(dir, "todo"), []byte(strings.Join(ids, "\n")+"\n"), 0o644)
	held := func() string { b, _ := os.ReadFile(filepath.Join(dir, "held")); return string(b) }

	// Two items taken, one after the other: the first two of todo.
	if step(1, "") != 0 || step(1, "") != 0 {
		t.Fatal("claim --first 1 failed")
	}
	if h := held(); !strings.HasPrefix(h, ids[0]+" 1\n"+ids[1]+" 1\n") || strings.Count(h, "\n") != 2 {
		t.Fatalf("held after two claims: %q", h)
	}
	// The second lease is lost (an operator revokes it): the renewal says
	// so (exit 1) and held keeps only what is still held.
	lease("revoke", ids[1])
	if code := step(2, ""); code != 1 {
		t.Errorf("renewal with a lost lease: exit %d, want 1", code)
	}
	if h := held(); h != ids[0]+" 1\n" {
		t.Fatalf("held after the renewal: %q, want only %s", h, ids[0])
	}
	if step(2, "") != 0 {
		t.Error("a renewal with nothing lost failed")
	}
	// The worker finishes the first item: it is done; nothing else is.
	if step(3, ids[0]) != 0 {
		t.Fatal("complete failed")
	}
	st := lease("status", "-o", "wide", "--no-headers")
	for i, want := range []string{"done", "released", ""} {
		row := ""
		for _, l := range strings.Split(st, "\n") {
			if strings.HasPrefix(l, ids[i]) {
				row = l
			}
		}
		if f := strings.Fields(row); want == "" && row != "" || want != "" && (len(f) < 2 || f[1] != want) {
			t.Errorf("item %d: %q, want status %q", i+1, row, want)
		}
	}
	// The next renewal drops the done item from held.
	step(2, "")
	if h := held(); h != "" {
		t.Errorf("held after the done item's renewal: %q", h)
	}
}
