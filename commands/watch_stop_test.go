package commands_test

// renew-batch --watch reports as soon as a signal reaches it, without
// waiting for the round in progress (a batch system kills the job soon
// after its SIGTERM), and --output FILE holds the held set whole after
// every round.

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// holdRecordLock takes the lock of id's record in this process, as
// another lease process would, and returns its release.
func holdRecordLock(t *testing.T, root string, id leasefmt.ID) func() {
	t.Helper()
	st, err := commit.Open(root, commit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := st.Lock(context.Background(), leasefmt.Work, id)
	if err != nil {
		t.Fatal(err)
	}
	done := false
	release := func() {
		if !done {
			done = true
			unlock()
			st.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// TestWatchReportsDuringRound: a SIGTERM that arrives while a round waits
// for a record lock makes the watch print the lines it holds and its
// summary at once, while the round still waits; the lines are those of the
// last round, each checked again. With --output the file holds them, and
// held them whole since the first round.
func TestWatchReportsDuringRound(t *testing.T) {
	t.Parallel()
	for _, output := range []bool{false, true} {
		name := "stdout"
		if output {
			name = "--output"
		}
		t.Run(name, func(t *testing.T) {
			h := newHoldTable(t)
			ids := []leasefmt.ID{coreID("round-a"), coreID("round-b"), coreID("round-c"), coreID("round-d")}
			lines := strings.SplitAfter(h.claim("w", "60", ids...), "\n")
			held := strings.Join(lines[:3], "")
			input := filepath.Join(h.dir, "held")
			if err := os.WriteFile(input, []byte(held), 0o644); err != nil {
				t.Fatal(err)
			}
			// round-d's record lock is held from the start, and its line
			// joins the input after round 1: the round that reads it waits
			// for that lock (lock_timeout 600 s), whenever it starts.
			release := holdRecordLock(t, h.root, ids[3])
			final := filepath.Join(h.dir, "held.final")
			args := []string{"--interval", "0.3", "--lock-timeout", "600", "held"}
			if output {
				args = append([]string{"--output", final}, args...)
			}
			p := h.startWatch("", args...)
			p.expectErr("round 1:")
			if output {
				if got, _ := os.ReadFile(final); string(got) != held {
					t.Errorf("--output after round 1: %q, want %q", got, held)
				}
			}
			f, err := os.OpenFile(input, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(lines[3]); err != nil {
				t.Fatal(err)
			}
			f.Close()
			// The signal comes while the first round that reads round-d's
			// line waits for its lock (600 s), or before that round starts:
			// either way the report must not wait for it (a report that
			// did would not come within holdWait). The rounds before it
			// renew the 3 others.
			p.cmd.Process.Signal(os.Interrupt)
			summary := p.expectErr("stopped by SIGINT")
			if strings.Contains(p.errOut.String(), "renewed=4") {
				t.Errorf("the report waited for the round in progress:\n%s", p.errOut)
			}
			release()
			code := p.stop()
			if code != 0 || !strings.Contains(summary, "held=3 lost=0") {
				t.Errorf("exit %d, summary %q; want 0 and held=3 lost=0\n%s", code, summary, p.errOut)
			}
			got := p.out.String()
			if output {
				if got != "" {
					t.Errorf("stdout %q with --output; want nothing", got)
				}
				b, _ := os.ReadFile(final)
				got = string(b)
			}
			if got != held {
				t.Errorf("held set %q, want %q", got, held)
			}
			if ents, _ := filepath.Glob(filepath.Join(h.dir, ".held.final.tmp.*")); len(ents) > 0 {
				t.Errorf("temporary files left: %v", ents)
			}
		})
	}
}

// TestRenewBatchOutput: renew-batch --output FILE writes to FILE, whole,
// what stdout would carry, and nothing to stdout; --output with --json,
// into a missing directory or onto a directory is a usage error that
// writes nothing.
func TestRenewBatchOutput(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := []leasefmt.ID{coreID("out-a"), coreID("out-b")}
	held := coreMust(t, 0, "", "claim", "--root", root, "--now", "1000", "--ttl", "100", string(ids[0]), string(ids[1])).out
	dir := t.TempDir()
	file := filepath.Join(dir, "held")
	os.WriteFile(file, []byte("old content, to be replaced\n"), 0o644)
	r := coreMust(t, 0, held, "renew-batch", "--root", root, "--now", "1010", "--output", file)
	if got, _ := os.ReadFile(file); r.out != "" || string(got) != held {
		t.Errorf("stdout %q, file %q; want nothing and %q", r.out, got, held)
	}
	before := mpiTree(t, root)
	for _, tc := range []struct{ name, path, extra string }{
		{"with --json", filepath.Join(dir, "new"), "--json"},
		{"missing directory", filepath.Join(dir, "no", "such", "held"), ""},
		{"a directory", dir, ""},
		{"empty name", "", ""},
	} {
		args := []string{"renew-batch", "--root", root, "--now", "1020", "--output", tc.path}
		if tc.extra != "" {
			args = append(args, tc.extra)
		}
		r := coreMust(t, 2, held, args...)
		if r.out != "" || !strings.Contains(r.errOut, "--output") {
			t.Errorf("%s: %s; want exit 2 naming --output", tc.name, r)
		}
		if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
			t.Errorf("%s: created a file", tc.name)
		}
	}
	mpiSameTree(t, "after the refused --output", before, mpiTree(t, root))
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries in the output directory, want 1 (no temporary file left)", len(ents))
	}
}

// TestLateSignalsKeepStatus: once a watch has stopped on a signal, more
// signals until the process is gone (a Slurm job's SIGTERM reaches a rank
// from Slurm and again from mpirun; a second ^C) change nothing: it exits
// with the status it reported, 0, and is not killed by one of them on its
// way out. Each watch gets SIGTERM back to back from its first stop signal
// (renew-batch: from its summary, which the first signal makes at once)
// until it has exited.
func TestLateSignalsKeepStatus(t *testing.T) {
	t.Parallel()
	t.Run("renew-batch", func(t *testing.T) {
		t.Parallel()
		h := newHoldTable(t)
		input := filepath.Join(h.dir, "held")
		held := h.claim("w", "60", coreID("late-a"), coreID("late-b"))
		if err := os.WriteFile(input, []byte(held), 0o644); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			p := h.startWatch("", "--interval", "0.05", input)
			p.expectErr("round 2:")
			p.cmd.Process.Signal(os.Interrupt)
			p.expectErr("stopped by SIGINT")
			stop := floodSignal(p.cmd.Process, syscall.SIGTERM)
			for l := range p.errLines {
				p.errOut.WriteString(l + "\n")
			}
			code := p.wait()
			stop()
			if code != 0 {
				t.Fatalf("run %d: exit %d, want 0 after the summary of its SIGINT:\n%s", i, code, p.errOut)
			}
		}
	})
	t.Run("status", func(t *testing.T) {
		t.Parallel()
		h := newHoldTable(t)
		for i := range 10 {
			p := h.start("status", "--watch", "--interval", "50ms")
			p.skip(2)
			p.cmd.Process.Signal(os.Interrupt)
			stop := floodSignal(p.cmd.Process, syscall.SIGTERM)
			code := p.wait()
			stop()
			if code != 0 {
				t.Fatalf("run %d: exit %d, want 0\n%s", i, code, p.errOut)
			}
		}
	})
}

// floodSignal sends sig to p back to back until stop is called (after p
// was waited for: a zombie still takes signals, and a reaped process is
// not signalled again). Back to back, the old code's window (signal.Stop
// to exit) was hit in 10 of 10 subtests of 5 runs; one signal every 20 µs
// hit it in 4 of 10.
func floodSignal(p *os.Process, sig os.Signal) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			if p.Signal(sig) != nil {
				return
			}
			runtime.Gosched()
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
