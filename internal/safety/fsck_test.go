package safety

import (
	"context"
	"fmt"
	iofs "io/fs"
	"slices"
	"syscall"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/leasefmt"
)

// TestFsckReleasesTornGroupCleanly: a group-claim over the targets of an
// expired group crashes after its manifest's rename persisted but none of
// its targets' (their directories were not fsynced yet). fsck --repair
// releases the new group; a second fsck must then find the table clean,
// and the expired group must not read as overlapping the new one.
func TestFsckReleasesTornGroupCleanly(t *testing.T) {
	sc := &Scenario{Name: "torn group-claim", Table: workTable(), Setup: setupGroups, Now: Now}
	base, err := Base(sc)
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(base)
	st, err := commit.Open(Root, commit.Options{FS: rec})
	if err != nil {
		t.Fatal(err)
	}
	ts := targets(204, 208)
	slices.Sort(ts)
	gid := groups.ID(ts)
	m := &leasefmt.Record{Kind: leasefmt.Group, ID: gid, Status: leasefmt.Leased, Owner: "carol", Token: 2,
		ClaimedAt: Now, RenewedAt: Now, ExpiresAt: Now + TTL, Targets: ts}
	unlock, err := st.Lock(context.Background(), leasefmt.Group, gid)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteOne(m); err != nil {
		t.Fatal(err)
	}
	unlock()
	fs := NewRecorder(rec.Snapshot())
	if err := (Fsck{}).Repair(fs, Now); err != nil {
		t.Fatalf("fsck --repair: %v", err)
	}
	if n, err := (Fsck{}).Check(NewRecorder(fs.Snapshot()), Now); n != 0 || err != nil {
		knownFailure(t, "F1", "fsck after fsck --repair finds %d errors: %v", n, err)
	}
}

// knownFailure skips t with the known finding id when failing, except in
// strict mode, where it fails.
func knownFailure(t *testing.T, id string, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if strict() {
		t.Fatalf("known finding %s: %s", id, msg)
	}
	t.Skipf("known finding %s (reported, see RESULTS.md): %s", id, msg)
}

// TestFsckKeepsLiveGroupOnTornRenew: a group-renew that crashed with one
// target renewed and the rest not is a group whose holder still holds it
// until the old expiry; fsck --repair must leave it live for that holder.
func TestFsckKeepsLiveGroupOnTornRenew(t *testing.T) {
	sc := &Scenario{Name: "torn group-renew", Table: workTable(), Setup: setupGroups, Now: Now}
	base, err := Base(sc)
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(base)
	st, err := commit.Open(Root, commit.Options{FS: rec})
	if err != nil {
		t.Fatal(err)
	}
	one := TestID(200)
	cur, err := st.Read(context.Background(), leasefmt.Target, one)
	if err != nil || cur == nil {
		t.Fatalf("target: %v %v", cur, err)
	}
	next := cur.Clone()
	next.RenewedAt, next.ExpiresAt = Now, Now+TTL
	unlock, _ := st.Lock(context.Background(), leasefmt.Target, one)
	if err := st.WriteOne(next); err != nil {
		t.Fatal(err)
	}
	unlock()
	fs := NewRecorder(rec.Snapshot())
	if err := (Fsck{}).Repair(fs, Now); err != nil {
		t.Fatalf("fsck --repair: %v", err)
	}
	st2, err := commit.Open(Root, commit.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st2.Read(context.Background(), leasefmt.Group, groupG1)
	if err != nil || m == nil {
		t.Fatalf("manifest after repair: %v %v", m, err)
	}
	if m.Token != 1 || !m.Live(Now) || m.ExpiresAt < T0+HeldTTL {
		knownFailure(t, "F2", "group G1, acknowledged live until %v, is %s token %d until %v after fsck --repair", T0+HeldTTL, m.Status, m.Token, m.ExpiresAt)
	}
}

// TestFsckReportsIOErrors: an I/O error while fsck reads the table must
// make it exit with the operational bit (8), never report clean.
func TestFsckReportsIOErrors(t *testing.T) {
	base, err := Base(&Scenario{Name: "work", Table: workTable(), Setup: setupWork, Now: Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"work", "targets", "groups", "public", "stage"} {
		rec := NewRecorder(base)
		f := seam.WithHook(rec, func(op seam.Op, n string) error {
			if op == seam.OpLstat && n == name {
				return &iofs.PathError{Op: "lstat", Path: n, Err: syscall.EIO}
			}
			return nil
		})
		sum, _, err := runFsck(f, Now, false)
		if err == nil && sum.Exit()&8 == 0 {
			knownFailure(t, "F3", "lstat %s failed with EIO, fsck exits %d", name, sum.Exit())
		}
	}
}

// TestConcurrentRepairs runs the scenario of two fsck --repair at once
// (their calls interleaved) several times: each run must exit 0 or 1 (the
// second repair waits for the first on the repair lock), leave a table
// that a check finds clean with every staged file kept, and every crash
// state of it must recover (TestCrashStates explores it with the others;
// here once more on its own, so that a failure names it).
func TestConcurrentRepairs(t *testing.T) {
	t.Parallel()
	var sc *Scenario
	for _, s := range FsckScenarios() {
		if s.Name == ConcurrentRepairs {
			sc = s
		}
	}
	if sc == nil {
		t.Fatalf("no scenario %q", ConcurrentRepairs)
	}
	base, err := Base(sc)
	if err != nil {
		t.Fatal(err)
	}
	x := explorer()
	for i := range sized(3, 10, 10) {
		run, _, err := Record(sc, nil)
		if err != nil {
			t.Fatal(err)
		}
		if code := run.Exit(); code&^1 != 0 {
			t.Fatalf("run %d: two repairs at once exit %d (or-ed), want 0 or 1", i, code)
		}
		if n, err := (Fsck{}).Check(NewRecorder(run.Rec.Snapshot()), Now); n != 0 || err != nil {
			t.Fatalf("run %d: fsck after the two repairs finds %d errors: %v", i, n, err)
		}
		chk := newChecker(x, sc, base, run.acks, run.Rec.Written(), run.Rec.Calls())
		for _, v := range chk.check(run.Rec.Snapshot(), run.Rec.NumCalls(), true) {
			t.Errorf("run %d, as left: %s", i, v)
		}
	}
	res, err := sampleBudget(x).Explore(sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Error(v)
	}
	t.Logf("%d calls, %d crash states checked", res.Calls, res.States)
}
