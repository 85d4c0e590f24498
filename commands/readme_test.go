package commands_test

// The README's shell snippets run as tests, as written, with real lease
// processes: they are what a new user copies, so each must work.
//
// Every ```sh block of README.md runs (TestReadmeSnippets) in bash, in a
// scratch directory with `lease` (this build) first on PATH, and must exit
// 0. The README's /scratch/campaign stands for a directory every node
// sees: it is the one substitution, mapped to the scratch directory. The
// scratch directory holds what the README's prose says the campaign has:
// corpus/ (three seeds), todo (their IDs, as `ls corpus | lease id - >
// todo` makes it), an executable ./fuzz-one.sh (a stand-in harness that
// copies its item's input into LEASE_STAGE), and the table
// /scratch/campaign/table, created, which LEASE_ROOT names (a snippet that
// follows another relies on the export of the first).
//
// A comment on the line right before a block's fence changes that:
//
//	<!-- readme-test: run-by NAME... -->   run by those tests or files instead (a
//	                                       snippet needing MPI, Slurm, a cluster, root, or
//	                                       the build itself); each NAME must exist: a Go
//	                                       test function of the repository or a path
//	<!-- readme-test: needs TOOL... -->     run only where the tools are (LEASE_TEST_REQUIRE=all:
//	                                       a failure where they are not)
//	<!-- readme-test: exit N -->            its expected exit status instead of 0
//
// TestReadmeWorker also runs "A worker in four lines" line by line,
// checking what each line leaves in held and in the table;
// examples/afl_campaign_test.go runs "A campaign in a few lines" with
// AFL++; TestReadmeStart checks the two commands the README starts with
// against the Makefile, scripts/check.sh and .ci/run; readme_cluster_test.go runs the
// cluster workers under mpirun, srun and sbatch.

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
)

// readmeBlock is one ```sh block of README.md.
type readmeBlock struct {
	line    int    // of its fence
	section string // the heading above it
	code    string
	marker  map[string][]string
}

var readmeMarker = regexp.MustCompile(`^<!-- readme-test: (.*) -->$`)

// readmeBlocks parses the ```sh blocks of README.md with their markers.
func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out []readmeBlock
	section := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "#") {
			section = strings.TrimSpace(strings.TrimLeft(l, "#"))
		}
		if l != "```sh" {
			continue
		}
		b := readmeBlock{line: i + 1, section: section, marker: map[string][]string{}}
		if i > 0 {
			if m := readmeMarker.FindStringSubmatch(lines[i-1]); m != nil {
				for _, part := range strings.Split(m[1], ";") {
					f := strings.Fields(part)
					if len(f) == 0 {
						continue
					}
					switch f[0] {
					case "run-by", "needs", "exit":
						b.marker[f[0]] = f[1:]
					default:
						t.Fatalf("README.md:%d: unknown readme-test marker %q", i, f[0])
					}
				}
			}
		}
		var code []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			code = append(code, lines[i])
		}
		b.code = strings.Join(code, "\n") + "\n"
		out = append(out, b)
	}
	return out
}

// readmeTests lists the names of the repository's Go test functions.
func readmeTests(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	re := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, _ := os.ReadFile(p)
		for _, m := range re.FindAllSubmatch(data, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	return names
}

// readmeKit makes the scratch directory of a snippet (see the top of this
// file) and returns it and the environment to run the snippet in.
func readmeKit(t *testing.T) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, ".bin")
	os.Mkdir(bin, 0o755)
	if err := os.Symlink(procBin, filepath.Join(bin, "lease")); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, ".xdg"),
		"LEASE_ROOT=" + filepath.Join(dir, "table"), "LANG=C"}
	os.Mkdir(filepath.Join(dir, "corpus"), 0o755)
	for i := 1; i <= 3; i++ {
		os.WriteFile(filepath.Join(dir, "corpus", fmt.Sprintf("seed-%04d", i)), []byte(fmt.Sprintf("seed %d\n", i)), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "fuzz-one.sh"), []byte("#!/bin/sh\n# A stand-in harness: the item's input is its result.\n"+
		"if [ -n \"$LEASE_INPUT\" ]; then cp \"$LEASE_INPUT\" \"$LEASE_STAGE/input\"; fi\n"), 0o755)
	setup := exec.Command("bash", "-c", "lease init > /dev/null && ls corpus | lease id - > todo")
	setup.Dir, setup.Env = dir, env
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("the snippets' scratch directory: %v\n%s", err, out)
	}
	return dir, env
}

// TestReadmeSnippets runs every ```sh block of README.md (see the top of
// this file).
func TestReadmeSnippets(t *testing.T) {
	t.Parallel()
	testenv.NeedTools(t, "bash", "grep", "cut", "tail")
	blocks := readmeBlocks(t)
	if len(blocks) < 5 {
		t.Fatalf("README.md has %d sh blocks", len(blocks))
	}
	tests := readmeTests(t)
	for _, b := range blocks {
		name := fmt.Sprintf("line%d-%s", b.line, strings.ReplaceAll(b.section, " ", "_"))
		t.Run(name, func(t *testing.T) {
			if by := b.marker["run-by"]; by != nil {
				for _, n := range by {
					_, err := os.Stat(filepath.Join("..", n))
					if !tests[n] && err != nil {
						t.Errorf("README.md:%d: run-by %s: no test function and no file of that name", b.line, n)
					}
				}
				t.Logf("README.md:%d is run by %s", b.line, strings.Join(by, ", "))
				return
			}
			if tools := b.marker["needs"]; tools != nil {
				testenv.NeedTools(t, tools...)
			}
			want := 0
			if e := b.marker["exit"]; len(e) == 1 {
				want, _ = strconv.Atoi(e[0])
			}
			dir, env := readmeKit(t)
			cmd := exec.Command("bash", "-c", strings.ReplaceAll(b.code, "/scratch/campaign", dir))
			cmd.Dir, cmd.Env = dir, env
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Minute): // a hang, not a slow machine
				cmd.Process.Kill()
				<-done
				t.Fatalf("README.md:%d did not finish:\n%s\n%s", b.line, b.code, out)
			}
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != want {
				t.Errorf("README.md:%d (%s) exited %d, want %d:\n%s--- output:\n%s", b.line, b.section, code, want, b.code, out)
			}
		})
	}
}

// TestReadmeStart: the README starts with exactly the two commands a new
// user runs: `make demo` (the demo campaign, examples/demo.sh, which TestDemo
// runs) and `make check` (every test); CI's .ci/run runs that same command
// and no other make target; the Makefile's check target runs, through
// scripts/check.sh, the test targets, among them every target named like
// test* in the Makefile but those it names as runs on demand, and the README
// names each of them.
func TestReadmeStart(t *testing.T) {
	t.Parallel()
	blocks := readmeBlocks(t)
	if len(blocks) == 0 {
		t.Fatal("README.md has no sh block")
	}
	first := blocks[0]
	data, _ := os.ReadFile(filepath.Join("..", "README.md"))
	if before, _, _ := strings.Cut(string(data), "```sh"); strings.Count(before, "\n") > 4 {
		t.Errorf("README.md's first sh block starts at line %d: the commands come first", first.line)
	}
	var cmds []string
	for _, l := range strings.Split(strings.TrimSpace(first.code), "\n") {
		cmd, _, _ := strings.Cut(l, "#")
		cmds = append(cmds, strings.TrimSpace(cmd))
	}
	if !slices.Equal(cmds, []string{"make demo", "make check"}) {
		t.Fatalf("README.md's first block runs %q, want the demo and all the tests: make demo, make check", cmds)
	}
	makefile, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^demo:.*\n\t\./examples/demo\.sh$`).Match(makefile) {
		t.Error("the Makefile's demo target does not run ./examples/demo.sh (the demo TestDemo runs)")
	}
	if !regexp.MustCompile(`(?m)^check:.*\n\t.*scripts/check\.sh$`).Match(makefile) {
		t.Error("the Makefile's check target does not run scripts/check.sh")
	}
	ci, err := os.ReadFile(filepath.Join("..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, l := range strings.Split(string(ci), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "make" {
			runs = append(runs, strings.TrimSpace(l))
		}
	}
	if !slices.Equal(runs, []string{"make check"}) {
		t.Errorf(".ci/run runs %q, want the README's make check and no other target", runs)
	}
	// scripts/check.sh names its targets on its lane lines: lane NAME TARGET...
	script, err := os.ReadFile(filepath.Join("..", "scripts", "check.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var lanes []string
	for _, l := range strings.Split(string(script), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "lane" {
			for _, target := range f[2:] {
				if target != "&" {
					lanes = append(lanes, target)
				}
			}
		}
	}
	for _, target := range lanes {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(makefile) {
			t.Errorf("scripts/check.sh runs make %s: the Makefile has no target %s", target, target)
		}
		if !strings.Contains(string(data), "`make "+target+"`") {
			t.Errorf("scripts/check.sh runs make %s, which README.md does not name", target)
		}
	}
	// Every test target of the Makefile is in make check.
	for _, m := range regexp.MustCompile(`(?m)^(test[a-z-]*):`).FindAllSubmatch(makefile, -1) {
		target := string(m[1])
		if !slices.Contains(lanes, target) {
			t.Errorf("the Makefile's %s is not run by make check (scripts/check.sh's lanes: %q)", target, lanes)
		}
	}
}

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
	t.Parallel()
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

// TestReadmeFailedItems runs the block of "When items fail" line by line
// in a scratch directory (readmeKit), checking what each line leaves in
// the table: every item failed after the broken harness, every one back
// after lease retry, every one done, with its result, after the last line.
func TestReadmeFailedItems(t *testing.T) {
	t.Parallel()
	testenv.NeedTools(t, "bash", "grep")
	var lines []string
	for _, b := range readmeBlocks(t) {
		if b.section == "When items fail" {
			lines = strings.Split(strings.TrimSuffix(b.code, "\n"), "\n")
			break
		}
	}
	if len(lines) != 5 {
		t.Fatalf("the block of \"When items fail\" has %d lines, want 5: add, the broken harness, status, retry, work", len(lines))
	}
	dir, env := readmeKit(t)
	run := func(script string) string {
		t.Helper()
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return string(out)
	}
	counts := func() string { return run("lease status --summary --json") }
	want := func(after string, fields ...string) {
		t.Helper()
		c := counts()
		for _, f := range fields {
			if !strings.Contains(c, f) {
				t.Errorf("after %q: status --summary %s, want %s", after, c, f)
			}
		}
	}
	run(lines[0])
	run(lines[1])
	want(lines[1], `"failed":3`, `"done":0`)
	if out := run(lines[2]); !regexp.MustCompile(`(?m)^failed +3 `).MatchString(out) {
		t.Errorf("%s printed %q, want the count of failed items (3)", lines[2], out)
	}
	run(lines[3])
	want(lines[3], `"failed":0`, `"released":3`)
	run(lines[4])
	want(lines[4], `"failed":0`, `"done":3`)
	if res, _ := filepath.Glob(filepath.Join(dir, "table", "public", "*", "input")); len(res) != 3 {
		t.Errorf("after %q: %d results published, want 3", lines[4], len(res))
	}
}
