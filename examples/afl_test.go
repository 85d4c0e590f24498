package examples

// examples/afl: a real fuzzer campaign. The target (afl/target.c, a parser
// with a heap overflow) is built with AFL++ and AddressSanitizer; its 20
// seeds are added with their content; two of today's one-line workers
// (`while lease run --next --wait --complete -- ./fuzz-one.sh; do :; done`)
// fuzz every item with afl-fuzz -V 2, publish what each finds as
// public/ID/ and add the new inputs AFL found, until the queue is empty.
// And afl-fuzz is stopped, whole, when its lease run is killed with -9.

import (
	"bytes"
	"encoding/json"
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
	if testing.Short() {
		t.Skip("an AFL++ campaign takes about a minute; skipped with -short")
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
	a.lease("init")
	seeds, _ := filepath.Glob("afl/seeds/*")
	if len(seeds) != 20 {
		t.Fatalf("%d seeds, want 20", len(seeds))
	}
	if out := a.lease(append([]string{"add", "--content"}, seeds...)...); strings.Count(out, "\n") != 20 {
		t.Fatalf("add --content of the seeds printed %q", out)
	}
	return a
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

func TestAFLCampaign(t *testing.T) {
	a := newAFLCampaign(t)
	env := append(a.env, "FUZZ_SECONDS=2", "FUZZ_MAX_ITEMS=24")
	var workers []*exec.Cmd
	var outs []*bytes.Buffer
	for i := 0; i < 2; i++ {
		w := exec.Command("sh", "-c", "while lease run --next --wait --complete -- ./fuzz-one.sh; do :; done; echo \"worker ended: $?\"")
		w.Dir = "afl"
		w.Env = append(env, fmt.Sprintf("LEASE_OWNER=test/worker-%d", i))
		var out bytes.Buffer
		w.Stdout, w.Stderr = &out, &out
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		workers, outs = append(workers, w), append(outs, &out)
	}
	for i, w := range workers {
		done := make(chan error, 1)
		go func() { done <- w.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("worker %d: %v\n%s", i, err, outs[i])
			}
		case <-time.After(10 * time.Minute): // a hang, not a slow machine
			w.Process.Kill()
			t.Fatalf("worker %d did not finish:\n%s", i, outs[i])
		}
	}
	var sum struct {
		Queued, Free, Records, Done, Failed, Leased, Released, Expired int64
	}
	if err := json.Unmarshal([]byte(a.lease("status", "--summary", "--json")), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Queued != 0 || sum.Free != 0 || sum.Done != sum.Records || sum.Records < 20 || sum.Failed != 0 {
		t.Errorf("after the campaign: %+v; want every item done and nothing queued\n%s\n%s", sum, outs[0], outs[1])
	}
	// Every item done has its result, under its own ID; AFL found the bug.
	ids := strings.Fields(a.lease("status", "-o", "id"))
	crashes := 0
	for _, id := range ids {
		if _, err := os.Stat(filepath.Join(a.root, "public", id, "fuzzer_stats")); err != nil {
			t.Errorf("item %s: no result published (%v)", id, err)
		}
		found, _ := filepath.Glob(filepath.Join(a.root, "public", id, "crashes", "id:*"))
		crashes += len(found)
	}
	if crashes == 0 {
		t.Errorf("no crash published by %d items of a target with a shallow heap overflow", len(ids))
	}
	t.Logf("%d items done, %d crashes published", len(ids), crashes)
	if left := a.processes(); len(left) > 0 {
		t.Errorf("processes of the campaign left running: %v", left)
	}
	a.lease("fsck")
}

// TestAFLKilledWorker: kill -9 of the lease run that fuzzes an item stops
// afl-fuzz and every process under it.
func TestAFLKilledWorker(t *testing.T) {
	a := newAFLCampaign(t)
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
