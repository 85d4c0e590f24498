package commands_test

// The holes of issue "Fencing without holes" in lease run (holes 4 and 6):
// its command is stopped when the lease is released or revoked from
// outside, and before the lease counts as lost when renewals fail. The
// helpers are in fencing_test.go.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Hole 4: a lease run whose lease is released or revoked from outside
// stops its command at once (exit 124), before anybody else's claim.
func TestFenceRunStopsWhenReleasedOrRevoked(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"release", "revoke"} {
		t.Run(how, func(t *testing.T) {
			h := newHoldTable(t)
			id := holdID("outside-" + how)
			p := h.start("run", "--ttl", "30", "--interval", "10", "--grace", "1", string(id), "--", "sh", "-c", `echo $$ > pid; echo ready; exec sleep 60`)
			p.expect("ready")
			took := time.Now()
			switch how {
			case "release":
				h.must(0, string(id)+" 1\n", "release")
			case "revoke":
				if r := h.must(0, "", "revoke", string(id)); r.out != string(id)+" 1\n" {
					t.Fatalf("revoke printed %q", r.out)
				}
			}
			if code := p.wait(); code != 124 {
				t.Fatalf("lease run exited %d after its lease was %sd, want 124\nstderr:\n%s", code, how, p.errOut)
			}
			if d := time.Since(took); d > 10*time.Second {
				t.Fatalf("lease run took %v to notice (renewals every 10 s): it waited for a renewal", d)
			}
			data, _ := os.ReadFile(filepath.Join(h.dir, "pid"))
			var pid int
			fmt.Sscan(string(data), &pid)
			if pid == 0 || alive(pid) {
				t.Fatalf("the command (pid %d) still runs", pid)
			}
			if r := h.must(0, "", "claim", "--owner", "next", string(id)); r.out != string(id)+" 2\n" {
				t.Fatalf("claim after the %s: %q, want token 2", how, r.out)
			}
		})
	}
}

// Hole 6: with renewals failing (the record's lock held by someone else),
// lease run stops its command before the lease counts as lost
// (expires_at - clock_skew), and a claimer cannot take the lease before
// expires_at + clock_skew.
func TestFenceRunStopsBeforeTakeover(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("stop-in-time")
	env := []string{"LEASE_CLOCK_SKEW=1"}
	cmd := h.command("run", "--ttl", "4", "--interval", "0.5", "--grace", "1", string(id), "--",
		"sh", "-c", `trap 'date +%s.%N > term; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	cmd.Env = append(cmd.Env, env...)
	p := &holdProc{t: t, cmd: cmd, lines: make(chan string, 10), errOut: &bytes.Buffer{}, out: &bytes.Buffer{}}
	cmd.Stderr = &syncWriter{w: p.errOut}
	pipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	go func() {
		buf := make([]byte, 64)
		for {
			n, err := pipe.Read(buf)
			if n > 0 && strings.Contains(string(buf[:n]), "ready") {
				p.lines <- "ready"
			}
			if err != nil {
				close(p.lines)
				return
			}
		}
	}()
	p.expect("ready")
	coreHoldLock(t, h.root, id) // every renewal now waits and times out
	rec := h.rawRecord(id)      // as last renewed: no renewal can land any more
	if code := p.wait(); code != 124 {
		t.Fatalf("lease run exited %d, want 124\nstderr:\n%s", code, p.errOut)
	}
	data, err := os.ReadFile(filepath.Join(h.dir, "term"))
	if err != nil {
		t.Fatalf("the command never got SIGTERM: %v\nstderr:\n%s", err, p.errOut)
	}
	var term float64
	fmt.Sscan(string(data), &term)
	// The record was not renewed (its lock was held): its expires_at is the
	// claim's. SIGTERM comes a grace (1 s) before expires_at - clock_skew,
	// where SIGKILL would follow; the command, which exits on SIGTERM, is
	// gone long before a claimer may take the lease (expires_at +
	// clock_skew). lease run itself ends later: it waits for the renewal in
	// flight and releases.
	if term >= rec.ExpiresAt-1 {
		t.Errorf("SIGTERM at %.3f, not before expires_at - clock_skew = %.3f", term, rec.ExpiresAt-1)
	}
	if term < rec.ClaimedAt+1 {
		t.Errorf("SIGTERM at %.3f, %.3f s after the claim: before a renewal could be retried", term, term-rec.ClaimedAt)
	}
	if !strings.Contains(p.errOut.String(), "lease lost") {
		t.Errorf("no lease lost message:\n%s", p.errOut)
	}
}
