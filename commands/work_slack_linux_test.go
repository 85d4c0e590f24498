package commands_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/internal/proctree"
	"github.com/leasetool/lease/internal/slack"
	"github.com/leasetool/lease/internal/testenv"
)

// lease work runs its own threads with the timer slack slack.Worker (it
// executes itself again with it), and CMD with the slack lease work was
// started with, without the variable that carries it; a worker started
// with a slack of slack.Worker or more keeps its own, and so does CMD.
// Both supervisor modes: the process that starts CMD is the worker
// (inline) or its supervisor process, and either runs with the raised
// slack.
func TestWorkTimerSlack(t *testing.T) {
	t.Parallel()
	for _, sup := range []string{"auto", "process"} {
		for _, start := range []int{77_777, 2 * int(slack.Worker)} {
			t.Run(fmt.Sprintf("%s-%d", sup, start), func(t *testing.T) {
				t.Parallel()
				h := newHoldTable(t)
				h.extraEnv = []string{proctree.ModeEnv + "=" + sup}
				ids := h.workAdd("slack", 2)
				// The slack of each thread of CMD's parent: reading another
				// process's needs CAP_SYS_NICE (root).
				script := `out=$LEASE_ROOT/../out-$LEASE_ID
cat /proc/self/timerslack_ns > "$out.cmd"
env > "$out.env"
cat /proc/$PPID/comm > "$out.comm"
tr '\0' ' ' < /proc/$PPID/cmdline > "$out.argv"
for t in /proc/$PPID/task/*; do cat /proc/${t##*/}/timerslack_ns || echo denied; done > "$out.parent" 2>/dev/null`
				cmd := h.command("work", "--max-items", "2", "--", "sh", "-c", script)
				// lease work inherits the slack of the thread that starts it.
				runtime.LockOSThread()
				prev, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
				if err != nil {
					runtime.UnlockOSThread()
					t.Fatal(err)
				}
				if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(start), 0, 0, 0); err != nil {
					runtime.UnlockOSThread()
					t.Fatal(err)
				}
				err = cmd.Start()
				unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(prev), 0, 0, 0)
				runtime.UnlockOSThread()
				if err != nil {
					t.Fatal(err)
				}
				if code := holdExit(t, cmd); code != 0 {
					t.Fatalf("lease work exited %d", code)
				}
				worker := start
				if start < int(slack.Worker) {
					worker = int(slack.Worker)
				}
				denied := false
				for _, id := range ids {
					read := func(ext string) string {
						b, err := os.ReadFile(filepath.Join(h.dir, "out-"+string(id)+"."+ext))
						if err != nil {
							t.Fatal(err)
						}
						return strings.TrimSpace(string(b))
					}
					if got := read("cmd"); got != strconv.Itoa(start) {
						t.Errorf("CMD's timer slack is %s ns, want %d, the slack lease work was started with", got, start)
					}
					if env := read("env"); strings.Contains(env, slack.Env+"=") {
						t.Errorf("CMD's environment has %s (lease work's own):\n%s", slack.Env, env)
					}
					if argv := read("argv"); !strings.HasPrefix(argv, "lease-supervisor") {
						if comm := read("comm"); comm != "lease" {
							t.Errorf("the worker's name is %q (argv %q), want lease's own, as it was started", comm, argv)
						}
					}
					threads := strings.Fields(read("parent"))
					if len(threads) == 0 {
						t.Fatalf("no thread of CMD's parent read")
					}
					for _, s := range threads {
						if s == "denied" {
							denied = true
							break
						}
						if s != strconv.Itoa(worker) {
							t.Errorf("a thread of CMD's parent (%s) has the timer slack %s ns, want %d", read("argv"), s, worker)
						}
					}
				}
				if denied {
					testenv.Missing(t, "root", "the timer slack of another process's threads needs CAP_SYS_NICE")
				}
			})
		}
	}
}
