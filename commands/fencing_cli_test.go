package commands_test

// The holes of issue "Fencing without holes" in what the commands create
// and say (holes 7 and 8, and the error texts): only init creates a table,
// claim --first --json and renew-batch --watch report what they did, and
// error texts name the record, the operation and the cause. The helpers
// are in fencing_test.go.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/leasefmt"
)

// Hole 7: only lease init creates a table: every other command refuses a
// root without TABLE and creates nothing there.
func TestFenceNoTableNoCreate(t *testing.T) {
	t.Parallel()
	id := string(coreID("nowhere"))
	for _, tc := range []struct {
		code  int
		stdin string
		args  []string
	}{
		{2, "", []string{"claim", id}},
		{2, id + " 1\n", []string{"renew-batch"}},
		{2, id + " 1\n", []string{"release"}},
		{2, id + " 1\n", []string{"complete"}},
		{2, id + " 1\n", []string{"verify"}},
		{2, "", []string{"revoke", id}},
		{2, "", []string{"group-claim", id}},
		{2, "", []string{"status"}},
		{125, "", []string{"run", id, "--", "true"}},
	} {
		root := filepath.Join(t.TempDir(), "no", "such", "table")
		r := coreLease(t, tc.stdin, append([]string{tc.args[0], "--root", root}, tc.args[1:]...)...)
		if r.code != tc.code || !strings.Contains(r.errOut, "no lease table at "+root) || !strings.Contains(r.errOut, "lease init") {
			t.Errorf("%v on a missing root: %s\nwant exit %d naming the root and lease init", tc.args, r, tc.code)
		}
		if _, err := os.Lstat(filepath.Dir(filepath.Dir(root))); err == nil {
			t.Errorf("%v created %s", tc.args, filepath.Dir(filepath.Dir(root)))
		}
	}
}

// Hole 8: claim --first --json says the exit status the process returns;
// renew-batch --watch stopped early still prints its held set; and one it
// finished meanwhile is not printed as held.
func TestFenceSmall(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("small", 3)
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "other", string(ids[0]))
	r := coreMust(t, 0, coreJoin(ids, ""), "claim", "--root", root, "--first", "1", "--json", "-")
	var doc struct {
		Exit int `json:"exit"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil || doc.Exit != 0 {
		t.Errorf("claim --first --json after a passed-over candidate: exit field %d (%v), process exit 0:\n%s", doc.Exit, err, r.out)
	}
	r = coreMust(t, 0, coreJoin(ids, ""), "claim", "--root", root, "--first", "1", "-")
	if r.errOut != "" {
		t.Errorf("claim --first printed passed-over candidates: %q", r.errOut)
	}
}

func TestFenceWatchStopsCleanly(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	ids := []leasefmt.ID{holdID("watch-a"), holdID("watch-b")}
	lines := h.claim("keeper", "60", ids...)
	// SIGTERM while the input is still being read (stdin held open): the
	// first round still runs and the held set is printed, exit 0.
	cmd := h.command("renew-batch", "--watch", "--interval", "5")
	stdin, _ := cmd.StdinPipe()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitReadingStdin(t, cmd.Process.Pid) // past its set-up: its signals are caught
	cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(100 * time.Millisecond)
	io.WriteString(stdin, lines)
	stdin.Close()
	if code := holdExit(t, cmd); code != 0 || out.String() != lines {
		t.Fatalf("--watch stopped by an early SIGTERM: exit %d, stdout %q; want 0 and %q\nstderr:\n%s", code, out.String(), lines, errb.String())
	}
	// A lease completed while the watch runs is not printed as held.
	held := filepath.Join(h.dir, "held")
	os.WriteFile(held, []byte(lines), 0o644)
	p := &watchProc{holdProc: h.start("renew-batch", "--watch", "-v", "--interval", "5", held)}
	p.errLines, p.errOut = make(chan string, 100), &strings.Builder{}
	// Completed between the first round and the next (5 s later).
	testenv.WaitFor(t, "the watch's first round", holdWait, func() bool {
		return strings.Contains(p.errw.String(), "lease renew-batch: round 1:")
	})
	h.must(0, string(ids[0])+" 1\n", "complete")
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("--watch after SIGTERM: exit %d\n%s", code, p.errOut)
	}
	if want := string(ids[1]) + " 1\n"; p.out.String() != want {
		t.Fatalf("--watch printed %q after one lease was completed, want only %q\nstderr:\n%s", p.out.String(), want, p.holdProc.errOut)
	}
	if !strings.Contains(p.holdProc.errOut.String(), "done "+string(ids[0])) {
		t.Errorf("the completed lease was not reported lost:\n%s", p.holdProc.errOut)
	}
}

// waitReadingStdin waits until a thread of process pid is blocked in
// read(2) of its standard input (/proc/PID/task/TID/syscall): a command
// that reads its input after its set-up has then passed it, however loaded
// the machine (a fixed sleep signalled some before their handler was in).
func waitReadingStdin(t *testing.T, pid int) {
	t.Helper()
	want := fmt.Sprintf("%d 0x0 ", syscall.SYS_READ)
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if threadInSyscall(t, pid, want) {
			return
		}
	}
	t.Fatalf("process %d never read its standard input", pid)
}

// threadInSyscall reports whether a thread of pid is in the system call
// that /proc/PID/task/TID/syscall starts with prefix ("NUMBER ARG0 ...").
func threadInSyscall(t *testing.T, pid int, prefix string) bool {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/syscall", pid, task.Name()))
		if strings.HasPrefix(string(b), prefix) {
			return true
		}
	}
	return false
}

// Error texts name the record, the operation and the cause: a read-only
// or full filesystem is said so, a temp file that is gone is not named,
// and the records after a batch's first failure say why they were not
// attempted.
func TestFenceErrorTexts(t *testing.T) {
	root := coreRoot(t)
	ids := coreIDs("errtext", 3)
	coreMust(t, 0, "", "claim", "--root", root, "--ttl", "100", string(ids[0]), string(ids[1]), string(ids[2]))
	inject := func(op seam.Op, errno syscall.Errno, once bool) func() {
		fired := false
		defer t.Cleanup(func() { commands.SetWrapFS(nil) }) // a failed check must not leave it for later tests
		return commands.SetWrapFS(func(f seam.FS) seam.FS {
			return seam.WithHook(f, func(o seam.Op, name string) error {
				if o == op && !(once && fired) {
					fired = true
					return &fs.PathError{Op: string(o), Path: filepath.Join(root, name), Err: errno}
				}
				return nil
			})
		})
	}
	restore := inject(seam.OpLock, syscall.EROFS, false)
	r := coreMust(t, 4, string(ids[0])+" 1\n", "renew-batch", "--root", root, "--writers", "1")
	restore()
	if !strings.Contains(r.errOut, "cannot lock the record") || !strings.Contains(r.errOut, "read-only") ||
		!strings.Contains(r.errOut, "nothing was written") || !strings.Contains(r.errOut, corePath(root, ids[0])) {
		t.Errorf("read-only filesystem: %s", r.errOut)
	}
	// A full filesystem: the reserve takes the renewal (fulldisk_test.go);
	// a table without one says the filesystem is full.
	restore = inject(seam.OpWrite, syscall.ENOSPC, false)
	coreMust(t, 0, string(ids[0])+" 1\n", "renew-batch", "--root", root, "--writers", "1")
	if err := os.RemoveAll(filepath.Join(root, "reserve")); err != nil {
		t.Fatal(err)
	}
	r = coreMust(t, 4, string(ids[0])+" 1\n", "renew-batch", "--root", root, "--writers", "1")
	restore()
	if !strings.Contains(r.errOut, "no space left") || strings.Contains(r.errOut, ".tmp.") || !strings.Contains(r.errOut, "no reserve") {
		t.Errorf("full filesystem: %s", r.errOut)
	}
	restore = inject(seam.OpCreate, syscall.EIO, true)
	r = coreMust(t, 4, coreJoin(ids, " 1"), "renew-batch", "--root", root, "--writers", "1")
	restore()
	if n := strings.Count(r.errOut, "not attempted: the batch stopped at an I/O error of "); n != 2 {
		t.Errorf("records after the first failure: %d say why they were not attempted:\n%s", n, r.errOut)
	}
	if strings.Count(r.errOut, "input/output error") != 3 {
		t.Errorf("not every line names the cause:\n%s", r.errOut)
	}
}
