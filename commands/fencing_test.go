package commands_test

// The holes of issue "Fencing without holes", one test each, run as a user
// would: real lease processes (this test binary acting as lease), a real
// kill -9 at an exact call, real signals, real delays. This file holds the
// helpers and holes 1 to 3 (a kill between the move and done, the clock
// read under the lock, tokens across fsck --repair); holes 4 and 6 are in
// fencing_run_test.go, hole 7, hole 8 and the error texts in
// fencing_cli_test.go.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// killAt is the environment variable of a lease process that must kill
// itself with SIGKILL just before a given call through the FS seam:
// "OP NAME", e.g. "fsyncdir public" (after the move of a publish, before
// public/ is fsynced and done is written).
const killAt = "LEASE_TEST_KILL_AT"

// installKillPoint arms killAt in a test binary acting as lease.
func installKillPoint() {
	spec := os.Getenv(killAt)
	if spec == "" {
		return
	}
	op, prefix, _ := strings.Cut(spec, " ")
	commands.SetWrapFS(func(f seam.FS) seam.FS {
		return seam.WithHook(f, func(o seam.Op, name string) error {
			if string(o) == op && strings.HasPrefix(name, prefix) {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Hour)
			}
			return nil
		})
	})
}

// leaseWithEnv runs lease to the end with extra environment.
func (h *holdTable) leaseWithEnv(env []string, stdin string, args ...string) holdResult {
	h.t.Helper()
	cmd := h.command(args...)
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errb
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	return holdResult{args, holdExit(h.t, cmd), out.String(), errb.String()}
}

func (h *holdTable) stageFile(id leasefmt.ID, token int64, name, data string) {
	h.t.Helper()
	dir := filepath.Join(h.root, filepath.FromSlash(layout.StagePath(id, token)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// publicFiles lists ROOT/public/.
func (h *holdTable) publicFiles() map[string]string {
	h.t.Helper()
	out := map[string]string{}
	ents, err := os.ReadDir(filepath.Join(h.root, "public"))
	if err != nil {
		h.t.Fatal(err)
	}
	for _, e := range ents {
		data, _ := os.ReadFile(filepath.Join(h.root, "public", e.Name()))
		out[e.Name()] = string(data)
	}
	return out
}

// rawRecord reads the work record of id from disk.
func (h *holdTable) rawRecord(id leasefmt.ID) *leasefmt.Record {
	h.t.Helper()
	st, err := commit.Open(h.root, commit.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.Read(context.Background(), leasefmt.Work, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return rec
}

// waitPast sleeps until the system clock is past t.
func waitPast(t float64) {
	for d := time.Until(time.UnixMicro(int64(t * 1e6))); d > 0; d = time.Until(time.UnixMicro(int64(t * 1e6))) {
		time.Sleep(d + 10*time.Millisecond)
	}
}

// Hole 1: complete --publish killed after the move into public/ but before
// done. The next claim of the expired record must roll it forward (done,
// nothing claimed, nothing published twice), not take it over; killed
// before the move, the claim rolls it back and grants the next token, whose
// publish then publishes exactly one result.
func TestFenceKillBetweenMoveAndDone(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	id := holdID("kill-mid-publish")
	h.must(0, "", "claim", "--ttl", "1", string(id))
	h.stageFile(id, 1, "result.txt", "first holder\n")
	r := h.leaseWithEnv([]string{killAt + "=fsyncdir public"}, string(id)+" 1\n", "complete", "--publish", "result.txt")
	if r.code != 128+int(syscall.SIGKILL) {
		t.Fatalf("the kill point did not fire: %s", r)
	}
	rec := h.rawRecord(id)
	if rec.Status != leasefmt.Committing || rec.Publish != "result.txt" {
		t.Fatalf("after the kill the record is %+v, want committing with publish", rec)
	}
	if got := h.publicFiles(); len(got) != 1 {
		t.Fatalf("after the kill public/ holds %v, want the moved result", got)
	}
	waitPast(rec.ExpiresAt + 0.2) // past expires_at + clock_skew (0.1 s)
	r = h.must(1, "", "claim", "--owner", "second", "--ttl", "30", string(id))
	if coreReasons(t, r.errOut)[id] != "done" || !strings.Contains(r.errOut, "rolled forward") {
		t.Fatalf("claim of an abandoned, moved publish: %s\nwant done (rolled forward)", r)
	}
	if rec := h.rawRecord(id); rec.Status != leasefmt.Done || rec.Token != 1 || rec.Publish != "result.txt" {
		t.Fatalf("after the claim the record is %+v, want done with token 1", rec)
	}
	if got := h.publicFiles(); len(got) != 1 || got["result.txt"] != "first holder\n" {
		t.Fatalf("public/ holds %v, want exactly the first holder's result", got)
	}
	if r := h.lease("", "fsck"); r.code != 0 {
		t.Fatalf("fsck after the roll forward: %s", r)
	}

	// Killed before the move: rolled back, claimed, published once.
	id2 := holdID("kill-before-move")
	h.must(0, "", "claim", "--ttl", "1", string(id2))
	h.stageFile(id2, 1, "result2.txt", "never published\n")
	r = h.leaseWithEnv([]string{killAt + "=rename-noreplace public"}, string(id2)+" 1\n", "complete", "--publish", "result2.txt")
	if r.code != 128+int(syscall.SIGKILL) {
		t.Fatalf("the kill point did not fire: %s", r)
	}
	rec = h.rawRecord(id2)
	waitPast(rec.ExpiresAt + 0.2)
	r = h.must(0, "", "claim", "--owner", "second", "--ttl", "30", string(id2))
	if r.out != string(id2)+" 2\n" {
		t.Fatalf("claim of an abandoned publish still staged: %s\nwant token 2", r)
	}
	h.stageFile(id2, 2, "result2.txt", "second holder\n")
	h.must(0, string(id2)+" 2\n", "complete", "--publish", "result2.txt")
	if got := h.publicFiles(); got["result2.txt"] != "second holder\n" || len(got) != 2 {
		t.Fatalf("public/ holds %v, want one result per ID, the second holder's for %s", got, id2.Short())
	}
	// The first holder's staging directory is debris (exit 0), swept
	// into lost+found/.
	if r := h.lease("", "fsck", "--repair"); r.code != 0 || !strings.Contains(r.out, "swept stale-stage") {
		t.Fatalf("fsck --repair of the first holder's staging directory: %s", r)
	}
	if r := h.lease("", "fsck"); r.code != 0 {
		t.Fatalf("fsck after one repair: %s", r)
	}
}

// slowReader returns its data after a delay: input that arrives late.
type slowReader struct {
	delay time.Duration
	data  io.Reader
	slept bool
}

func (s *slowReader) Read(p []byte) (int, error) {
	if !s.slept {
		time.Sleep(s.delay)
		s.slept = true
	}
	return s.data.Read(p)
}

func runSlow(t *testing.T, delay time.Duration, stdin string, args ...string) coreResult {
	t.Helper()
	var out, errb bytes.Buffer
	code := commands.Run(append([]string{"lease"}, args...), &slowReader{delay: delay, data: strings.NewReader(stdin)}, &out, &errb)
	return coreResult{code: code, out: out.String(), errOut: errb.String()}
}

// Hole 2: the clock is read under each record's lock, not once at process
// start: input that arrives late grants and renews from the time it is
// written, and does not complete a lease that ran out meanwhile.
func TestFenceClockReadUnderLock(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("late", 3)
	start := leasefmt.Now()
	r := runSlow(t, 1500*time.Millisecond, string(ids[0])+"\n", "claim", "--root", root, "--ttl", "1.2", "--clock-skew", "0.1", "-")
	if r.code != 0 || r.out != string(ids[0])+" 1\n" {
		t.Fatalf("late claim: %+v", r)
	}
	rec := coreRecord(t, root, ids[0])
	if rec.ClaimedAt < start+1.4 || math.Abs(rec.ExpiresAt-rec.ClaimedAt-1.2) > 1e-5 || rec.ExpiresAt <= leasefmt.Now()-0.3 {
		t.Fatalf("a claim whose input came 1.5 s late: claimed_at %v (start %v), expires_at %v: the clock was not read under the lock",
			rec.ClaimedAt, start, rec.ExpiresAt)
	}
	// renew-batch: a late renewal with --ttl 1 extends from when it is
	// written (it does not write a lease that is already over), and one
	// without --ttl keeps the lease's own duration.
	coreMust(t, 0, "", "claim", "--root", root, "--ttl", "100", string(ids[1]))
	r = runSlow(t, 1500*time.Millisecond, string(ids[1])+" 1\n", "renew-batch", "--root", root, "--ttl", "1", "--clock-skew", "0.1")
	rec = coreRecord(t, root, ids[1])
	if r.code != 0 || rec.RenewedAt < rec.ClaimedAt+1.4 || math.Abs(rec.ExpiresAt-rec.RenewedAt-1) > 1e-5 {
		t.Fatalf("late renewal: %+v; record %+v", r, rec)
	}
	coreMust(t, 0, string(ids[1])+" 1\n", "renew-batch", "--root", root, "--ttl", "100", "--clock-skew", "0.1")
	coreMust(t, 0, string(ids[1])+" 1\n", "renew-batch", "--root", root)
	rec = coreRecord(t, root, ids[1])
	if d := rec.ExpiresAt - rec.RenewedAt; d < 99.99 || d > 100.01 {
		t.Fatalf("a renewal without --ttl gave %v s, want the lease's own 100 s", d)
	}
	// complete: the lease expires while the input is late.
	coreMust(t, 0, "", "claim", "--root", root, "--ttl", "1", "--clock-skew", "0", string(ids[2]))
	r = runSlow(t, 1500*time.Millisecond, string(ids[2])+" 1\n", "complete", "--root", root, "--clock-skew", "0")
	if r.code != 1 || coreReasons(t, r.errOut)[ids[2]] != "expired" {
		t.Fatalf("late complete of a lease that ran out: %+v, want expired", r)
	}
	if rec := coreRecord(t, root, ids[2]); rec.Status != leasefmt.Leased {
		t.Fatalf("a late complete wrote %+v", rec)
	}
}

// Hole 3: a token never repeats across lease fsck --repair. A record with a
// readable token is replaced by a released record with that token; one
// with no readable token by a token no claim can have had. The old holder
// is fenced out either way.
func TestFenceTokenAfterQuarantine(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("quarantine", 2)
	bad := `{"schema":"lease.work/v1","id":"` + string(ids[0]) + `","status":"leased","owner":"","token":7,` +
		`"claimed_at":1000,"renewed_at":1000,"expires_at":2000}` + "\n"
	os.MkdirAll(filepath.Dir(corePath(root, ids[0])), 0o755)
	os.WriteFile(corePath(root, ids[0]), []byte(bad), 0o644)
	held := coreMust(t, 0, "", "claim", "--root", root, "--ttl", "100", string(ids[1])).out
	os.WriteFile(corePath(root, ids[1]), []byte("\x00garbage, no token here"), 0o644)
	r := coreMust(t, 1, "", "fsck", "--root", root, "--repair")
	if !strings.Contains(r.out, "token 7") {
		t.Errorf("the repair does not say it kept token 7:\n%s", r.out)
	}
	coreMust(t, 0, "", "fsck", "--root", root)
	r = coreMust(t, 0, "", "claim", "--root", root, "--ttl", "100", string(ids[0]), string(ids[1]))
	got := coreLines(t, r.out)
	if got[ids[0]] != "8" {
		t.Errorf("claim after quarantining token 7: token %s, want 8", got[ids[0]])
	}
	var tok int64
	fmt.Sscan(got[ids[1]], &tok)
	if tok <= 1 {
		t.Errorf("claim after quarantining an unreadable record: token %d, want one no earlier claim had", tok)
	}
	// The old holder of the unreadable record's token 1 is fenced out.
	for _, cmd := range []string{"verify", "renew-batch", "complete", "release"} {
		r := coreMust(t, 1, held, cmd, "--root", root)
		if coreReasons(t, r.errOut)[ids[1]] != "stale-token" {
			t.Errorf("%s by the old holder after the repair: %s", cmd, r)
		}
	}
}
