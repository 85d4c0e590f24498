package examples

// examples/afl: a real fuzzer campaign. The target (afl/target.c, a parser
// with a heap overflow) is built with AFL++ and AddressSanitizer; its 20
// seeds and a poison one are added with their content and fuzzed by the
// README's campaign (afl_campaign_test.go), and by Go workers through
// leases.Table.Work. And afl-fuzz is stopped, whole, when its lease run is
// killed with -9.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
)

// aflSetup builds lease and the target into a temp dir and makes a table
// with the seeds added with their content; it returns the environment of
// the workers and the paths.
type aflCampaign struct {
	t      *testing.T
	dir    string
	bin    string
	root   string
	target string
	env    []string
}

func newAFLCampaign(t *testing.T) *aflCampaign {
	t.Helper()
	testenv.NeedTools(t, "sh", "go", "afl-fuzz", "afl-cc", "clang")
	if testing.Short() && !testenv.Required("afl") {
		t.Skip("an AFL++ campaign takes a minute or two; skipped with -short")
	}
	dir := t.TempDir()
	a := &aflCampaign{t: t, dir: dir, bin: filepath.Join(dir, "bin"), root: filepath.Join(dir, "table"), target: filepath.Join(dir, "target")}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(a.bin, "lease"), "github.com/leasetool/lease").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if out, err := exec.Command("sh", "afl/build.sh", a.target).CombinedOutput(); err != nil {
		t.Fatalf("afl/build.sh: %v\n%s", err, out)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASE_") && !strings.HasPrefix(kv, "FUZZ_") && !strings.HasPrefix(kv, "PATH=") {
			a.env = append(a.env, kv)
		}
	}
	a.env = append(a.env, "PATH="+a.bin+":"+os.Getenv("PATH"), "LEASE_ROOT="+a.root, "FUZZ_TARGET="+a.target,
		"XDG_CONFIG_HOME="+filepath.Join(dir, "xdg"))
	return a
}

// seeds are the campaign's seeds: 20 good ones and the poison ones.
func aflSeeds(t *testing.T) (good, poison []string) {
	t.Helper()
	all, _ := filepath.Glob("afl/seeds/*")
	for _, s := range all {
		if strings.HasPrefix(filepath.Base(s), "poison") {
			poison = append(poison, s)
		} else {
			good = append(good, s)
		}
	}
	if len(good) != 20 || len(poison) == 0 {
		t.Fatalf("%d seeds and %d poison ones, want 20 and at least 1", len(good), len(poison))
	}
	return good, poison
}

// addSeeds makes the table and adds the good seeds with their content.
func (a *aflCampaign) addSeeds() {
	a.t.Helper()
	a.lease("init")
	seeds, _ := aflSeeds(a.t)
	if out := a.lease(append([]string{"add", "--content"}, seeds...)...); strings.Count(out, "\n") != len(seeds) {
		a.t.Fatalf("add --content of the seeds printed %q", out)
	}
}

func (a *aflCampaign) lease(args ...string) string {
	a.t.Helper()
	cmd := exec.Command(filepath.Join(a.bin, "lease"), args...)
	cmd.Env = a.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		a.t.Fatalf("lease %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// treeOf lists the processes whose command line names the test's target
// (afl-fuzz runs it, and forks it).
func (a *aflCampaign) processes() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(a.target)) {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
		}
		out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
	}
	return out
}

// TestAFLKilledWorker: kill -9 of the lease run that fuzzes an item stops
// afl-fuzz and every process under it.
func TestAFLKilledWorker(t *testing.T) {
	a := newAFLCampaign(t)
	a.addSeeds()
	run := exec.Command(filepath.Join(a.bin, "lease"), "run", "--next", "--complete", "--", "./fuzz-one.sh")
	run.Dir = "afl"
	run.Env = append(a.env, "FUZZ_SECONDS=600")
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(a.processes()) < 2 { // afl-fuzz and the target it forked
		if time.Now().After(deadline) {
			run.Process.Kill()
			t.Fatalf("afl-fuzz did not start:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	running := a.processes()
	run.Process.Signal(syscall.SIGKILL)
	run.Wait()
	deadline = time.Now().Add(time.Minute)
	for len(a.processes()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := a.processes(); len(left) > 0 {
		for _, p := range left {
			pid, _ := strconv.Atoi(strings.Fields(p)[0])
			syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("after kill -9 of lease run, of %v these survived: %v", running, left)
	}
}

// TestAFLFailedAddFailsItem: fuzz-one.sh exits non-zero when the lease
// add of the new inputs it found fails (a full disk, an I/O error), so
// that the item runs again instead of being done with its new inputs lost
// (the README's harness text says a harness must). lease is a stand-in
// here whose status says the campaign is small and whose add fails.
func TestAFLFailedAddFailsItem(t *testing.T) {
	a := newAFLCampaign(t)
	good, _ := aflSeeds(t)
	stub := filepath.Join(a.dir, "stub")
	os.Mkdir(stub, 0o755)
	os.WriteFile(filepath.Join(stub, "lease"), []byte(`#!/bin/sh
case "$1" in
status) echo '{"records":1,"free":0}' ;;
add) cat > /dev/null; echo "lease add: no space left on device" >&2; exit 4 ;;
*) exit 2 ;;
esac
`), 0o755)
	stage := filepath.Join(a.dir, "stage")
	os.Mkdir(stage, 0o755)
	cmd := exec.Command("sh", "afl/fuzz-one.sh")
	var env []string
	for _, kv := range a.env {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PATH="+stub+":"+os.Getenv("PATH"), "LEASE_INPUT="+good[0], "LEASE_STAGE="+stage, "FUZZ_SECONDS=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "lease add of the new inputs failed") {
		t.Fatalf("fuzz-one.sh with a failing lease add: %v\n%s\nwant a failure that says so", err, out)
	}
}
