package safety

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// faultRun is one run of a scenario with a fault injected through
// seam.WithHook.
type faultRun struct {
	rec     *Recorder
	run     *Run
	fired   int // calls failed by the hook
	cleanup int // of those, best-effort removals: emptied staging directories, queue entries of done items
	reads   int // of those, reads: read, lstat, readdir
	openErr error
}

// readFailedHarmlessly reports whether fr's fault, injected once, was a
// read that left the run as the clean run ended (same exit status, same
// acknowledgements): a claim from the queue that cannot read a candidate's
// record before taking its lock passes it over for the next one, and a
// read is no write to be reported failed.
func readFailedHarmlessly(fr, clean *faultRun, sticky bool) bool {
	return !sticky && fr.fired == 1 && fr.reads == 1 && fr.run.Exit() == clean.run.Exit() && len(fr.run.acks) == len(clean.run.acks)
}

// stageDirRemoval reports whether a call is the best-effort removal of a
// staging directory stage/ID.TOKEN once its result was published: garbage
// collection outside the record protocol, whose failure changes no
// outcome (lease fsck removes what is left).
func stageDirRemoval(op seam.Op, name string) bool {
	dir, base := path.Split(name)
	_, _, ok := layout.ParseStageName(base)
	return op == seam.OpRemove && dir == layout.StageDir+"/" && ok
}

// queueEntryRemoval: the removal of a queue entry after its item is done,
// which need not succeed (docs/design.md#queue: an entry met for a done record is
// removed then; the queue invariant and fsck check that one is).
// markerRemoval reports whether a call removes a status marker, which is
// only a hint of lease status --summary (docs/design.md#statistics): its
// failure changes no outcome.
func markerRemoval(op seam.Op, name string) bool {
	_, _, _, ok := layout.ParseMarkerName(path.Base(name))
	return op == seam.OpRemove && ok
}

func queueEntryRemoval(op seam.Op, name string) bool {
	_, ok := queueEntryID(name)
	return op == seam.OpRemove && ok
}

// tallyCall reports whether a call keeps the tally or a status marker
// (docs/design.md#tally): a link, a lookup, a removal, a directory made in
// tally/, a marker's link beside its record, the lookup of a queue entry
// before a flag. A writer that cannot keep the tally untrusts it instead of
// failing: its failure changes no outcome (the summary then reads the
// shards, and fsck --repair trusts the tally again).
func tallyCall(op seam.Op, name string) bool {
	if name == layout.TallyDir || strings.HasPrefix(name, layout.TallyDir+"/") {
		return true
	}
	if _, _, _, ok := layout.ParseMarkerName(path.Base(name)); ok {
		return true
	}
	_, ok := queueEntryID(name)
	return op == seam.OpLstat && ok
}

// bestEffort reports whether a failed call is one whose failure changes no
// outcome.
func bestEffort(op seam.Op, name string) bool {
	return stageDirRemoval(op, name) || queueEntryRemoval(op, name) || markerRemoval(op, name) || tallyCall(op, name) || heldCall(name)
}

// heldCall reports whether a call is on held/ or one of its names: the
// names of the leases in flight are hints for the claims from the queue
// (commit/held.go), made, renamed and removed best effort; a held/ name
// that cannot be made leaves its item to be found in the queue.
func heldCall(name string) bool {
	return name == layout.HeldDir || strings.HasPrefix(name, layout.HeldDir+"/")
}

// hooked reports whether a call of the Recorder's log went through the
// seam's hook, so that a fault can be injected at it: the capability calls
// it logs (seam.OpPrepareLock, seam.OpSyncfs) are found past the hook.
func hooked(c Call) bool { return c.Op != seam.OpPrepareLock && c.Op != seam.OpSyncfs }

// hookedCalls counts the calls of calls that went through the hook.
func hookedCalls(calls []Call) int {
	n := 0
	for _, c := range calls {
		if hooked(c) {
			n++
		}
	}
	return n
}

// runWithFault runs sc from base, failing call at (counting from 0) with
// errno once, or, when sticky, every call from there on.
func runWithFault(sc *Scenario, base *Tree, at int, errno syscall.Errno, sticky bool) *faultRun {
	return runWithFaultWrap(sc, base, at, errno, sticky, nil)
}

func runWithFaultWrap(sc *Scenario, base *Tree, at int, errno syscall.Errno, sticky bool, wrap func(seam.FS) seam.FS) *faultRun {
	fr := &faultRun{rec: NewRecorder(base)}
	var mu sync.Mutex
	n := 0
	hook := func(op seam.Op, name string) error {
		mu.Lock()
		k := n
		n++
		mu.Unlock()
		if k == at || sticky && k > at {
			err := &fs.PathError{Op: string(op), Path: name, Err: errno}
			fr.rec.Injected(op, name, err)
			mu.Lock()
			fr.fired++
			if bestEffort(op, name) || fr.run != nil && fr.run.inCleanup() {
				fr.cleanup++
			}
			if op == seam.OpRead || op == seam.OpLstat || op == seam.OpReadDir {
				fr.reads++
			}
			mu.Unlock()
			return err
		}
		return nil
	}
	f := seam.WithHook(fr.rec, hook)
	if wrap != nil {
		f = wrap(f)
	}
	fr.run = &Run{FS: f, Rec: fr.rec, calls: fr.rec.NumCalls, state: fr.rec.Snapshot}
	s := *sc
	s.Writers = 1 // one call order, so call i is the same call in every run
	fr.openErr = fr.run.start(&s)
	return fr
}

// g5 checks that every rename that succeeded was followed by an attempt to
// fsync its destination directory before the operation returned.
func g5(calls []Call) []string {
	var v []string
	for i, c := range calls {
		if c.Err != nil || (c.Op != seam.OpRename && c.Op != seam.OpRenameNoReplace) {
			continue
		}
		dir := path.Dir(c.Name)
		if dir == "." {
			dir = ""
		}
		synced := false
		for _, d := range calls[i+1:] {
			if d.Op == seam.OpSyncDir && strings.Trim(d.Name, "/") == dir {
				synced = true
				break
			}
		}
		if !synced {
			v = append(v, fmt.Sprintf("G5: %s into %s/ succeeded, and %s/ was never fsynced afterwards", c.Op, dir, dir))
		}
	}
	return v
}

// TestFaultInjection fails every call of every work operation with EIO,
// ENOSPC and EINVAL, once and from then on, and checks: the command would
// exit 4; nothing reported as done is lost by a crash right after (only
// durable state survives); G5; and fsck --repair of the state left, and of
// the durable state, gives a clean table with every acknowledged lease.
func TestFaultInjection(t *testing.T) {
	t.Parallel()
	x := explorer()
	errnos := []syscall.Errno{syscall.EIO, syscall.ENOSPC, syscall.EINVAL}
	points := 0
	var rows []string
	var tally Tally
	for _, sc := range allScenarios() {
		base, err := Base(sc)
		if err != nil {
			t.Fatal(err)
		}
		clean := runWithFault(sc, base, -1, 0, false)
		calls := hookedCalls(clean.rec.Calls())
		if clean.run.Exit() == 4 {
			t.Fatalf("%s: exit 4 without a fault", sc.Name)
		}
		step := 1
		switch {
		case isSample():
			step = max(1, calls/8) // about 8 fault points of each scenario
		case !isLong() && calls > 64:
			step = 3 // the big batches: every third call by default, every call with -long
		}
		n := 0
		for at := 0; at < calls; at += step {
			for _, errno := range errnos {
				for _, sticky := range []bool{false, true} {
					mode := "once"
					if sticky {
						mode = "sticky"
					}
					fr := runWithFault(sc, base, at, errno, sticky)
					if fr.fired == 0 {
						continue
					}
					n++
					where := fmt.Sprintf("%s: %v %s at call %d", sc.Name, errno, mode, at)
					vs := faultViolations(x, sc, base, fr)
					if readFailedHarmlessly(fr, clean, sticky) {
						vs = slices.DeleteFunc(vs, func(v string) bool { return strings.HasPrefix(v, "exit status") })
					}
					if sc.Group && !sticky {
						vs = append(vs, g9(base, fr)...)
					}
					for _, v := range vs {
						tally.Add(where + ": " + v)
					}
				}
			}
		}
		points += n
		rows = append(rows, fmt.Sprintf("| %s | %d | %d |", sc.Name, calls, n))
	}
	report(t, &tally)
	t.Logf("fault points:\n| operation | calls | faults injected |\n|---|---|---|\n%s\ntotal %d", strings.Join(rows, "\n"), points)
}

func faultViolations(x *Explorer, sc *Scenario, base *Tree, fr *faultRun) []string {
	var v []string
	switch code := fr.run.Exit(); {
	case fr.fired == fr.cleanup:
		// Only the best-effort cleanup failed: the outcome stands, and the
		// crash checks below still apply.
	case sc.NoStore && code&(4|8) == 0: // fsck(8): errors left or an operational error
		v = append(v, fmt.Sprintf("fsck exit status %d, want 4 or 8 set; %d acks", code, len(fr.run.acks)))
	case !sc.NoStore && code != 4:
		v = append(v, fmt.Sprintf("exit status %d, want 4 (I/O error); %d acks", code, len(fr.run.acks)))
	}
	calls := fr.rec.Calls()
	v = append(v, g5(calls)...)
	chk := newChecker(x, sc, base, fr.run.acks, fr.rec.Written(), calls)
	n := len(calls)
	for _, s := range chk.check(fr.rec.Durable(), n, true) {
		v = append(v, "crash right after (durable state only): "+s)
	}
	for _, s := range chk.check(fr.rec.Snapshot(), n, true) {
		v = append(v, "no crash (state as left): "+s)
	}
	return v
}

// swallowSyncDir hides directory fsync errors, as a careless engine would.
type swallowSyncDir struct{ seam.FS }

func (s swallowSyncDir) SyncDir(name string) error {
	s.FS.SyncDir(name)
	return nil
}

// TestFaultHarnessFindsSwallowedErrors: an engine that ignores a failed
// directory fsync reports unsynced records as renewed; the checks of
// TestFaultInjection must catch it.
func TestFaultHarnessFindsSwallowedErrors(t *testing.T) {
	sc := scenario("renew-batch")
	base, err := Base(sc)
	if err != nil {
		t.Fatal(err)
	}
	clean := runWithFault(sc, base, -1, 0, false)
	found := map[string]bool{}
	at := -1 // the hook's count of the call
	for _, c := range clean.rec.Calls() {
		if !hooked(c) {
			continue
		}
		if at++; c.Op != seam.OpSyncDir {
			continue
		}
		fr := runWithFaultWrap(sc, base, at, syscall.EIO, false, func(f seam.FS) seam.FS { return swallowSyncDir{f} })
		for _, v := range faultViolations(explorer(), sc, base, fr) {
			switch {
			case strings.HasPrefix(v, "exit status"):
				found["exit"] = true
			case strings.Contains(v, "acknowledged"):
				found["lost"] = true
			}
		}
	}
	if !found["exit"] || !found["lost"] {
		t.Fatalf("swallowed fsync errors: found %v, want both a wrong exit status and a lost acknowledged renewal", found)
	}
}

// g9: after a group operation failed at one call (the fault does not
// repeat, so the restore can work), every target and manifest is as it
// was: the group is all or nothing.
func g9(base *Tree, fr *faultRun) []string {
	if fr.run.Exit() != 4 || len(fr.run.acks) > 0 {
		return nil
	}
	var v []string
	now := fr.rec.Snapshot()
	was, is := records(base), records(now)
	for p, data := range is {
		if kindOf(p) == leasefmt.Work {
			continue
		}
		if old, ok := was[p]; !ok || string(old) != string(data) {
			v = append(v, fmt.Sprintf("G9: %s changed by a failed group operation: %q", p, trunc(data, 120)))
		}
	}
	for p := range was {
		if _, ok := is[p]; !ok && kindOf(p) != leasefmt.Work {
			v = append(v, fmt.Sprintf("G9: %s removed by a failed group operation", p))
		}
	}
	return v
}
