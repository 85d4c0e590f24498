package commands_test

// lease renew-batch --watch as a real process under real time (the helpers
// are in run_test.go).

import (
	"bufio"
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
	"github.com/leasetool/lease/leasefmt"
)

// watchProc is a running renew-batch --watch whose stderr is read line by
// line (rounds with -v, losses, the summary).
type watchProc struct {
	*holdProc
	errLines chan string
	errOut   *strings.Builder
}

func (h *holdTable) startWatch(stdin string, args ...string) *watchProc {
	h.t.Helper()
	cmd := h.command(append([]string{"renew-batch", "--watch", "-v"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	p := &watchProc{holdProc: &holdProc{t: h.t, cmd: cmd, lines: make(chan string, 100), out: &bytes.Buffer{}},
		errLines: make(chan string, 1000), errOut: &strings.Builder{}}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(outPipe)
		for sc.Scan() {
			p.out.WriteString(sc.Text() + "\n")
		}
		close(p.lines)
	}()
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			p.errLines <- sc.Text()
		}
		close(p.errLines)
	}()
	return p
}

// expectErr waits for a stderr line containing want and returns it; the
// lines passed over are kept in errOut.
func (p *watchProc) expectErr(want string) string {
	p.t.Helper()
	timeout := time.After(holdWait)
	for {
		select {
		case l, ok := <-p.errLines:
			if !ok {
				p.t.Fatalf("stderr ended before a line with %q:\n%s", want, p.errOut)
			}
			p.errOut.WriteString(l + "\n")
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			p.t.Fatalf("no stderr line with %q within %v:\n%s", want, holdWait, p.errOut)
		}
	}
}

// stop sends SIGTERM and returns the exit status, with every stderr line
// in errOut.
func (p *watchProc) stop() int {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	for l := range p.errLines {
		p.errOut.WriteString(l + "\n")
	}
	return p.wait()
}

func (h *holdTable) claim(owner string, ttl string, ids ...leasefmt.ID) string {
	h.t.Helper()
	var args []string
	for _, id := range ids {
		args = append(args, string(id))
	}
	return h.must(0, "", append([]string{"claim", "--owner", owner, "--ttl", ttl}, args...)...).out
}

func TestWatchRenewsAcrossIntervals(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("watch-renews")
	held := filepath.Join(h.dir, "held")
	// Claimed for long, so that a slow start of the watcher loses nothing;
	// its first round shortens the lease to its own 30 s TTL, long enough
	// that it cannot run out by accident while the test waits.
	os.WriteFile(held, []byte(h.claim("keeper", "60", id)), 0o644)

	p := h.startWatch("", "--ttl", "30", "--interval", "0.5", held)
	p.expectErr("round 1: renewed=1")
	first := h.record(id)
	if first.ExpiresAt > first.RenewedAt+30.001 {
		t.Fatalf("the first round did not renew with --ttl 30: %+v", first)
	}
	// Later rounds renew it again: its expiry moves forward, the lease
	// still live under the same token.
	p.expectErr("round 4:")
	deadline := time.Now().Add(holdWait)
	rec := h.record(id)
	for rec.ExpiresAt <= first.ExpiresAt && rec.Token == first.Token && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		rec = h.record(id)
	}
	if !rec.Live || rec.ExpiresAt <= first.ExpiresAt || rec.Token != first.Token {
		t.Fatalf("no later round renewed the lease: the record is %+v; it was %+v\nstderr:\n%s", rec, first, p.errOut)
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("watch exited %d on SIGTERM, want 0\nstderr:\n%s", code, p.errOut)
	}
	if want := fmt.Sprintf("%s %d\n", id, first.Token); p.out.String() != want {
		t.Fatalf("stdout %q, want the still held line %q", p.out, want)
	}
	errOut := p.errOut.String()
	for _, want := range []string{"round 4:", "stopped by SIGTERM", "held=1 lost=0", "renewals=", "directory_syncs="} {
		if !strings.Contains(errOut, want) {
			t.Fatalf("no %q in the statistics on stderr:\n%s", want, errOut)
		}
	}
}

func TestWatchPicksUpAppendedLinesAndDropsLost(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	a, b, c := holdID("watch-a"), holdID("watch-b"), holdID("watch-c")
	held := filepath.Join(h.dir, "held")
	os.WriteFile(held, []byte(h.claim("keeper", "30", a, c)), 0o644)

	p := h.startWatch("", "--ttl", "30", "--interval", "0.2", held)
	p.expectErr("round 1: renewed=2")

	// A wrapper claims b and appends it, in two writes: the half line is
	// not taken until it is complete.
	line := h.claim("keeper", "30", b)
	claimed := h.record(b)
	f, err := os.OpenFile(held, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(line[:40])
	p.expectErr("round")
	p.expectErr("round")
	f.WriteString(line[40:])
	f.Close()
	p.expectErr("renewed=3")
	if strings.Contains(p.errOut.String(), "malformed") {
		t.Fatalf("a half-written line was reported:\n%s", p.errOut)
	}
	if rec := h.record(b); rec.RenewedAt <= claimed.RenewedAt || rec.Token != claimed.Token {
		t.Fatalf("the appended lease was not renewed: %+v, claimed as %+v", rec, claimed)
	}

	// c is released by its holder: reported once, dropped.
	h.must(0, fmt.Sprintf("%s 1\n", c), "release")
	lost := p.expectErr(string(c))
	if !strings.HasPrefix(lost, "released "+string(c)+" 1") {
		t.Fatalf("loss reported as %q, want a released line", lost)
	}
	p.expectErr("renewed=2 lost=0")

	if code := p.stop(); code != 0 {
		t.Fatalf("watch exited %d on SIGTERM, want 0\nstderr:\n%s", code, p.errOut)
	}
	if want := fmt.Sprintf("%s 1\n%s 1\n", a, b); p.out.String() != want {
		t.Fatalf("stdout %q, want the still held lines %q", p.out, want)
	}
	if n := strings.Count(p.errOut.String(), "released "+string(c)); n != 1 {
		t.Fatalf("the lost lease was reported %d times, want once:\n%s", n, p.errOut)
	}
}

func TestWatchStdinEndsWhenAllLost(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("watch-stdin")
	line := h.claim("keeper", "30", id)
	p := h.startWatch(line, "--ttl", "30", "--interval", "0.2")
	p.expectErr("round 1: renewed=1")
	h.must(0, line, "release")
	for l := range p.errLines {
		p.errOut.WriteString(l + "\n")
	}
	if code := p.wait(); code != 1 {
		t.Fatalf("watch over stdin exited %d after losing everything, want 1\nstderr:\n%s", code, p.errOut)
	}
	if p.out.String() != "" || !strings.Contains(p.errOut.String(), "every lease lost") {
		t.Fatalf("stdout %q, stderr:\n%s", p.out, p.errOut)
	}
}

func TestWatchRefusesSettings(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("watch-settings")
	held := filepath.Join(h.dir, "held")
	os.WriteFile(held, []byte(h.claim("keeper", "30", id)), 0o644)
	for _, args := range [][]string{
		{"--watch", "--ttl", "2", "--interval", "2", held}, // no renewal before expiry
		{"--watch", "--ttl", "2", "--interval", "3", held}, // nor here
		{"--watch", "--now", "1000", held},                 // a fixed clock never advances
		{"--interval", "1", held},                          // --interval without --watch
		{"--watch", filepath.Join(h.dir, "missing")},       // an input that is not there
	} {
		h.must(2, "", append([]string{"renew-batch"}, args...)...)
	}
	os.WriteFile(held, []byte("not a line\n"), 0o644)
	h.must(2, "", "renew-batch", "--watch", held)
}

// watchMPIBinary builds lease with MPI support into dir, or skips (fails
// with LEASE_TEST_REQUIRE=all) when Open MPI is missing.
func watchMPIBinary(t *testing.T, dir string) string {
	t.Helper()
	missing := ""
	if _, err := exec.LookPath("mpirun"); err != nil {
		missing = "mpirun not found"
	} else if err := exec.Command("pkg-config", "--exists", "ompi").Run(); err != nil {
		missing = "pkg-config --exists ompi failed"
	}
	if missing != "" {
		testenv.Missing(t, "mpi", missing+": apt-get install openmpi-bin libopenmpi-dev")
	}
	bin := filepath.Join(dir, "lease-mpi")
	if out, err := exec.Command("go", "build", "-tags", "mpi", "-o", bin, "github.com/leasetool/lease").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags mpi: %v\n%s", err, out)
	}
	return bin
}

// TestWatchUnderMPIRun: a watch under mpirun renews on both ranks and stops
// cleanly on SIGUSR1, both as mpirun forwards it (to every rank, in no
// particular order) and when only rank 1 receives it (the ranks agree to
// stop, and rank 0 must still report the signal, not "nothing to renew").
func TestWatchUnderMPIRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		signal func(t *testing.T, mpirun *os.Process)
	}{
		{"mpirun forwards", func(t *testing.T, mpirun *os.Process) { mpirun.Signal(syscall.SIGUSR1) }},
		{"rank 1 alone", func(t *testing.T, mpirun *os.Process) {
			syscall.Kill(rankPid(t, mpirun.Pid, 1), syscall.SIGUSR1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			watchUnderMPIRun(t, tc.signal)
		})
	}
}

// rankPid is the process id of rank r of the job mpirun runs.
func rankPid(t *testing.T, mpirun, r int) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	want := fmt.Sprintf("OMPI_COMM_WORLD_RANK=%d", r)
	for _, p := range procs {
		pid, _ := strconv.Atoi(filepath.Base(p))
		stat, err := os.ReadFile(p + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after the last ')'.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(mpirun) {
			continue
		}
		env, _ := os.ReadFile(p + "/environ")
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == want {
				return pid
			}
		}
	}
	t.Fatalf("no child of mpirun %d has %s", mpirun, want)
	return 0
}

func watchUnderMPIRun(t *testing.T, signal func(t *testing.T, mpirun *os.Process)) {
	h := newHoldTable(t)
	bin := watchMPIBinary(t, h.dir)
	// Items in several shards, so that both ranks renew some.
	var ids []leasefmt.ID
	for i := 0; i < 8; i++ {
		ids = append(ids, holdID(fmt.Sprintf("watch-mpi-%d", i)))
	}
	held := filepath.Join(h.dir, "held")
	lines := h.claim("keeper", "30", ids...)
	os.WriteFile(held, []byte(lines), 0o644)
	before := map[leasefmt.ID]float64{}
	for _, id := range ids {
		before[id] = h.record(id).RenewedAt
	}

	cmd := exec.Command("mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
		bin, "renew-batch", "--watch", "-v", "--ttl", "30", "--interval", "0.2", held)
	cmd.Env, cmd.Dir = h.env(), h.dir
	p := &watchProc{holdProc: &holdProc{t: t, cmd: cmd, lines: make(chan string, 100), out: &bytes.Buffer{}},
		errLines: make(chan string, 1000), errOut: &strings.Builder{}}
	outPipe, _ := cmd.StdoutPipe()
	errPipe, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(outPipe)
		for sc.Scan() {
			p.out.WriteString(sc.Text() + "\n")
		}
		close(p.lines)
	}()
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			p.errLines <- sc.Text()
		}
		close(p.errLines)
	}()
	round := p.expectErr("round 3: renewed=8 lost=0")
	// -v reports the round's real collective time: more than nothing (the
	// ranks exchanged their results), and less than the TTL. It is the time
	// spent in collectives since the batch before (RoundCollectives), so it
	// may exceed this round's own time= when the last round's were slow.
	var took, coll float64
	if i := strings.Index(round, " time="); i < 0 || !strings.Contains(round, "ranks=2 collective_time=") {
		t.Fatalf("round line %q: want time= and ranks=2 collective_time=", round)
	} else if _, err := fmt.Sscanf(round[i:], " time=%fs ranks=2 collective_time=%fs", &took, &coll); err != nil {
		t.Fatalf("round line %q: %v", round, err)
	}
	if !(coll > 0 && coll < 30) || took < 0 {
		t.Errorf("round line %q: collective_time %g, want in (0, 30) (the TTL); time %g", round, coll, took)
	}
	for _, id := range ids {
		if rec := h.record(id); rec.RenewedAt <= before[id] {
			t.Fatalf("%s was not renewed under mpirun: %+v", id, rec)
		}
	}
	signal(t, cmd.Process)
	for l := range p.errLines {
		p.errOut.WriteString(l + "\n")
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("mpirun exited %d after SIGUSR1, want 0\nstderr:\n%s", code, p.errOut)
	}
	if p.out.String() != lines {
		t.Fatalf("stdout %q, want every held line once (rank 0 alone prints) %q", p.out, lines)
	}
	for _, want := range []string{"stopped by SIGUSR1", "held=8 lost=0", "ranks=2"} {
		if !strings.Contains(p.errOut.String(), want) {
			t.Fatalf("no %q on stderr:\n%s", want, p.errOut)
		}
	}
}
