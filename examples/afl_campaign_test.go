package examples

// The README's campaign ("A campaign in a few lines"), run as written with
// AFL++: its lines make the table and add the 20 seeds and the poison one
// with their content, and its `lease work -- ./fuzz-one.sh` line runs as
// four workers, each fuzzing its items with afl-fuzz -V 2 and adding the
// new inputs AFL finds. Part way, one worker's whole tree is killed with
// kill -9 (frozen first, so that nothing it forks escapes), and another's
// lease work alone (its sentinel and cgroup, or its supervisor, must stop the rest). Then: every item
// is done or failed, once, and only the poison ones failed, after
// max_attempts; every done item's findings are published under its own
// public/ID/ and AFL found the bug; nothing of the killed trees or of any
// afl-fuzz is left running; lease fsck is clean; lease status --summary
// says the same. Nothing here asserts a time: the TTLs are generous and
// every wait is bounded only to turn a hang into a failure.
//
// TestAFLCampaignGo runs the same campaign with Go workers
// (leases.Table.Work) calling afl-fuzz themselves.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/leases"
)

// readmeCampaign returns the lines of the README's "A campaign in a few
// lines": the set-up and the worker.
func readmeCampaign(t *testing.T) (setup []string, worker string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(data), "## A campaign in a few lines\n")
	if !ok {
		t.Fatal("README.md has no section \"A campaign in a few lines\"")
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("the section has no sh block")
	}
	for _, l := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
		if strings.HasPrefix(l, "lease work ") {
			worker = l
			continue
		}
		setup = append(setup, l)
	}
	if worker == "" || len(setup) == 0 || !strings.HasPrefix(setup[0], "export LEASE_ROOT=/scratch/campaign/") {
		t.Fatalf("the campaign's block is not a set-up (export LEASE_ROOT=/scratch/campaign/...) and a lease work line:\n%s", block)
	}
	return setup, worker
}

// aflRecord is one record as lease status --json shows it.
type aflRecord struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Owner      string `json:"owner"`
	Token      int64  `json:"token"`
	Attempts   int64  `json:"attempts"`
	StderrTail string `json:"stderr_tail"`
}

func (a *aflCampaign) records() []aflRecord {
	a.t.Helper()
	var out []aflRecord
	for _, l := range strings.Split(strings.TrimSpace(a.lease("status", "--json")), "\n") {
		var r aflRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			a.t.Fatalf("status --json line %q: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

// aflSummary is lease status --summary --json.
type aflSummary struct {
	Queued, Free, Records, Done, Failed, Leased, Released, Expired, Committing, Attempts int64
}

func (a *aflCampaign) summary() aflSummary {
	a.t.Helper()
	var s aflSummary
	if err := json.Unmarshal([]byte(a.lease("status", "--summary", "--json")), &s); err != nil {
		a.t.Fatal(err)
	}
	return s
}

// tree lists pid and every process below it, from /proc.
func tree(pid int) []int {
	parent := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[pp] = append(parent[pp], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, parent[out[i]]...)
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(string(b), "\x00", " ")
}

func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

// fuzzing reports whether an afl-fuzz runs below pid.
func fuzzing(pid int) bool {
	for _, p := range tree(pid)[1:] {
		if strings.HasPrefix(cmdline(p), "afl-fuzz ") {
			return true
		}
	}
	return false
}

// killTree stops every process of pid's tree with SIGSTOP until no new one
// appears (a stopped process forks nothing), then kills them all with
// SIGKILL: kill -9 of a whole tree, as a job's end kills a node's
// processes. It returns the processes killed.
func killTree(pid int) []int {
	seen := map[int]bool{}
	var all []int
	for {
		fresh := 0
		for _, p := range tree(pid) {
			if !seen[p] {
				seen[p] = true
				all = append(all, p)
				syscall.Kill(p, syscall.SIGSTOP)
				fresh++
			}
		}
		if fresh == 0 {
			break
		}
	}
	for _, p := range all {
		syscall.Kill(p, syscall.SIGKILL)
	}
	return all
}

// waitGone waits (bounded) until none of pids runs; it returns the
// survivors.
func waitGone(pids []int) []string {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var left []string
		for _, p := range pids {
			if running(p) {
				left = append(left, fmt.Sprintf("%d %s", p, cmdline(p)))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAFLCampaign(t *testing.T) {
	a := newAFLCampaign(t)
	setup, workLine := readmeCampaign(t)
	_, poison := aflSeeds(t)

	// The campaign's directory: the README's corpus/ and ./fuzz-one.sh.
	dir := filepath.Join(a.dir, "campaign")
	os.MkdirAll(filepath.Join(dir, "corpus"), 0o755)
	seeds, _ := filepath.Glob("afl/seeds/*")
	for _, s := range seeds {
		data, _ := os.ReadFile(s)
		os.WriteFile(filepath.Join(dir, "corpus", filepath.Base(s)), data, 0o644)
	}
	harness, _ := os.ReadFile("afl/fuzz-one.sh")
	os.WriteFile(filepath.Join(dir, "fuzz-one.sh"), harness, 0o755)
	a.root = filepath.Join(dir, "table")
	var env []string
	for _, kv := range a.env {
		if !strings.HasPrefix(kv, "LEASE_ROOT=") {
			env = append(env, kv)
		}
	}
	a.env = append(env[:len(env):len(env)], "LEASE_ROOT="+a.root)
	// Generous leases on a loaded machine; the killed workers' items are
	// taken over once their 20 s run out.
	workEnv := append(env[:len(env):len(env)], "FUZZ_SECONDS=2", "FUZZ_MAX_ITEMS=32", "LEASE_TTL=20", "LEASE_MAX_ATTEMPTS=2")
	script := func(lines ...string) string {
		return strings.ReplaceAll(strings.Join(lines, "\n"), "/scratch/campaign", dir)
	}
	sh := exec.Command("bash", "-c", script(setup...))
	sh.Dir, sh.Env = dir, workEnv
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the README's set-up:\n%s\n%v\n%s", script(setup...), err, out)
	}

	type worker struct {
		cmd  *exec.Cmd
		out  *bytes.Buffer
		done chan error
	}
	var workers []*worker
	for i := 0; i < 4; i++ {
		// The worker's own line, after the README's export of LEASE_ROOT.
		w := &worker{cmd: exec.Command("bash", "-c", script(setup[0], "exec "+workLine)), out: &bytes.Buffer{}, done: make(chan error, 1)}
		w.cmd.Dir, w.cmd.Env = dir, workEnv
		w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { w.done <- w.cmd.Wait() }()
		t.Cleanup(func() { w.cmd.Process.Kill() })
		workers = append(workers, w)
	}

	// Part way (a few items done, the victims fuzzing): worker 0's whole
	// tree is killed with kill -9, and worker 1's lease work alone.
	deadline := time.Now().Add(10 * time.Minute) // a hang, not a slow machine
	for a.summary().Done < 4 || !fuzzing(workers[0].cmd.Process.Pid) || !fuzzing(workers[1].cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the campaign did not get going:\n%s\n%s", workers[0].out, workers[1].out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	killed := killTree(workers[0].cmd.Process.Pid)
	orphanable := tree(workers[1].cmd.Process.Pid)
	workers[1].cmd.Process.Signal(syscall.SIGKILL)
	t.Logf("killed worker 0's tree (%d processes) and worker 1's lease work (of %d processes)", len(killed), len(orphanable))
	for i, w := range workers {
		select {
		case err := <-w.done:
			if i >= 2 && err != nil {
				t.Errorf("worker %d: %v\n%s", i, err, w.out)
			}
		case <-time.After(time.Until(deadline)):
			t.Fatalf("worker %d did not finish:\n%s", i, w.out)
		}
	}
	if left := waitGone(append(killed, orphanable...)); len(left) > 0 {
		t.Errorf("processes of the killed workers' trees still running: %v", left)
	}
	if left := a.processes(); len(left) > 0 {
		t.Errorf("afl-fuzz or the target still running: %v", left)
	}

	// Every item done or failed, once; only the poison ones failed, after
	// max_attempts, with afl-fuzz's reason.
	poisonIDs := map[string]bool{}
	for _, p := range poison {
		poisonIDs[strings.TrimSpace(a.lease("id", "--content", p))] = true
	}
	seedIDs := map[string]bool{}
	for _, s := range seeds {
		seedIDs[strings.TrimSpace(a.lease("id", "--content", s))] = true
	}
	recs := a.records()
	done, failed, crashes, children := 0, 0, 0, 0
	owners := map[string]bool{}
	for _, r := range recs {
		owners[r.Owner] = true
		if !seedIDs[r.ID] {
			children++ // an input AFL found, added by fuzz-one.sh
		}
		switch {
		case r.Status == "failed":
			failed++
			if !poisonIDs[r.ID] || r.Attempts != 2 || !strings.Contains(r.StderrTail, "does not crash") {
				t.Errorf("failed item %+v: want only the poison seed, after max_attempts 2, with afl-fuzz's reason", r)
			}
			if _, err := os.Stat(filepath.Join(a.root, "public", r.ID)); err == nil {
				t.Errorf("failed item %s has a published result", r.ID)
			}
		case r.Status == "done":
			done++
			if poisonIDs[r.ID] {
				t.Errorf("the poison item is done: %+v", r)
			}
			if _, err := os.Stat(filepath.Join(a.root, "public", r.ID, "fuzzer_stats")); err != nil {
				t.Errorf("item %s: no result published under public/%s/ (%v)", r.ID, r.ID, err)
			}
			found, _ := filepath.Glob(filepath.Join(a.root, "public", r.ID, "crashes", "id:*"))
			crashes += len(found)
		default:
			t.Errorf("item %+v: neither done nor failed", r)
		}
	}
	if failed != len(poisonIDs) || done < 20 {
		t.Errorf("%d done, %d failed; want at least the 20 seeds done and the %d poison ones failed", done, failed, len(poisonIDs))
	}
	if crashes == 0 {
		t.Errorf("no crash published by %d items of a target with a shallow heap overflow", done)
	}
	// The campaign grew: the inputs AFL found were added as items (and,
	// like every item, are done or failed above).
	if children == 0 {
		t.Errorf("%d records, all of them seeds: fuzz-one.sh added none of the new inputs AFL found", len(recs))
	}
	public, _ := os.ReadDir(filepath.Join(a.root, "public"))
	if len(public) != done {
		t.Errorf("%d results in public/, %d items done: one result per item done", len(public), done)
	}
	if len(owners) < 2 {
		t.Errorf("the records name %d owners (%v): the workers of one host should be told apart", len(owners), owners)
	}
	// lease status --summary says the same.
	sum := a.summary()
	if sum.Records != int64(len(recs)) || sum.Done != int64(done) || sum.Failed != int64(failed) || sum.Queued != 0 || sum.Free != 0 ||
		sum.Leased != 0 || sum.Expired != 0 || sum.Released != 0 || sum.Committing != 0 || sum.Attempts < 2 {
		t.Errorf("status --summary %+v; the records say %d done, %d failed of %d", sum, done, failed, len(recs))
	}
	// The killed workers' leftovers are debris: the check is clean.
	if out := a.lease("fsck"); !strings.Contains(out, "errors: none") {
		t.Errorf("lease fsck:\n%s", out)
	}
	t.Logf("%d items done (%d of them added by the campaign), %d failed, %d crashes published, owners %v", done, children, failed, crashes, owners)
}

// TestAFLCampaignGo: the campaign with Go workers: two leases.Table.Work
// loops whose function runs afl-fuzz -V 2 on the item's input and stages
// its findings; the poison seed fails, the rest are done with their
// findings published; nothing is left running; lease fsck is clean.
func TestAFLCampaignGo(t *testing.T) {
	a := newAFLCampaign(t)
	good, poison := aflSeeds(t)
	ctx := context.Background()
	tb, err := leases.Create(a.root, leases.WithOwner("go/worker"))
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if _, err := tb.AddFiles(ctx, append(good, poison...)...); err != nil {
		t.Fatal(err)
	}
	poisonIDs := map[string]bool{}
	for _, s := range poison {
		id, _ := leases.IDOfFile(s)
		poisonIDs[id] = true
	}
	// A seed's afl-fuzz may fail on its own on a machine loaded past its
	// timeouts: that attempt is released and the seed run again (max
	// attempts 2), which is Work doing its job, not a defect. Each such
	// failure is kept, so that every release is accounted for.
	var mu sync.Mutex
	var seedFailures []string
	fuzz := func(ctx context.Context, it leases.Item) (err error) {
		defer func() {
			if err != nil && !poisonIDs[it.ID] {
				mu.Lock()
				seedFailures = append(seedFailures, fmt.Sprintf("%s: %v", it.ID, err))
				mu.Unlock()
			}
		}()
		work, err := os.MkdirTemp("", "afl-go-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(work)
		os.Mkdir(filepath.Join(work, "in"), 0o755)
		data, err := os.ReadFile(it.Input)
		if err != nil {
			return err
		}
		os.WriteFile(filepath.Join(work, "in", "input"), data, 0o644)
		cmd := exec.CommandContext(ctx, "afl-fuzz", "-V", "2", "-i", filepath.Join(work, "in"), "-o", filepath.Join(work, "out"), "--", a.target, "@@")
		cmd.Env = append(os.Environ(), "AFL_SKIP_CPUFREQ=1", "AFL_NO_AFFINITY=1", "AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1", "AFL_NO_UI=1")
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Run(); err != nil {
			tail := log.String()
			if len(tail) > 2000 {
				tail = tail[len(tail)-2000:]
			}
			return fmt.Errorf("afl-fuzz: %w: %s", err, tail)
		}
		found := filepath.Join(work, "out", "default")
		if crashes, _ := filepath.Glob(filepath.Join(found, "crashes", "id:*")); len(crashes) > 0 {
			os.Mkdir(filepath.Join(it.Stage, "crashes"), 0o755)
			for _, c := range crashes {
				b, _ := os.ReadFile(c)
				os.WriteFile(filepath.Join(it.Stage, "crashes", filepath.Base(c)), b, 0o644)
			}
		}
		stats, err := os.ReadFile(filepath.Join(found, "fuzzer_stats"))
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(it.Stage, "fuzzer_stats"), stats, 0o644)
	}
	type end struct {
		stats leases.WorkStats
		err   error
	}
	ends := make(chan end, 2)
	for i := 0; i < 2; i++ {
		go func() {
			st, err := tb.Work(ctx, fuzz, leases.WorkOptions{MaxAttempts: 2, TTL: 30 * time.Second})
			ends <- end{st, err}
		}()
	}
	total := map[string]int{}
	for i := 0; i < 2; i++ {
		select {
		case e := <-ends:
			if e.err != nil {
				t.Errorf("Work: %v", e.err)
			}
			for k, v := range e.stats.Finishes {
				total[k] += v
			}
		case <-time.After(10 * time.Minute): // a hang, not a slow machine
			t.Fatal("the Go workers did not finish")
		}
	}
	if total["done"] != len(good) || total["failed"] != len(poison) || total["released"] != len(poison)+len(seedFailures) {
		t.Errorf("finishes %v: want %d done, the %d poison ones released once and then failed, and %d seeds released after a failure of their own: %q",
			total, len(good), len(poison), len(seedFailures), seedFailures)
	}
	if len(seedFailures) > 0 {
		t.Logf("seeds that failed once and were done on their second attempt: %q", seedFailures)
	}
	crashes := 0
	for _, s := range good {
		id, _ := leases.IDOfFile(s)
		if _, err := os.Stat(filepath.Join(a.root, "public", id, "fuzzer_stats")); err != nil {
			t.Errorf("seed %s: no result published: %v", s, err)
		}
		found, _ := filepath.Glob(filepath.Join(a.root, "public", id, "crashes", "id:*"))
		crashes += len(found)
	}
	if crashes == 0 {
		t.Error("no crash published")
	}
	if _, err := tb.ClaimNext(ctx, 0); !errors.Is(err, leases.ErrEmpty) {
		t.Errorf("after the campaign ClaimNext: %v, want ErrEmpty", err)
	}
	if left := a.processes(); len(left) > 0 {
		t.Errorf("afl-fuzz or the target still running: %v", left)
	}
	if out := a.lease("fsck"); !strings.Contains(out, "errors: none") {
		t.Errorf("lease fsck:\n%s", out)
	}
	t.Logf("%v; %d crashes published", total, crashes)
}
