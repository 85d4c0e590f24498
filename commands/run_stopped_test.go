package commands_test

// lease run stopped (SIGSTOP) until past its lease's expiry, while CMD
// completed the lease: it must exit with CMD's status, not 124, and not
// stop CMD; and its --json lost agrees with stats.lost.

import (
	"encoding/json"
	"strings"
	"testing"
)

// stoppedScript stops lease run (the supervisor's parent), completes the
// lease with its token, waits past the expiry, lets lease run go on, and
// exits 0 a moment later unless it was sent SIGTERM.
const stoppedScript = `run=$(awk '{print $4}' /proc/$PPID/stat)
trap 'echo "got SIGTERM" >&2; exit 143' TERM
kill -STOP "$run"
echo "$LEASE_ID $LEASE_TOKEN" | lease complete > /dev/null
sleep 4
kill -CONT "$run"
sleep 1.5
echo finished`

func TestRunCompletedWhileStopped(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("stopped-past-expiry")
	r := h.lease("", "run", "--json", "--ttl", "2", "--renew-interval", "0.5", "--grace", "1", string(id), "--", "sh", "-c", stoppedScript)
	if r.code != 0 || r.out != "finished\n" || strings.Contains(r.errOut, "got SIGTERM") || strings.Contains(r.errOut, "lease lost") {
		t.Fatalf("%s\nwant CMD's exit 0: the lease was done by CMD before lease run noticed the expiry", r)
	}
	var sum struct {
		Lost   bool   `json:"lost"`
		Finish string `json:"finish"`
		Stats  struct {
			Lost int64 `json:"lost"`
		} `json:"stats"`
	}
	last := r.errOut[strings.LastIndex(strings.TrimSpace(r.errOut), "\n")+1:]
	if err := json.Unmarshal([]byte(last), &sum); err != nil || sum.Lost || sum.Finish != "by-command-done" || sum.Stats.Lost != 0 {
		t.Errorf("--json summary %q (%v): want lost false, stats.lost 0, finish by-command-done", last, err)
	}
}

// TestRunJSONLostAgrees: a lease lost (revoked) says lost true and
// stats.lost 1; one CMD completed itself says false and 0.
func TestRunJSONLostAgrees(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	for _, c := range []struct {
		name, script string
		lost         bool
		code         int
	}{
		{"by-command", `echo "$LEASE_ID $LEASE_TOKEN" | lease complete > /dev/null; sleep 1.5`, false, 0},
		{"revoked", `lease revoke "$LEASE_ID" > /dev/null; sleep 30`, true, 124},
	} {
		r := h.lease("", "run", "--json", "--grace", "1", string(holdID("json-"+c.name)), "--", "sh", "-c", c.script)
		var sum struct {
			Lost  bool `json:"lost"`
			Stats struct {
				Lost int64 `json:"lost"`
			} `json:"stats"`
		}
		last := r.errOut[strings.LastIndex(strings.TrimSpace(r.errOut), "\n")+1:]
		if err := json.Unmarshal([]byte(last), &sum); err != nil || r.code != c.code || sum.Lost != c.lost || (sum.Stats.Lost == 1) != c.lost {
			t.Errorf("%s: %s\nwant exit %d, lost %t agreeing with stats.lost", c.name, r, c.code, c.lost)
		}
	}
}

// TestRunCompleteAttemptRules: with --complete, a CMD killed by its own
// signal (a crash) is a failed run, one stopped because its lease was lost
// is not.
func TestRunCompleteAttemptRules(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	crash, lost := holdID("attempt-crash"), holdID("attempt-lost")
	if r := h.lease("", "run", "--complete", string(crash), "--", "sh", "-c", `kill -SEGV $$`); r.code != 139 {
		t.Errorf("%s\nwant 139", r)
	}
	if out := h.must(0, "", "status", "--json", string(crash)).out; !strings.Contains(out, `"attempts":1`) || !strings.Contains(out, `"exit_status":139`) {
		t.Errorf("a crash: %s, want an attempt with status 139", out)
	}
	if r := h.lease("", "run", "--complete", "--grace", "1", string(lost), "--", "sh", "-c", `lease revoke "$LEASE_ID" > /dev/null; sleep 30`); r.code != 124 {
		t.Errorf("%s\nwant 124", r)
	}
	if out := h.must(0, "", "status", "--json", string(lost)).out; !strings.Contains(out, `"attempts":0`) {
		t.Errorf("a lost lease: %s, want no attempt", out)
	}
}
