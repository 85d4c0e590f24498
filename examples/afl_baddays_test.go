//go:build linux

package examples

// TestAFLBadDays: the README's AFL++ campaign through a bad day (issue
// 36). Four `lease work -- ./fuzz-one.sh` workers on a table on a small
// loop-mounted ext4, each with a supervisor process (LEASE_SUPERVISOR=
// process: what a worker has where CMD gets no cgroup; where it gets one,
// lease work supervises CMD itself and TestAFLCampaign kills that); part
// way one worker's supervisor (lease-supervisor) is killed with kill -9 while it runs an item, and later the table's
// filesystem is filled for longer than the TTL while a run still has its
// findings to write, then emptied. Afterwards: every worker ran through
// it and ended with the queue (exit 0); every item is done or failed,
// once, and only the poison seed failed (after max_attempts: real failures
// still count); no attempt was counted for the supervisor's death or for
// the runs the full disk broke (no good item has one); no afl-fuzz or
// anything else of the test's runs is left; lease fsck exits 0. Every wait
// is on a condition, bounded only to turn a hang into a failure; the
// victims are caught with SIGSTOP so that the kill and the fill meet a run
// in progress, not a lucky moment.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
)

// badDaysWorker is one lease work process, its stderr in a file.
type badDaysWorker struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	code int
}

func (w *badDaysWorker) text() string {
	b, _ := os.ReadFile(w.log)
	return string(b)
}

func (w *badDaysWorker) running() bool {
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

// until polls cond every 50 ms until it holds; past bound the test fails
// (a hang, not a slow machine).
func until(t *testing.T, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// environOf is the value of key in pid's environment, "" when unknown.
func environOf(pid int, key string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// procState is the state letter of pid (R, S, T, Z...), 0 when gone.
func procState(pid int) byte {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}

// aflRun is a run of fuzz-one.sh in pid's tree whose afl-fuzz is still
// fuzzing: the shell's pid and the item's LEASE_ID and LEASE_STAGE.
type aflRun struct {
	sh           int
	id, stage    string
	supervisor   int
	aflFuzzAlive bool
}

func runIn(pid int) (aflRun, bool) {
	var r aflRun
	for _, p := range tree(pid)[1:] {
		cl := cmdline(p)
		switch {
		case strings.HasPrefix(cl, "lease-supervisor"):
			r.supervisor = p
		case strings.Contains(cl, "fuzz-one.sh") && procState(p) != 'Z' && r.sh == 0:
			r.sh, r.id, r.stage = p, environOf(p, "LEASE_ID"), environOf(p, "LEASE_STAGE")
		case strings.HasPrefix(cl, "afl-fuzz ") && procState(p) != 'Z':
			r.aflFuzzAlive = true
		}
	}
	return r, r.sh != 0 && r.id != "" && r.stage != "" && r.aflFuzzAlive
}

func TestAFLBadDays(t *testing.T) {
	a := newAFLCampaign(t)
	_, poison := aflSeeds(t)
	mnt := testenv.LoopMount(t, "ext4", 64<<20, "-b", "4096", "-m", "0")
	a.root = filepath.Join(mnt, "table")
	var env []string
	for _, kv := range a.env {
		if !strings.HasPrefix(kv, "LEASE_ROOT=") {
			env = append(env, kv)
		}
	}
	a.env = append(env, "LEASE_ROOT="+a.root)
	// fuzz-one.sh's scratch (mktemp -d) under the test's directory, so
	// that what is left of a run names it; the table alone is on the small
	// filesystem, as /scratch would be.
	scratch := filepath.Join(a.dir, "tmp")
	os.Mkdir(scratch, 0o755)
	const ttl = 6.0
	workEnv := append(a.env[:len(a.env):len(a.env)], "TMPDIR="+scratch, "FUZZ_SECONDS=1", "FUZZ_MAX_ITEMS=28",
		fmt.Sprintf("LEASE_TTL=%g", ttl), "LEASE_RENEW_INTERVAL=1", "LEASE_CLOCK_SKEW=0.5", "LEASE_MAX_ATTEMPTS=2", "LEASE_SUPERVISOR=process")
	a.lease("init")
	seeds, _ := filepath.Glob("afl/seeds/*")
	a.lease(append([]string{"add", "--content"}, seeds...)...)

	var workers []*badDaysWorker
	for i := 0; i < 4; i++ {
		w := &badDaysWorker{log: filepath.Join(a.dir, fmt.Sprintf("worker%d.log", i)), done: make(chan struct{})}
		w.cmd = exec.Command(filepath.Join(a.bin, "lease"), "work", "--", "./fuzz-one.sh")
		w.cmd.Dir, w.cmd.Env = "afl", workEnv
		f, err := os.Create(w.log)
		if err != nil {
			t.Fatal(err)
		}
		w.cmd.Stdout, w.cmd.Stderr = f, f
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		go func() {
			w.cmd.Wait()
			w.code = w.cmd.ProcessState.ExitCode()
			close(w.done)
		}()
		t.Cleanup(func() { w.cmd.Process.Kill(); <-w.done })
		workers = append(workers, w)
	}
	logs := func() string {
		var b strings.Builder
		for i, w := range workers {
			fmt.Fprintf(&b, "--- worker %d (running %v, exit %d):\n%s", i, w.running(), w.code, w.text())
		}
		return b.String()
	}
	poisonIDs := map[string]bool{}
	for _, p := range poison {
		poisonIDs[strings.TrimSpace(a.lease("id", "--content", p))] = true
	}
	// catch finds a worker running a good item whose afl-fuzz still runs,
	// and stops the process stop picks of it (SIGSTOP); ok(run) then
	// says whether the run is still where the test wants it, else the
	// process is let go and another run is tried.
	catch := func(what string, stop func(aflRun) int, ok func(aflRun) bool) (aflRun, int) {
		var got aflRun
		var stopped int
		until(t, what, 3*time.Minute, func() bool {
			for _, w := range workers {
				r, fuzzing := runIn(w.cmd.Process.Pid)
				if !fuzzing || poisonIDs[r.id] || r.supervisor == 0 {
					continue
				}
				p := stop(r)
				syscall.Kill(p, syscall.SIGSTOP)
				until(t, "SIGSTOP taking effect", time.Minute, func() bool { s := procState(p); return s == 'T' || s == 0 || s == 'Z' })
				if procState(p) == 'T' && procState(r.sh) != 0 && procState(r.sh) != 'Z' && ok(r) {
					got, stopped = r, p
					return true
				}
				syscall.Kill(p, syscall.SIGCONT)
			}
			return false
		})
		return got, stopped
	}

	// 1. kill -9 of a worker's supervisor while its item runs (stopped
	// first, so that the item is still running when it dies).
	until(t, "the campaign getting going", 3*time.Minute, func() bool { return a.summary().Done >= 2 })
	victim, sup := catch("a run to kill the supervisor of", func(r aflRun) int { return r.supervisor }, func(aflRun) bool { return true })
	syscall.Kill(sup, syscall.SIGKILL)
	t.Logf("killed supervisor %d running %s", sup, victim.id)
	until(t, "the worker saying its supervisor died", time.Minute, func() bool {
		return strings.Contains(logs(), fmt.Sprintf("supervisor %d of", sup))
	})

	// 2. The table's filesystem full for longer than the TTL, while a run
	// has its findings still to write (its shell stopped until the disk
	// is full, its staging directory still empty).
	mark := make([]int, len(workers))
	for i, w := range workers {
		mark[i] = len(w.text())
	}
	broken, sh := catch("a run to fill the disk under", func(r aflRun) int { return r.sh }, func(r aflRun) bool {
		ents, err := os.ReadDir(r.stage)
		return err == nil && len(ents) == 0
	})
	testenv.Fill(t, mnt)
	filled := time.Now()
	syscall.Kill(sh, syscall.SIGCONT)
	for i, w := range workers {
		until(t, fmt.Sprintf("worker %d waiting for room", i), 3*time.Minute, func() bool {
			return strings.Contains(w.text()[mark[i]:], "the table cannot be written") || !w.running()
		})
	}
	time.Sleep(time.Until(filled.Add(time.Duration(1.5 * ttl * float64(time.Second)))))
	for i, w := range workers {
		if !w.running() {
			t.Fatalf("worker %d ended during the full-disk episode\n%s", i, logs())
		}
	}
	testenv.Unfill(mnt)
	t.Logf("the disk was full for %v; %s's run was broken by it", time.Since(filled).Round(time.Second), broken.id)

	// 3. The campaign goes on to its end.
	for i, w := range workers {
		select {
		case <-w.done:
		case <-time.After(5 * time.Minute):
			t.Fatalf("worker %d did not finish\n%s", i, logs())
		}
		if w.code != 0 || !strings.Contains(w.text()[mark[i]:], "writable again") {
			t.Errorf("worker %d: exit %d; want 0 once the queue is empty, the end of the wait for room said", i, w.code)
		}
	}
	all := logs()
	noRoom := regexp.MustCompile(`([0-9a-f]{64}): .* failed while .* no room.*: released, no attempt counted`).FindAllStringSubmatch(all, -1)
	// The run stopped above most often fails writing its findings, but a
	// file small enough for the few KiB the fill leaves (root's) lets it
	// end well: some run failed for want of room, whichever it was.
	if len(noRoom) == 0 {
		t.Errorf("no line says a run failed for want of room with no attempt counted (the disk full for %gs)", 1.5*ttl)
	}
	if !strings.Contains(all, broken.id+": \"./fuzz-one.sh\" (exit 1) failed while "+a.root+"'s filesystem has no room") {
		t.Logf("%s's run ended well on the full disk (its findings fit what the fill left); %d others failed for want of room", broken.id, len(noRoom))
	}

	recs := a.records()
	byID := map[string]aflRecord{}
	done, failed := 0, 0
	for _, r := range recs {
		byID[r.ID] = r
		switch {
		case r.Status == "failed" && poisonIDs[r.ID] && r.Attempts == 2:
			failed++
		case r.Status == "done" && !poisonIDs[r.ID] && r.Attempts == 0:
			done++
		case r.Status == "done" && !poisonIDs[r.ID]:
			t.Errorf("good item %s done after %d attempts counted (%q): the supervisor's death or the full disk counted one", r.ID, r.Attempts, r.StderrTail)
		default:
			t.Errorf("item %+v: want the good items done with no attempt, the poison failed after max_attempts 2", r)
		}
	}
	for _, id := range []string{victim.id, broken.id} {
		if r, ok := byID[id]; !ok || r.Status != "done" || r.Attempts != 0 {
			t.Errorf("item %s (its supervisor killed, or its run broken by the full disk): %+v; want done, no attempt", id, r)
		}
	}
	if failed != len(poisonIDs) || done < 20 {
		t.Errorf("%d done, %d failed of %d records; want at least the 20 seeds done and the %d poison failed", done, failed, len(recs), len(poisonIDs))
	}
	sum := a.summary()
	if sum.Records != int64(len(recs)) || sum.Done != int64(done) || sum.Failed != int64(failed) || sum.Queued != 0 || sum.Free != 0 ||
		sum.Leased != 0 || sum.Expired != 0 || sum.Released != 0 || sum.Committing != 0 {
		t.Errorf("status --summary %+v; the records say %d done, %d failed of %d", sum, done, failed, len(recs))
	}

	// Nothing of the runs is left: no process names the test's
	// directories (afl-fuzz's -i and -o, the target) or works in them.
	testDirs := filepath.Dir(a.dir)
	var left []string
	until(t, "every process of the runs gone", time.Minute, func() bool {
		left = nil
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			if s := procState(pid); s == 0 || s == 'Z' {
				continue
			}
			cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
			if cl := cmdline(pid); strings.Contains(cl, testDirs) || strings.HasPrefix(cwd, testDirs) {
				left = append(left, fmt.Sprintf("%d %s (in %s)", pid, cl, cwd))
			}
		}
		return len(left) == 0
	})
	if out := a.lease("fsck"); !strings.Contains(out, "errors: none") {
		t.Errorf("lease fsck:\n%s", out)
	}
	t.Logf("%d done, %d failed, %d runs released for want of room; %v", done, failed, len(noRoom), sum)
	if t.Failed() {
		t.Log(all)
	}
}
