package commands_test

// lease run --wait [SECONDS]: wait for a held item as flock -w and consul
// lock wait, with real processes.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stderrOf returns what p wrote on stderr so far.
func stderrOf(p *holdProc) string {
	sw := p.cmd.Stderr.(*syncWriter)
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return p.errOut.String()
}

// waitStderr waits (at most holdWait) until p's stderr contains want.
func waitStderr(t *testing.T, p *holdProc, want string) {
	t.Helper()
	deadline := time.Now().Add(holdWait)
	for !strings.Contains(stderrOf(p), want) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr never said %q:\n%s", want, stderrOf(p))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunWaitIsGrantedOnRelease: lease run --wait on a held item waits,
// without running CMD, and runs it under a new token once the holder
// releases.
func TestRunWaitIsGrantedOnRelease(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("run-wait-granted")
	held := h.must(0, "", "claim", "--owner", "first", "--ttl", "600", string(id)).out
	p := h.start("run", "-v", "--wait", string(id), "--", "sh", "-c", "echo granted $LEASE_TOKEN")
	waitStderr(t, p, "is held (held by \"first\" (token 1)")
	waitStderr(t, p, "waiting for as long as it takes")
	if rec := h.record(id); rec.Owner != "first" || rec.Token != 1 {
		t.Fatalf("the waiting lease run took the item: %+v", rec)
	}
	h.must(0, held, "release")
	p.expect("granted 2")
	if code := p.wait(); code != 0 {
		t.Fatalf("lease run --wait: exit %d\n%s", code, stderrOf(p))
	}
	if rec := h.record(id); rec.Status != "released" || rec.Token != 2 {
		t.Errorf("after lease run --wait: %+v", rec)
	}
}

// TestRunWaitGivesUp: --wait SECONDS ends with 125 (not granted) and CMD
// not run when the item stays held; outcomes waiting cannot change (done)
// end the wait at once; bad values and --token are refused.
func TestRunWaitGivesUp(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("run-wait-gives-up")
	h.must(0, "", "claim", "--owner", "first", "--ttl", "600", string(id))
	r := h.must(125, "", "run", "--wait", "0.3", string(id), "--", "sh", "-c", "echo ran")
	if r.out != "" || !strings.Contains(r.errOut, "not claimed within --wait 300ms: held") {
		t.Errorf("--wait 0.3 on a held item: %s", r)
	}
	done := holdID("run-wait-done")
	held := h.must(0, "", "claim", string(done)).out
	h.must(0, held, "complete")
	// Without a bound: it must still end, since done is final.
	r = h.must(125, "", "run", "--wait", string(done), "--", "sh", "-c", "echo ran")
	if r.out != "" || !strings.Contains(r.errOut, "not claimed: done") {
		t.Errorf("--wait on a done item: %s", r)
	}
	for _, args := range [][]string{
		{"run", "--wait=-1", string(id), "--", "true"},
		{"run", "--wait=soon", string(id), "--", "true"},
		{"run", "--wait=NaN", string(id), "--", "true"},
		{"run", "--wait=5", "--token", "1", string(id), "--", "true"},
		{"run", "--token", "1", "--wait", string(id), "--", "true"},
	} {
		if r := h.must(125, "", args...); !strings.Contains(r.errOut, "--wait") {
			t.Errorf("lease %v: %s", args, r)
		}
	}
	if rec := h.record(id); rec.Owner != "first" || rec.Token != 1 {
		t.Errorf("refused waits changed the record: %+v", rec)
	}
}

// TestRunNextWaitKeepsTheLeaseItGot: lease run --next --wait that waited
// for a busy queue longer than its lease's ttl - clock_skew - grace keeps
// the lease it then gets. Its lost point counts from the start of the
// claim that granted the lease, not from before the wait (issue 25: the
// lease was declared lost at once, CMD got SIGTERM and lease run exited
// 124).
func TestRunNextWaitKeepsTheLeaseItGot(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("run-next-wait")
	h.must(0, string(id)+"\n", "add")
	held := h.must(0, "", "claim", "--owner", "first", "--ttl", "600", string(id)).out
	// lease run's lease is told to stop ttl - clock_skew - grace = 20 -
	// 0.1 - 8 = 11.9 s after the claim (or renewal, every 0.5 s) that began
	// it: far enough that it is not reached by accident once granted (at
	// load 38 a renewal took more than 5.9 s).
	// The queue's one item stays held until the test releases it, past
	// that point counted from before the wait.
	begin := time.Now()
	p := h.start("run", "-v", "--next", "--wait", "--ttl", "20", "--interval", "0.5", "--grace", "8", "--",
		"sh", "-c", `echo "granted $LEASE_TOKEN"; while [ ! -e "$LEASE_ROOT/../stop" ]; do sleep 0.05; done; echo finished`)
	time.Sleep(time.Until(begin.Add(15 * time.Second))) // a lower bound on the wait (3 s for lease to start), not a timing assertion
	if rec := h.record(id); rec.Owner != "first" || rec.Token != 1 {
		t.Fatalf("lease run --next --wait took a held item: %+v\n%s", rec, stderrOf(p))
	}
	h.must(0, held, "release")
	p.expect("granted 2")
	// A renewal after the grant: the lease was not declared lost at once.
	h.waitRenewed(p, id, 2, h.rawRecord(id).ExpiresAt)
	if err := os.WriteFile(filepath.Join(h.dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 || p.out.String() != "granted 2\nfinished\n" {
		t.Fatalf("lease run --next --wait: exit %d, want 0 with CMD run to its end\nstdout:\n%s\nstderr:\n%s", code, p.out, stderrOf(p))
	}
	if strings.Contains(stderrOf(p), "lease lost") {
		t.Errorf("lease run --next --wait said the lease was lost:\n%s", stderrOf(p))
	}
	if rec := h.record(id); rec.Status != "released" || rec.Token != 2 {
		t.Errorf("after lease run --next --wait: %+v, want released with token 2", rec)
	}
}
