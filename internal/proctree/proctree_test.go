package proctree_test

// Real process trees: a command that backgrounds `sleep 600` under sh -c,
// one that calls setsid, one that ignores SIGTERM; stopped when the
// command exits, on Terminate and Kill, and when the holder itself is
// killed with SIGKILL. No process of the tree may survive.

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/proctree"
	"github.com/leasetool/lease/internal/testenv"
)

// holderEnv makes the test binary a holder: it starts the command of its
// arguments under a supervisor and waits, so that the test can kill it.
const holderEnv = "PROCTREE_TEST_HOLDER"

// holderCgroupEnv names a cgroup the holder moves itself into first.
const holderCgroupEnv = "PROCTREE_TEST_CGROUP"

func TestMain(m *testing.M) {
	if mode := os.Getenv(holderEnv); mode != "" {
		if dir := os.Getenv(holderCgroupEnv); dir != "" {
			// Into the cgroup the test made, before anything starts.
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
		}
		c := proctree.Command("/bin/sh", "sh", "-c", os.Args[1])
		if mode == "serve" {
			s, err := proctree.StartSupervisor(500 * time.Millisecond)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
			// A first command, then the one the test kills the holder in.
			first := s.Command("/bin/true", "true")
			if err := first.Start(); err != nil || first.Wait() != nil {
				fmt.Fprintln(os.Stderr, "the first command failed")
				os.Exit(3)
			}
			c = s.Command("/bin/sh", "sh", "-c", os.Args[1])
		}
		c.Grace = 500 * time.Millisecond
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Printf("supervisor %d\n", c.Pid())
		if err := c.Wait(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// alive reports whether pid is a running process (not a zombie).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(data), ')')
	return i < 0 || i+2 >= len(data) || data[i+2] != 'Z'
}

// waitGone waits (bounded: a hang is a failure, not a slow machine) until
// none of pids runs, and fails naming those that do.
func waitGone(t *testing.T, what string, pids []int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range left {
				cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
				t.Errorf("%s: process %d survived: %q", what, p, strings.ReplaceAll(string(cmdline), "\x00", " "))
				syscall.Kill(p, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readPids waits for n process IDs, one per line, in file.
func readPids(t *testing.T, file string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(file)
		var pids []int
		for _, f := range strings.Fields(string(data)) {
			if p, err := strconv.Atoi(f); err == nil {
				pids = append(pids, p)
			}
		}
		if len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d process IDs", file, len(pids), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tree is a script that starts a process tree and writes the IDs of its
// processes (its shell, a background sleep, a setsid'd shell and its
// sleep) to pids, then waits.
func tree(pids string) string {
	return fmt.Sprintf(`echo $$ >> %[1]s
sleep 600 & echo $! >> %[1]s
setsid sh -c 'echo $$ >> %[1]s; sleep 600 & echo $! >> %[1]s; wait' &
wait`, pids)
}

func start(t *testing.T, script string) *proctree.Cmd {
	t.Helper()
	c := proctree.Command("/bin/sh", "sh", "-c", script)
	c.Grace = 500 * time.Millisecond
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestExitStatus(t *testing.T) {
	c := start(t, "exit 3")
	var ee *exec.ExitError
	if err := c.Wait(); !errors.As(err, &ee) || !c.WaitStatus().Exited() || c.WaitStatus().ExitStatus() != 3 {
		t.Errorf("exit 3: %v, status %v", err, c.WaitStatus())
	}
	c = start(t, "kill -SEGV $$")
	c.Wait()
	if ws := c.WaitStatus(); !ws.Signaled() || ws.Signal() != syscall.SIGSEGV {
		t.Errorf("killed by SIGSEGV: status %v", ws)
	}
	c = start(t, "true")
	if err := c.Wait(); err != nil || c.WaitStatus().ExitStatus() != 0 {
		t.Errorf("true: %v %v", err, c.WaitStatus())
	}
	c = proctree.Command(filepath.Join(t.TempDir(), "missing"), "missing")
	if err := c.Start(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing program: %v, want fs.ErrNotExist", err)
	}
}

// TestOutputAndEnvironment: CMD gets the standard streams and environment
// given, without the supervisor's marker.
func TestOutputAndEnvironment(t *testing.T) {
	var out strings.Builder
	c := proctree.Command("/bin/sh", "sh", "-c", `echo "$GREETING"; env | grep -c LEASE_PROCTREE || true`)
	c.Env = append(os.Environ(), "GREETING=hello")
	c.Stdout = &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if out.String() != "hello\n0\n" {
		t.Errorf("output %q, want hello and no marker", out.String())
	}
}

// TestLeftoversStopWithCommand: what CMD leaves running (a background
// sleep, a setsid'd shell and its sleep) is stopped when CMD exits. CMD
// exits once both wrote their IDs: after a fixed sleep, a loaded machine
// let it exit first and the setsid'd shell was stopped before it wrote its
// own (CI: "1 of 2 process IDs").
func TestLeftoversStopWithCommand(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	c := start(t, fmt.Sprintf(`sleep 600 & echo $! >> %[1]s
setsid sh -c 'echo $$ >> %[1]s; exec sleep 600' &
while [ "$(wc -l < %[1]s)" -lt 2 ]; do sleep 0.01; done; exit 7`, pids))
	got := readPids(t, pids, 2)
	c.Wait()
	if c.WaitStatus().ExitStatus() != 7 {
		t.Errorf("status %v, want CMD's 7", c.WaitStatus())
	}
	waitGone(t, "after CMD exited", got)
}

func TestTerminate(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	c := start(t, tree(pids))
	got := readPids(t, pids, 4)
	if err := c.Terminate(); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if ws := c.WaitStatus(); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("status %v, want killed by SIGTERM", ws)
	}
	waitGone(t, "after Terminate", got)
}

// TestKill: a tree that ignores SIGTERM goes on Kill.
func TestKill(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	c := proctree.Command("/bin/sh", "sh", "-c", "trap '' TERM; "+tree(pids))
	c.Grace = time.Hour // only Kill may end it
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	got := readPids(t, pids, 4)
	c.Terminate()
	time.Sleep(200 * time.Millisecond)
	if !alive(got[0]) {
		t.Fatal("the shell that ignores SIGTERM died of it")
	}
	c.Kill()
	c.Wait()
	waitGone(t, "after Kill", got)
}

// TestSignalForwarded: Signal reaches CMD's process group.
func TestSignalForwarded(t *testing.T) {
	dir := t.TempDir()
	c := start(t, fmt.Sprintf(`trap 'echo usr1 > %s/got; exit 0' USR1; echo $$ > %s/pid; while :; do sleep 0.05; done`, dir, dir))
	readPids(t, filepath.Join(dir, "pid"), 1)
	if err := c.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Errorf("wait: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "got")); string(data) != "usr1\n" {
		t.Errorf("CMD did not get SIGUSR1: %q", data)
	}
}

// TestHolderKilled: kill -9 of the holder stops the whole tree, the
// supervisor too; a process that ignores SIGTERM gets SIGKILL after the
// grace.
func TestHolderKilled(t *testing.T) {
	for _, c := range []struct{ mode, script string }{{"1", ""}, {"1", "trap '' TERM; "}, {"serve", ""}, {"serve", "trap '' TERM; "}} {
		script := c.script
		pids := filepath.Join(t.TempDir(), "pids")
		h := exec.Command(os.Args[0], script+tree(pids))
		h.Env = append(os.Environ(), holderEnv+"="+c.mode)
		out, err := h.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		h.Stderr = os.Stderr
		if err := h.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		sup, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "supervisor ")))
		got := readPids(t, pids, 4)
		if err := h.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		h.Wait()
		waitGone(t, fmt.Sprintf("after kill -9 of the holder (%s, %q)", c.mode, script), append(got, sup))
	}
}

// TestHolderAndSupervisorKilled: kill -9 of the holder and its
// supervisor at once, where CMD runs in a cgroup of its own: the
// sentinel's cgroup.kill ends even the processes that left CMD's process
// group (setsid, then a double fork: their parents are gone, no
// subreaper of ours is above them), and removes the cgroups it made.
// Before cgroups, the sentinel killed CMD's process group only, and the
// setsid'd sleeps ran on under PID 1.
func TestHolderAndSupervisorKilled(t *testing.T) {
	if !proctree.Cgroups() {
		testenv.Missing(t, "cgroup", "no delegated cgroup v2 with cgroup.kill (Linux 5.14) here")
	}
	for _, mode := range []string{"1", "serve"} {
		dir := t.TempDir()
		pids := filepath.Join(dir, "pids")
		// The marker: a sleep no other process runs, found in /proc.
		marker := fmt.Sprintf("%d.%06d", 900+os.Getpid()%100, time.Now().Nanosecond()/1000)
		script := tree(pids) + fmt.Sprintf(" &\nsetsid sh -c '(sleep %s & echo $! >> %s) &' &\nwait", marker, pids)
		h := exec.Command(os.Args[0], script)
		h.Env = append(os.Environ(), holderEnv+"="+mode)
		out, err := h.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		h.Stderr = os.Stderr
		if err := h.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		sup, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "supervisor ")))
		got := readPids(t, pids, 5)
		syscall.Kill(sup, syscall.SIGKILL)
		h.Process.Kill()
		h.Wait()
		waitGone(t, "after kill -9 of the holder and the supervisor ("+mode+")", append(got, sup))
		waitGone(t, "the double-forked sleep "+marker, withArg(marker))
		// The sentinel removes the cgroups the holder and the supervisor made.
		cgroupsGone(t, filepath.Join(proctree.OwnCgroup(), fmt.Sprintf("lease-%d-*", h.Process.Pid)))
	}
}

// TestCgroupRefusedFallsBack: a holder in a cgroup whose children the
// kernel will not start a process in (below a threaded cgroup, a new
// cgroup is "domain invalid", as the "no internal processes" rule makes
// others refuse) runs CMD without a cgroup, as before cgroups: CMD runs,
// what it left running is stopped, and no cgroup is left behind.
func TestCgroupRefusedFallsBack(t *testing.T) {
	if !proctree.Cgroups() {
		testenv.Missing(t, "cgroup", "no delegated cgroup v2 with cgroup.kill (Linux 5.14) here")
	}
	parent := filepath.Join(proctree.OwnCgroup(), fmt.Sprintf("lease-test-%d", os.Getpid()))
	threaded := filepath.Join(parent, "t")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The holder's sentinel and supervisor, in it too, may still be
		// ending: rmdir is EBUSY until they are gone.
		deadline := time.Now().Add(30 * time.Second)
		for syscall.Rmdir(threaded) == syscall.EBUSY && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if err := syscall.Rmdir(parent); err != nil {
			t.Errorf("rmdir %s: %v", parent, err)
		}
	})
	if err := os.Mkdir(threaded, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(threaded, "cgroup.type"), []byte("threaded"), 0); err != nil {
		testenv.Missing(t, "cgroup", "no threaded cgroups here: "+err.Error())
	}
	for _, mode := range []string{"1", "serve"} {
		dir := t.TempDir()
		left := filepath.Join(dir, "left")
		h := exec.Command(os.Args[0], fmt.Sprintf(`setsid sh -c 'echo $$ >> %[1]s; exec sleep 600' &
sleep 600 & echo $! >> %[1]s
while [ "$(wc -l < %[1]s)" -lt 2 ]; do sleep 0.01; done
echo ran > %[2]s/ran`, left, dir))
		h.Env = append(os.Environ(), holderEnv+"="+mode, holderCgroupEnv+"="+threaded)
		out, err := h.CombinedOutput()
		if err != nil {
			t.Fatalf("the holder in a threaded cgroup (%s): %v\n%s", mode, err, out)
		}
		if data, _ := os.ReadFile(filepath.Join(dir, "ran")); string(data) != "ran\n" {
			t.Errorf("CMD did not run (%s): %q", mode, data)
		}
		waitGone(t, "what CMD left running ("+mode+")", readPids(t, left, 2))
		cgroupsGone(t, filepath.Join(threaded, "lease-*"))
	}
}

// cgroupsGone waits (bounded) until no cgroup matches pattern: the holder,
// or the sentinel once the supervisor is gone, removes those made for it.
func cgroupsGone(t *testing.T, pattern string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, _ := filepath.Glob(pattern)
		if len(m) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("cgroups left: %q", m)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// withArg lists the processes that have arg among their arguments.
func withArg(arg string) []int {
	names, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []int
	for _, name := range names {
		data, _ := os.ReadFile(name)
		for _, a := range strings.Split(string(data), "\x00") {
			if a == arg {
				p, _ := strconv.Atoi(filepath.Base(filepath.Dir(name)))
				out = append(out, p)
			}
		}
	}
	return out
}

// TestSupervisorRunsEach: one Supervisor runs command after command, each
// as a supervisor of its own would: its status, its output (to a writer
// that is not a file: through a pipe) and environment, what it leaves
// running stopped when it exits, Terminate, Kill and Signal; a missing
// program is an error and the next command still runs.
func TestSupervisorRunsEach(t *testing.T) {
	s, err := proctree.StartSupervisor(500 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := func(script string) *proctree.Cmd {
		t.Helper()
		c := s.Command("/bin/sh", "sh", "-c", script)
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Pid() != s.Pid() {
			t.Errorf("command under supervisor %d, want the Supervisor's %d", c.Pid(), s.Pid())
		}
		return c
	}
	var se *proctree.StatusError
	if c := run("exit 3"); !errors.As(c.Wait(), &se) || c.WaitStatus().ExitStatus() != 3 {
		t.Errorf("exit 3: status %v", c.WaitStatus())
	}
	if c := run("kill -SEGV $$"); c.Wait() == nil || !c.WaitStatus().Signaled() || c.WaitStatus().Signal() != syscall.SIGSEGV {
		t.Errorf("killed by SIGSEGV: status %v", c.WaitStatus())
	}
	c := s.Command(filepath.Join(t.TempDir(), "missing"), "missing")
	if err := c.Start(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing program: %v, want fs.ErrNotExist", err)
	}
	var out strings.Builder
	c = s.Command("/bin/sh", "sh", "-c", `echo "$GREETING"; env | grep -c LEASE_PROCTREE || true`)
	c.Env, c.Stdout = append(os.Environ(), "GREETING=hello"), &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil || out.String() != "hello\n0\n" {
		t.Errorf("output %q (%v), want hello and no marker", out.String(), err)
	}

	dir := t.TempDir()
	left := run(fmt.Sprintf(`sleep 600 & echo $! >> %[1]s/left
setsid sh -c 'echo $$ >> %[1]s/left; exec sleep 600' &
while [ "$(wc -l < %[1]s/left)" -lt 2 ]; do sleep 0.01; done; exit 7`, dir))
	got := readPids(t, filepath.Join(dir, "left"), 2)
	left.Wait()
	if left.WaitStatus().ExitStatus() != 7 {
		t.Errorf("status %v, want CMD's 7", left.WaitStatus())
	}
	waitGone(t, "after CMD exited", got)

	term := run(tree(filepath.Join(dir, "term")))
	got = readPids(t, filepath.Join(dir, "term"), 4)
	term.Terminate()
	term.Wait()
	if ws := term.WaitStatus(); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("status %v, want killed by SIGTERM", ws)
	}
	waitGone(t, "after Terminate", got)

	kill := s.Command("/bin/sh", "sh", "-c", "trap '' TERM; "+tree(filepath.Join(dir, "kill")))
	kill.Grace = time.Hour // only Kill may end it
	if err := kill.Start(); err != nil {
		t.Fatal(err)
	}
	got = readPids(t, filepath.Join(dir, "kill"), 4)
	kill.Terminate()
	time.Sleep(200 * time.Millisecond)
	if !alive(got[0]) {
		t.Fatal("the shell that ignores SIGTERM died of it")
	}
	kill.Kill()
	kill.Wait()
	waitGone(t, "after Kill", got)

	sig := run(fmt.Sprintf(`trap 'echo usr1 > %[1]s/got; exit 0' USR1; echo $$ > %[1]s/pid; while :; do sleep 0.05; done`, dir))
	readPids(t, filepath.Join(dir, "pid"), 1)
	sig.Signal(syscall.SIGUSR1)
	if err := sig.Wait(); err != nil {
		t.Errorf("wait: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "got")); string(data) != "usr1\n" {
		t.Errorf("CMD did not get SIGUSR1: %q", data)
	}
	pid := s.Pid()
	s.Close()
	waitGone(t, "the supervisor after Close", []int{pid})
	if err := s.Command("/bin/true", "true").Start(); !errors.Is(err, proctree.ErrSupervisorGone) {
		t.Errorf("a command after Close: %v, want ErrSupervisorGone", err)
	}
}

// TestSupervisorKeepsNoDescriptorPerCommand: a Supervisor runs one command
// after another for the whole life of a worker, so what it holds open must
// not grow with them. It kept the pidfd of every command it had started
// (os.StartProcess's, never released: it reaps with wait4) until a garbage
// collection, so `lease work` ran out of descriptors after 240 items at
// ulimit -n 256.
func TestSupervisorKeepsNoDescriptorPerCommand(t *testing.T) {
	t.Parallel()
	s, err := proctree.StartSupervisor(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	open := func() int {
		t.Helper()
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	run := func() {
		t.Helper()
		c := s.Command("/bin/true", "true")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	run()
	before := open()
	const n = 100
	for i := 0; i < n; i++ {
		run()
	}
	// Between commands the count is what one command leaves, whatever
	// it was: a few for slack (a descriptor the runtime opens on its
	// own), never one a command.
	if after := open(); after > before+5 {
		t.Errorf("the supervisor holds %d descriptors after %d more commands, %d after the first: one kept for each", after, n, before)
	}
}
