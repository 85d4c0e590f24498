//go:build linux

package commands_test

// The no-room rule (issue 36, internal/worker/room.go): a run that fails
// while the table's filesystem has no room is the machine's failure, not
// the item's: it is released with no attempt counted, and lease work
// claims nothing until there is room again. Before, each such run counted
// an attempt: in an AFL++ campaign whose disk was full for 50 s, 11 failed
// runs were counted and a good item ended failed.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/internal/testenv"
)

// attemptsOf is the status and attempts of the one record of h's table.
func attemptsOf(t *testing.T, h *holdTable) (string, int64) {
	t.Helper()
	var r struct {
		Status   string `json:"status"`
		Attempts int64  `json:"attempts"`
	}
	out := strings.TrimSpace(h.must(0, "", "status", "--json").out)
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("status --json %q: %v", out, err)
	}
	return r.Status, r.Attempts
}

// TestWorkNoRoomCountsNoAttempt: CMD starts, the table's filesystem fills
// up, CMD fails writing its findings (ENOSPC). The item is released with
// attempts 0 (max_attempts is 1: one counted attempt would make it
// failed), lease work says why and waits for room, claiming nothing; once
// the filler is removed the item runs again and is done, attempts 0.
func TestWorkNoRoomCountsNoAttempt(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	mnt := testenv.LoopMount(t, "ext4", 64<<20, "-b", "4096", "-m", "0")
	h.root = filepath.Join(mnt, "table")
	h.must(0, "", "init", "--shards", "4")
	h.workAdd("noroom", 1)
	gate, started := filepath.Join(h.dir, "gate"), filepath.Join(h.dir, "started")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Each run says it started, waits while the gate is there, then writes
	// 256 KiB of findings to LEASE_STAGE: on a full filesystem that fails.
	script := `echo "$LEASE_ID" >> "$0"; while [ -e "$1" ]; do sleep 0.05; done; head -c 262144 /dev/zero > "$LEASE_STAGE/findings"`
	w := startOutageWorker(t, h, "worker.err", "work", "--max-attempts", "1", "--ttl", "5", "--renew-interval", "1", "--grace", "1", "--", "sh", "-c", script, started, gate)
	testenv.WaitFor(t, "CMD running", holdWait, func() bool { _, err := os.Stat(started); return err == nil || !w.running() })

	fill(t, mnt)
	os.Remove(gate)
	testenv.WaitFor(t, "lease work waiting for room", holdWait, func() bool {
		return strings.Contains(w.errText(), "the table cannot be written") || !w.running()
	})
	if !w.running() {
		t.Fatalf("lease work ended: exit %d\n%s", w.code, w.errText())
	}
	errText := w.errText()
	if !strings.Contains(errText, "failed while "+h.root+"'s filesystem has no room") || !strings.Contains(errText, "released, no attempt counted") ||
		strings.Contains(errText, "attempt 1") {
		t.Errorf("lease work's stderr:\n%s\nwant the failure released with no attempt counted, saying why", errText)
	}
	if st, n := attemptsOf(t, h); st != "released" || n != 0 {
		t.Errorf("after the run that failed on the full filesystem: %s, attempts %d; want released, attempts 0", st, n)
	}
	if b, _ := os.ReadFile(started); len(strings.Fields(string(b))) != 1 {
		t.Errorf("CMD ran %d times while there was no room; want once", len(strings.Fields(string(b))))
	}

	testenv.Unfill(mnt)
	testenv.WaitFor(t, "lease work ending once there is room", holdWait, func() bool { return !w.running() })
	if w.code != 0 || !strings.Contains(w.errText(), "writable again") {
		t.Errorf("lease work: exit %d\n%s\nwant exit 0, the end of the wait said", w.code, w.errText())
	}
	if st, n := attemptsOf(t, h); st != "done" || n != 0 {
		t.Errorf("after room returned: %s, attempts %d; want done, attempts 0", st, n)
	}
	h.must(0, "", "fsck")
}

// TestWorkRoomCountsAttempt: the rule hides no real failure: a CMD that
// fails on a filesystem with room (the same small loop-mounted ext4,
// mostly filled, its free space above the floor) counts its attempts and
// the item is failed at max_attempts.
func TestWorkRoomCountsAttempt(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	mnt := testenv.LoopMount(t, "ext4", 64<<20, "-b", "4096", "-m", "0")
	h.root = filepath.Join(mnt, "table")
	h.must(0, "", "init", "--shards", "4")
	h.workAdd("room", 1)
	// Leave 4 MiB free: four times the floor of a 64 MiB filesystem (1 MiB).
	if out, err := exec.Command("sh", "-c", fmt.Sprintf(
		`avail=$(df -B1 --output=avail %s | tail -n 1); fallocate -l $((avail - 4194304)) %s/filler.0`, mnt, mnt)).CombinedOutput(); err != nil {
		t.Fatalf("fallocate: %v\n%s", err, out)
	}
	w := startOutageWorker(t, h, "worker.err", "work", "--max-attempts", "2", "--ttl", "5", "--renew-interval", "1", "--", "sh", "-c", `echo "no such input" >&2; exit 3`)
	testenv.WaitFor(t, "lease work ending", holdWait, func() bool { return !w.running() })
	if w.code != 0 || strings.Contains(w.errText(), "no attempt counted") || !strings.Contains(w.errText(), "failed after 2 attempts") {
		t.Errorf("lease work: exit %d\n%s\nwant exit 0, the item failed after 2 attempts", w.code, w.errText())
	}
	if st, n := attemptsOf(t, h); st != "failed" || n != 2 {
		t.Errorf("%s, attempts %d; want failed, attempts 2", st, n)
	}
}

// TestRunNextWaitsForRoom: lease run --next --wait claims nothing while
// the table's filesystem has no room, though a claim would succeed: 512
// KiB free of 64 MiB, below the floor of 1 MiB (no run could write its
// findings there). It says it waits, runs nothing, and claims and runs the
// item once there is room. Before, it claimed at once and ran CMD.
func TestRunNextWaitsForRoom(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	mnt := testenv.LoopMount(t, "ext4", 64<<20, "-b", "4096", "-m", "0")
	h.root = filepath.Join(mnt, "table")
	h.must(0, "", "init", "--shards", "4")
	h.workAdd("floor", 1)
	if out, err := exec.Command("sh", "-c", fmt.Sprintf(
		`avail=$(df -B1 --output=avail %s | tail -n 1); fallocate -l $((avail - 524288)) %s/filler.0`, mnt, mnt)).CombinedOutput(); err != nil {
		t.Fatalf("fallocate: %v\n%s", err, out)
	}
	ran := filepath.Join(h.dir, "ran")
	w := startOutageWorker(t, h, "run.err", "run", "--next", "--wait", "--complete", "--", "sh", "-c", `echo "$LEASE_ID" > "$0"`, ran)
	testenv.WaitFor(t, "lease run waiting for room", holdWait, func() bool { return strings.Contains(w.errText(), "has no room") || !w.running() })
	if _, err := os.Stat(ran); err == nil || !w.running() {
		t.Fatalf("lease run ran CMD (or ended) with no room: exit %d\n%s", w.code, w.errText())
	}
	testenv.Unfill(mnt)
	testenv.WaitFor(t, "lease run ending once there is room", holdWait, func() bool { return !w.running() })
	if _, err := os.Stat(ran); err != nil || w.code != 0 {
		t.Errorf("lease run after room returned: exit %d, CMD ran: %v\n%s", w.code, err == nil, w.errText())
	}
	if st, n := attemptsOf(t, h); st != "done" || n != 0 {
		t.Errorf("%s, attempts %d; want done", st, n)
	}
}
