//go:build linux

package commands_test

// lease work waits out a table that cannot be written (issue 36): a full
// filesystem and a read-only one, each longer than the TTL, while
// workers run; afterwards every item is done and no worker has ended.
// Before, the first claim on the full or read-only filesystem ended every
// worker with exit 4.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/faultfs"
	"github.com/leasetool/lease/faultfs/faultfstest"
	"github.com/leasetool/lease/internal/testenv"
)

// outageWorker is a lease work process whose stderr goes to a file.
type outageWorker struct {
	cmd    *exec.Cmd
	stderr string
	done   chan struct{}
	code   int
}

// startOutageWorker starts lease with args (the command first) on h's
// table, its stderr in the file name under h's directory; t's cleanup
// kills it.
func startOutageWorker(t *testing.T, h *holdTable, name string, args ...string) *outageWorker {
	t.Helper()
	w := &outageWorker{stderr: filepath.Join(h.dir, name), done: make(chan struct{})}
	w.cmd = h.command(args...)
	f, err := os.Create(w.stderr)
	if err != nil {
		t.Fatal(err)
	}
	w.cmd.Stderr = f
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
	return w
}

func (w *outageWorker) errText() string {
	b, _ := os.ReadFile(w.stderr)
	return string(b)
}

func (w *outageWorker) running() bool {
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

func TestWorkWaitsOutOutages(t *testing.T) {
	t.Parallel()
	type episode struct {
		begin, end func() // the table stops taking writes; takes them again
	}
	for _, how := range []string{"full", "read-only"} {
		t.Run(how, func(t *testing.T) {
			h := newHoldTable(t)
			var ep episode
			switch how {
			case "full":
				mnt := testenv.LoopMount(t, "ext4", 64<<20, "-b", "4096", "-m", "0")
				h.root = filepath.Join(mnt, "table")
				ep.begin = func() { fill(t, mnt) }
				ep.end = func() {
					fillers, _ := filepath.Glob(filepath.Join(mnt, "filler.*"))
					for _, f := range fillers {
						os.Remove(f)
					}
				}
			case "read-only":
				// A read-only filesystem as its writers see it
				// (faultfstest.ReadOnly): mount -o remount,ro is refused
				// while a worker holds a shard's lock file open for writing
				// (EBUSY), and the kernel's own emergency remount cannot be
				// undone while mounted.
				m := faultfstest.Mount(t, faultfs.Options{})
				h.root = filepath.Join(m.Dir, "table")
				ep.begin = func() {
					if err := m.SetRules(faultfstest.ReadOnly()); err != nil {
						t.Fatal(err)
					}
				}
				ep.end = func() {
					if err := m.SetRules(nil); err != nil {
						t.Fatal(err)
					}
					if m.Injected()[faultfs.OpCreate]+m.Injected()[faultfs.OpRename] == 0 {
						t.Error("faultfs failed no create or rename: the episode proved nothing")
					}
				}
			}
			h.must(0, "", "init", "--shards", "4")
			const n = 12
			h.workAdd("outage", n)
			gate := filepath.Join(h.dir, "gate")
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			started := filepath.Join(h.dir, "started")
			// Each run says it started and waits while the gate is there.
			script := `echo "$LEASE_ID" >> "$0"; while [ -e "$1" ]; do sleep 0.05; done`
			const ttl = 2.0
			var ws []*outageWorker
			for i := 0; i < 2; i++ {
				w := startOutageWorker(t, h, fmt.Sprintf("worker%d.err", i), "work", "--json", "--ttl", fmt.Sprint(ttl), "--renew-interval", "0.5", "--grace", "1",
					"--", "sh", "-c", script, started, gate)
				ws = append(ws, w)
			}
			testenv.WaitFor(t, "both workers running an item", holdWait, func() bool {
				b, _ := os.ReadFile(started)
				return len(strings.Fields(string(b))) >= 2
			})
			ep.begin()
			os.Remove(gate) // the runs end: a full table completes them through its reserve, a read-only one cannot

			for i, w := range ws {
				testenv.WaitFor(t, fmt.Sprintf("worker %d saying it waits for the table", i), holdWait, func() bool {
					return strings.Contains(w.errText(), "the table cannot be written") || !w.running()
				})
			}
			// The episode lasts longer than the TTL: every lease a worker
			// held before it ran out.
			time.Sleep(time.Duration(1.5 * ttl * float64(time.Second)))
			for i, w := range ws {
				if !w.running() {
					t.Fatalf("worker %d ended during the episode: exit %d\n%s", i, w.code, w.errText())
				}
			}
			ep.end()
			for i, w := range ws {
				select {
				case <-w.done:
				case <-time.After(holdWait):
					t.Fatalf("worker %d did not end after the episode\n%s", i, w.errText())
				}
				if w.code != 0 || !strings.Contains(w.errText(), "writable again") {
					t.Errorf("worker %d: exit %d\n%s\nwant exit 0 once the queue is empty, the end of the wait said", i, w.code, w.errText())
				}
			}
			sum := h.must(0, "", "status", "--summary").out
			if !regexp.MustCompile(fmt.Sprintf(`(?m)^done +%d `, n)).MatchString(sum) {
				t.Errorf("status --summary after the episode:\n%s\nwant all %d items done", sum, n)
			}
			if full := h.must(0, "", "status", "--json").out; strings.Contains(full, `"attempts":1`) {
				t.Errorf("an attempt was counted for the machine's sake:\n%s", full)
			}
			h.must(0, "", "fsck")
		})
	}
}

// TestRunWaitsOutFinish: lease run --complete whose finish meets a table
// that cannot be written (read-only, a few retries long, within the TTL:
// a read-only table takes no renewal either, and a lease that runs out
// meanwhile is lost, exit 124) waits it out as lease work does, holding
// the lease, and completes the item once the table takes writes: exit 0,
// the item done, no attempt. Before, it exited 125 at once with the item
// unfinished and still leased.
func TestRunWaitsOutFinish(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	m := faultfstest.Mount(t, faultfs.Options{})
	h.root = filepath.Join(m.Dir, "table")
	h.must(0, "", "init", "--shards", "4")
	id := h.workAdd("run-outage", 1)[0]
	gate := filepath.Join(h.dir, "gate")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	started := filepath.Join(h.dir, "started")
	const ttl = 60.0
	w := startOutageWorker(t, h, "run.err", "run", "--complete", "--next", "--ttl", fmt.Sprint(ttl), "--renew-interval", "0.5", "--grace", "1",
		"--", "sh", "-c", `echo "$LEASE_ID" >> "$0"; while [ -e "$1" ]; do sleep 0.05; done`, started, gate)
	testenv.WaitFor(t, "lease run running its item", holdWait, func() bool {
		b, _ := os.ReadFile(started)
		return len(b) > 0
	})
	if err := m.SetRules(faultfstest.ReadOnly()); err != nil {
		t.Fatal(err)
	}
	os.Remove(gate)
	testenv.WaitFor(t, "lease run saying it waits for the table", holdWait, func() bool {
		return strings.Contains(w.errText(), "the table cannot be written") || !w.running()
	})
	time.Sleep(3 * time.Second) // a few tries (1 s, 2 s)
	if !w.running() {
		t.Fatalf("lease run ended during the episode: exit %d\n%s", w.code, w.errText())
	}
	if err := m.SetRules(nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.done:
	case <-time.After(holdWait):
		t.Fatalf("lease run did not end after the episode\n%s", w.errText())
	}
	if w.code != 0 || !strings.Contains(w.errText(), "writable again") {
		t.Errorf("lease run: exit %d\n%s\nwant exit 0, the end of the wait said", w.code, w.errText())
	}
	if rec := h.must(0, "", "status", "--json", string(id)).out; !strings.Contains(rec, `"status":"done"`) || !strings.Contains(rec, `"attempts":0`) {
		t.Errorf("the item after the episode: %s, want done, no attempt", rec)
	}
	h.must(0, "", "fsck")
}
