package commands_test

// lease run as real processes: the test binary re-runs itself as lease
// (holdAsLease), so that signals, process groups and exit statuses are the
// kernel's, and a command run by lease run can call lease from PATH.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/leasefmt"
)

// holdAsLease makes the test binary act as lease when run with it set: the
// lease processes of these tests are this binary, found on PATH as "lease".
const holdAsLease = "LEASE_TEST_RUN_AS_LEASE"

func init() {
	if os.Getenv(holdAsLease) == "1" {
		installKillPoint()
		os.Exit(commands.Main())
	}
}

// holdWait bounds every wait for a lease process, so that a broken
// implementation fails the test instead of hanging it. It is not a timing
// assertion: everything waited for happens within a few seconds (a minute
// was too short for a campaign of TestStatusWatchCampaign at load 40).
const holdWait = 3 * time.Minute

// holdTable is one table and a PATH on which "lease" is this test binary.
type holdTable struct {
	t    *testing.T
	dir  string // scratch directory, the processes' working directory
	root string
	bin  string // directory holding the "lease" link
	// extraEnv is added to every lease process's environment.
	extraEnv []string
}

func newHoldTable(t *testing.T) *holdTable {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	h := &holdTable{t: t, dir: dir, root: filepath.Join(dir, "table"), bin: filepath.Join(dir, "bin")}
	if err := os.Mkdir(h.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(h.bin, "lease")); err != nil {
		t.Fatal(err)
	}
	h.must(0, "", "init")
	return h
}

// env is the environment of a lease process: no configuration from the
// developer's environment, the table in LEASE_ROOT, and a clock_skew of
// 0.1 s (one host, one clock), so that leases of a second or two work.
func (h *holdTable) env() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "LEASE_") || k == "XDG_CONFIG_HOME" || k == "PATH" {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, holdAsLease+"=1", "LEASE_ROOT="+h.root, "LEASE_CLOCK_SKEW=0.1", "XDG_CONFIG_HOME="+filepath.Join(h.dir, "xdg"),
		"PATH="+h.bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return append(out, h.extraEnv...)
}

func (h *holdTable) command(args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(h.bin, "lease"), args...)
	cmd.Env, cmd.Dir = h.env(), h.dir
	return cmd
}

// holdResult is what one lease process did.
type holdResult struct {
	args        []string
	code        int
	out, errOut string
}

func (r holdResult) String() string {
	return fmt.Sprintf("lease %s: exit %d\nstdout:\n%sstderr:\n%s", strings.Join(r.args, " "), r.code, r.out, r.errOut)
}

// lease runs lease to the end with stdin.
func (h *holdTable) lease(stdin string, args ...string) holdResult {
	h.t.Helper()
	cmd := h.command(args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errb
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	return holdResult{args, holdExit(h.t, cmd), out.String(), errb.String()}
}

func (h *holdTable) must(want int, stdin string, args ...string) holdResult {
	h.t.Helper()
	r := h.lease(stdin, args...)
	if r.code != want {
		h.t.Fatalf("%s\nwant exit %d", r, want)
	}
	return r
}

// holdExit waits for cmd (at most holdWait) and returns its exit status,
// 128+n when a signal killed it.
func holdExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(holdWait):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not exit within %v", strings.Join(cmd.Args, " "), holdWait)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// holdStatus is one record as lease status --json shows it.
type holdStatus struct {
	ID        string  `json:"id"`
	Status    string  `json:"status"`
	Owner     string  `json:"owner"`
	Token     int64   `json:"token"`
	RenewedAt float64 `json:"renewed_at"`
	ExpiresAt float64 `json:"expires_at"`
	Live      bool    `json:"live"`
}

// record returns the work record of id, nil when there is none.
func (h *holdTable) record(id leasefmt.ID) *holdStatus {
	h.t.Helper()
	r := h.must(0, "", "status", "--json")
	for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
		if l == "" {
			continue
		}
		var s holdStatus
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			h.t.Fatalf("status --json line %q: %v", l, err)
		}
		if s.ID == string(id) {
			return &s
		}
	}
	return nil
}

// holdProc is a lease process running in the background, its stdout read
// line by line.
type holdProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	errOut *bytes.Buffer
	errw   *syncWriter // errOut as the process writes it, to read while it runs
	out    *bytes.Buffer
}

func (h *holdTable) start(args ...string) *holdProc {
	h.t.Helper()
	cmd := h.command(args...)
	p := &holdProc{t: h.t, cmd: cmd, lines: make(chan string, 100), errOut: &bytes.Buffer{}, out: &bytes.Buffer{}}
	p.errw = &syncWriter{w: p.errOut}
	cmd.Stderr = p.errw
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.out.WriteString(sc.Text() + "\n")
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p
}

// expect waits for a stdout line.
func (p *holdProc) expect(want string) {
	p.t.Helper()
	timeout := time.After(holdWait)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("stdout ended before %q", want)
			}
			if l == want {
				return
			}
		case <-timeout:
			p.t.Fatalf("no line %q within %v", want, holdWait)
		}
	}
}

// skip waits for n stdout lines, whatever they say (a watch's counts).
func (p *holdProc) skip(n int) {
	p.t.Helper()
	for range n {
		select {
		case _, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("stdout ended before %d lines", n)
			}
		case <-time.After(holdWait):
			p.t.Fatalf("no stdout line within %v", holdWait)
		}
	}
}

// wait drains stdout and returns the exit status.
func (p *holdProc) wait() int {
	p.t.Helper()
	drained := make(chan struct{})
	go func() {
		for range p.lines {
		}
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(holdWait):
		p.cmd.Process.Kill()
		p.t.Fatalf("stdout of lease run not closed within %v", holdWait)
	}
	return holdExit(p.t, p.cmd)
}

// syncWriter lets the test read stderr while the process writes it.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// String is what was written so far, when w is a fmt.Stringer (a
// bytes.Buffer, a strings.Builder).
func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sw, ok := s.w.(fmt.Stringer); ok {
		return sw.String()
	}
	return ""
}

func holdID(name string) leasefmt.ID {
	sum := sha256.Sum256([]byte(name))
	return leasefmt.ID(hex.EncodeToString(sum[:]))
}

// alive reports whether process pid still exists (and is not a zombie).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func TestRunChildSeesLeaseVariables(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("vars")
	r := h.must(0, "", "run", string(id), "--", "sh", "-c", `echo "$LEASE_ID $LEASE_TOKEN $LEASE_ROOT"`)
	if want := fmt.Sprintf("%s 1 %s\n", id, h.root); r.out != want {
		t.Fatalf("child printed %q, want %q", r.out, want)
	}
	if rec := h.record(id); rec == nil || rec.Status != "released" || rec.Token != 1 {
		t.Fatalf("after lease run the record is %+v, want released token 1", rec)
	}
	// Adopting a lease claimed before: the child sees that token.
	h.must(0, "", "claim", string(id))
	r = h.must(0, "", "run", "--token", "2", string(id), "--", "sh", "-c", `echo "$LEASE_TOKEN"`)
	if r.out != "2\n" {
		t.Fatalf("adopted lease: child printed %q, want token 2", r.out)
	}
	if rec := h.record(id); rec.Status != "released" || rec.Token != 2 {
		t.Fatalf("after adopting, record is %+v, want released token 2", rec)
	}
	// A token that is not current is refused, and the command does not run.
	r = h.must(125, "", "run", "--token", "7", string(id), "--", "touch", "ran")
	if _, err := os.Stat(filepath.Join(h.dir, "ran")); err == nil {
		t.Fatalf("the command ran under a refused token:\n%s", r)
	}
}

func TestRunExitStatusPassesThrough(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("status")
	for i, c := range []struct {
		script   string
		complete bool
		want     int
		status   string
	}{
		{"exit 0", false, 0, "released"},
		{"exit 3", false, 3, "released"},
		{"exit 3", true, 3, "released"}, // --complete only on status 0
		{"kill -9 $$", false, 128 + 9, "released"},
		{"kill -TERM $$", false, 128 + 15, "released"},
		{"exit 0", true, 0, "done"},
	} {
		args := []string{"run"}
		if c.complete {
			args = append(args, "--complete")
		}
		r := h.lease("", append(args, string(id), "--", "sh", "-c", c.script)...)
		if r.code != c.want {
			t.Fatalf("%s\nwant exit %d", r, c.want)
		}
		rec := h.record(id)
		if rec == nil || rec.Status != c.status || rec.Token != int64(i+1) {
			t.Fatalf("after %q the record is %+v, want %s with token %d", c.script, rec, c.status, i+1)
		}
	}
}

func TestRunCommandFinishesItsOwnLease(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("own")
	// The command completes its lease with its token; lease run then exits
	// with the command's status and leaves the record done.
	r := h.must(0, "", "run", "--interval", "0.2", "--ttl", "5", string(id), "--", "sh", "-c",
		`echo "$LEASE_ID $LEASE_TOKEN" | lease complete >/dev/null && sleep 0.5`)
	if rec := h.record(id); rec.Status != "done" || rec.Token != 1 {
		t.Fatalf("record %+v, want done token 1\n%s", rec, r)
	}
}

func TestRunRefusals(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	held, free := holdID("held"), holdID("free")
	h.must(0, "", "claim", "--owner", "someone-else", string(held))

	r := h.must(125, "", "run", string(held), "--", "touch", "ran")
	if !strings.Contains(r.errOut, "held "+string(held)) {
		t.Fatalf("no held reason on stderr:\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "ran")); err == nil {
		t.Fatal("the command ran although the ID was held")
	}
	if rec := h.record(held); rec.Owner != "someone-else" || rec.Token != 1 || rec.Status != "leased" {
		t.Fatalf("the held record changed: %+v", rec)
	}

	for _, cmd := range []string{"no-such-command-for-lease-run", "./missing/cmd"} {
		h.must(127, "", "run", string(free), "--", cmd)
		if rec := h.record(free); rec != nil {
			t.Fatalf("%s: a missing command claimed the ID: %+v", cmd, rec)
		}
	}
	notExec := filepath.Join(h.dir, "not-executable")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	h.must(126, "", "run", string(free), "--", notExec)

	h.must(125, "", "run", string(free))                             // no command
	h.must(125, "", "run", "not-an-id", "--", "true")                // bad ID
	h.must(125, "", "run", "--now", "5", string(free), "--", "true") // no fixed clock
	h.must(125, "", "run", "--ttl", "1", "--interval", "2", string(free), "--", "true")
	if rec := h.record(free); rec != nil {
		t.Fatalf("a refused lease run claimed the ID: %+v", rec)
	}
}

// holdLose runs a command under lease run with a 1.5 s lease renewed every
// 0.5 s, stops lease run (SIGSTOP) past the lease's expiry, lets another
// owner claim the ID, and resumes lease run, whose next renewal is refused.
func holdLose(t *testing.T, script string) (*holdTable, leasefmt.ID, *holdProc, int) {
	h := newHoldTable(t)
	id := holdID("lost")
	p := h.start("run", "--ttl", "1.5", "--interval", "0.5", "--grace", "0.5", string(id), "--", "sh", "-c", script)
	p.expect("ready")
	rec := h.record(id)
	if rec == nil || rec.Status != "leased" {
		t.Fatalf("lease run holds no lease: %+v", rec)
	}
	stopBetweenRenewals(t, h.root, id, p.cmd.Process.Pid)
	stopped := time.Now()
	defer p.cmd.Process.Signal(syscall.SIGCONT)
	// Wait until the lease is over by the table's clock (the last renewal
	// may have landed just before the stop).
	for {
		rec = h.record(id)
		if !rec.Live {
			break
		}
		if time.Since(stopped) > holdWait {
			t.Fatalf("the lease of a stopped lease run is still live: %+v", rec)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond) // past expires_at + clock_skew (0.1 s)
	h.must(0, "", "claim", "--owner", "thief", "--ttl", "60", string(id))
	p.cmd.Process.Signal(syscall.SIGCONT)
	code := p.wait()
	return h, id, p, code
}

// stopBetweenRenewals stops process pid (SIGSTOP) at a moment it does not
// hold id's record lock: stopped during a renewal it would keep the lock,
// and no other owner could claim the ID. It stops the process, waits until
// every thread of it is stopped, and takes and gives back the lock itself;
// while the lock is held it lets the process go on and stops it again.
func stopBetweenRenewals(t *testing.T, root string, id leasefmt.ID, pid int) {
	t.Helper()
	st, err := commit.Open(root, commit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for tries := 0; ; tries++ {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, fmt.Sprintf("process %d stopped", pid), holdWait, func() bool { return allStopped(pid) })
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		unlock, err := st.Lock(ctx, leasefmt.Work, id)
		cancel()
		if err == nil {
			unlock()
			return
		}
		if tries == 1000 {
			t.Fatalf("process %d held the record lock of %s each of 1000 times it was stopped: %v", pid, id, err)
		}
		syscall.Kill(pid, syscall.SIGCONT)
	}
}

// allStopped reports whether every thread of process pid is stopped (state
// T in /proc/PID/task/TID/stat).
func allStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(f) == 0 || f[0] != "T" {
			return false
		}
	}
	return true
}

func TestRunLeaseLostTerminatesCommand(t *testing.T) {
	t.Parallel()
	h, id, p, code := holdLose(t, `trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	if code != 124 {
		t.Fatalf("lease run exited %d, want 124 (lease lost)\nstderr:\n%s", code, p.errOut)
	}
	if !strings.Contains(p.out.String(), "got-term") {
		t.Fatalf("the command was not sent SIGTERM; stdout:\n%s\nstderr:\n%s", p.out, p.errOut)
	}
	if !strings.Contains(p.errOut.String(), "lease lost") {
		t.Fatalf("no lease lost message on stderr:\n%s", p.errOut)
	}
	if rec := h.record(id); rec.Owner != "thief" || rec.Token != 2 || rec.Status != "leased" {
		t.Fatalf("lease run touched the new holder's record: %+v", rec)
	}
}

func TestRunLeaseLostKillsStubbornCommand(t *testing.T) {
	t.Parallel()
	// The command ignores SIGTERM (and so do its children): SIGKILL after
	// the grace.
	h, id, p, code := holdLose(t, `trap '' TERM; echo $$ > pid; echo ready; while :; do sleep 0.05; done`)
	if code != 124 {
		t.Fatalf("lease run exited %d, want 124 (lease lost)\nstderr:\n%s", code, p.errOut)
	}
	if !strings.Contains(p.errOut.String(), "SIGKILL") {
		t.Fatalf("no SIGKILL reported on stderr:\n%s", p.errOut)
	}
	data, err := os.ReadFile(filepath.Join(h.dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(data), &pid)
	if pid == 0 || alive(pid) {
		t.Fatalf("the command (pid %d) still runs after lease run exited", pid)
	}
	if rec := h.record(id); rec.Owner != "thief" || rec.Token != 2 {
		t.Fatalf("lease run touched the new holder's record: %+v", rec)
	}
}

func TestRunReleasesOnSignal(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			h := newHoldTable(t)
			id := holdID("signal")
			// The command exits 7 when the forwarded signal reaches it.
			p := h.start("run", string(id), "--", "sh", "-c", `trap 'exit 7' INT TERM; echo ready; while :; do sleep 0.05; done`)
			p.expect("ready")
			p.cmd.Process.Signal(sig)
			if code := p.wait(); code != 7 {
				t.Fatalf("lease run exited %d, want the command's 7\nstderr:\n%s", code, p.errOut)
			}
			if rec := h.record(id); rec == nil || rec.Status != "released" || rec.Token != 1 {
				t.Fatalf("after %v the record is %+v, want released", sig, rec)
			}
		})
	}
	t.Run("killed-by-forwarded-SIGINT", func(t *testing.T) {
		h := newHoldTable(t)
		id := holdID("sigint")
		p := h.start("run", string(id), "--", "sh", "-c", `echo ready; exec sleep 60`)
		p.expect("ready")
		p.cmd.Process.Signal(syscall.SIGINT)
		if code := p.wait(); code != 128+2 {
			t.Fatalf("lease run exited %d, want 130 (command killed by SIGINT)\nstderr:\n%s", code, p.errOut)
		}
		if rec := h.record(id); rec == nil || rec.Status != "released" {
			t.Fatalf("after SIGINT the record is %+v, want released", rec)
		}
	})
}

func TestRunRenewsWhileCommandRuns(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("renews")
	// CMD runs until the test tells it to stop, once a renewal has moved
	// the record's expires_at past what the claim granted; then it checks
	// its lease is still current. The 60 s ttl cannot run out by accident
	// while the test waits: what is checked is that renewals happen, not
	// that the lease survived a sleep.
	p := h.start("run", "--ttl", "60", "--interval", "0.2", string(id), "--", "sh", "-c",
		`echo ready; while [ ! -e "$LEASE_ROOT/../stop" ]; do sleep 0.05; done; lease verify <<EOF
$LEASE_ID $LEASE_TOKEN
EOF`)
	p.expect("ready")
	h.waitRenewed(p, id, 1, h.rawRecord(id).ExpiresAt)
	if err := os.WriteFile(filepath.Join(h.dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.expect(fmt.Sprintf("%s 1", id))
	if code := p.wait(); code != 0 {
		t.Fatalf("lease run: exit %d\n%s", code, stderrOf(p))
	}
	if rec := h.record(id); rec == nil || rec.Status != "released" || rec.Token != 1 {
		t.Fatalf("after lease run the record is %+v, want released token 1", rec)
	}
}

// waitRenewed waits (bounded by holdWait) until a renewal by p of id's
// lease with token has moved its expires_at past granted. It fails the
// test when p ends first, or the lease changes hands.
func (h *holdTable) waitRenewed(p *holdProc, id leasefmt.ID, token int64, granted float64) {
	h.t.Helper()
	deadline := time.Now().Add(holdWait)
	for {
		rec := h.rawRecord(id)
		switch {
		case rec == nil || rec.Token != token:
			h.t.Fatalf("waiting for a renewal of token %d: record %+v\nstderr:\n%s", token, rec, stderrOf(p))
		case rec.ExpiresAt > granted:
			return
		case !alive(p.cmd.Process.Pid):
			h.t.Fatalf("%s ended before a renewal moved expires_at past %.6f\nstderr:\n%s", strings.Join(p.cmd.Args, " "), granted, stderrOf(p))
		case time.Now().After(deadline):
			h.t.Fatalf("no renewal moved expires_at past %.6f within %v\nstderr:\n%s", granted, holdWait, stderrOf(p))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
