package safety

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
)

// transientFault is one kind of error a network filesystem's client gives
// while another client replaces a file, and the calls it can hit.
type transientFault struct {
	name string
	err  func(op seam.Op, name string) error
	hits func(op seam.Op, name string) bool
}

var transientFaults = []transientFault{
	{"ESTALE", func(op seam.Op, name string) error {
		return &fs.PathError{Op: string(op), Path: name, Err: syscall.ESTALE}
	},
		func(seam.Op, string) bool { return true }},
	{"read vanished after open", func(op seam.Op, name string) error {
		return &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: ENOENT", seam.ErrVanished)}
	}, func(op seam.Op, name string) bool { return op == seam.OpRead }},
	// A record's create without replacing answering EEXIST although no
	// record is there: what a client's stale negative cache can make of a
	// create; the retry must read again and create again.
	{"EEXIST on a record's create", func(op seam.Op, name string) error {
		return &fs.PathError{Op: "rename", Path: name, Err: syscall.EEXIST}
	}, func(op seam.Op, name string) bool { return op == seam.OpRenameNoReplace && anyRecord(name) }},
}

// anyRecord reports whether name is a work, target or group record.
func anyRecord(name string) bool {
	return isRecordPath(name, leasefmt.Work) || isRecordPath(name, leasefmt.Target) || isRecordPath(name, leasefmt.Group)
}

// runWithTransient runs sc from base with f injected at call at (counting
// only the calls f can hit) once, or from there on when sticky.
func runWithTransient(sc *Scenario, base *Tree, f transientFault, at int, sticky bool) *faultRun {
	fr := &faultRun{rec: NewRecorder(base)}
	var mu sync.Mutex
	n := 0
	hook := func(op seam.Op, name string) error {
		if !f.hits(op, name) {
			return nil
		}
		mu.Lock()
		k := n
		n++
		mu.Unlock()
		if k == at || sticky && k > at {
			err := f.err(op, name)
			fr.rec.Injected(op, name, err)
			mu.Lock()
			fr.fired++
			if bestEffort(op, name) {
				fr.cleanup++
			}
			mu.Unlock()
			return err
		}
		return nil
	}
	fr.run = &Run{FS: seam.WithHook(fr.rec, hook), Rec: fr.rec, calls: fr.rec.NumCalls, state: fr.rec.Snapshot}
	s := *sc
	s.Writers = 1
	fr.openErr = fr.run.start(&s)
	return fr
}

// TestTransientFaults injects, at every call each can hit, the transient
// errors the engine retries per record (durable.Retry): ESTALE, a read that
// fails after its open (seam.ErrVanished), and EEXIST from a record's
// create without replacing. Once: the retry must cure it where it hit a
// retried step, so the command exits as without the fault with the same
// acknowledgements, and where it hit a step that is not retried (a
// directory fsync) the command exits 4; nothing else. Sticky: the tries run
// out and the command exits 4. Either way the fault checks of
// TestFaultInjection hold: G5, nothing acknowledged lost by a crash right
// after, and fsck --repair of what is left gives a clean table with every
// acknowledged lease and no token backwards.
func TestTransientFaults(t *testing.T) {
	t.Parallel()
	x := explorer()
	var tally Tally
	var rows []string
	scenarios := append(append(WorkScenarios(), AbandonedScenarios()...), GroupScenarios()...)
	total, cured := 0, 0
	for _, sc := range scenarios {
		base, err := Base(sc)
		if err != nil {
			t.Fatal(err)
		}
		clean := runWithFault(sc, base, -1, 0, false)
		cleanExit, cleanAcks := clean.run.Exit(), len(clean.run.acks)
		for _, f := range transientFaults {
			hits := 0
			for _, c := range clean.rec.Calls() {
				if f.hits(c.Op, c.Name) {
					hits++
				}
			}
			step := 1
			switch {
			case isSample():
				step = max(1, hits/6) // about 6 points of each scenario and fault
			case !isLong() && hits > 48:
				step = 3
			}
			n, ok := 0, 0
			for at := 0; at < hits; at += step {
				for _, sticky := range []bool{false, true} {
					fr := runWithTransient(sc, base, f, at, sticky)
					if fr.fired == 0 {
						continue
					}
					n++
					where := fmt.Sprintf("%s: %s %s at call %d", sc.Name, f.name, map[bool]string{false: "once", true: "sticky"}[sticky], at)
					var vs []string
					code := fr.run.Exit()
					switch {
					case fr.fired == fr.cleanup:
					case !sticky && code == cleanExit && len(fr.run.acks) == cleanAcks:
						ok++
					case code != 4:
						vs = append(vs, fmt.Sprintf("exit status %d with %d acks, want the clean run's %d with %d acks (cured by a retry) or 4", code, len(fr.run.acks), cleanExit, cleanAcks))
					}
					vs = append(vs, transientChecks(x, sc, base, fr)...)
					if sc.Group && !sticky && code == 4 {
						vs = append(vs, g9(base, fr)...)
					}
					for _, v := range vs {
						tally.Add(where + ": " + v)
					}
				}
			}
			total += n
			cured += ok
			if n > 0 {
				rows = append(rows, fmt.Sprintf("| %s | %s | %d | %d |", sc.Name, f.name, n, ok))
			}
		}
	}
	report(t, &tally)
	if cured == 0 {
		t.Error("no injected transient error was cured by a retry: the retry paths were not exercised")
	}
	t.Logf("transient faults:\n| operation | fault | injected | cured by a retry |\n|---|---|---|---|\n%s\ntotal %d injected, %d cured", strings.Join(rows, "\n"), total, cured)
}

// transientChecks are the checks of faultViolations without its exit
// status rule (TestTransientFaults has its own).
func transientChecks(x *Explorer, sc *Scenario, base *Tree, fr *faultRun) []string {
	calls := fr.rec.Calls()
	v := g5(calls)
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

// otherCreator is a second client that creates a record just before this
// client's create of it without replacing lands.
type otherCreator struct {
	seam.FS
	target string
	data   []byte
	done   bool
}

func (o *otherCreator) RenameNoReplace(old, name string) error {
	if name == o.target && !o.done {
		o.done = true
		tmp := name + ".other"
		f, err := o.FS.CreateExcl(tmp)
		if err != nil {
			return err
		}
		f.Write(o.data)
		f.Sync()
		f.Close()
		if err := o.FS.Rename(tmp, name); err != nil {
			return err
		}
		if err := o.FS.SyncDir(path.Dir(name)); err != nil {
			return err
		}
	}
	return o.FS.RenameNoReplace(old, name)
}

// TestCreateRacesAnotherClient: a claim of IDs without records, where
// another client creates one of them between this claim's read and its
// create. The other client's record must survive in every crash state and
// the claim of it must be refused as held; the rest are granted.
func TestCreateRacesAnotherClient(t *testing.T) {
	sc := &Scenario{Name: "claim/raced create", Table: workTable(), Setup: setupWork, Writers: 1, Now: Now}
	base, err := Base(sc)
	if err != nil {
		t.Fatal(err)
	}
	victim := TestID(5)
	theirs := &leasefmt.Record{Kind: leasefmt.Work, ID: victim, Status: leasefmt.Leased, Owner: "node-b/other", Token: 4,
		ClaimedAt: Now, RenewedAt: Now, ExpiresAt: Now + 5000}
	data, err := leasefmt.Encode(theirs)
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(base)
	other := &otherCreator{FS: rec, data: data}
	st, err := commit.Open(Root, commit.Options{FS: other, Retry: Retry})
	if err != nil {
		t.Fatal(err)
	}
	other.target = st.RecordPath(leasefmt.Work, victim)
	res := at(st, Now).Claim(context.Background(), items(0, 4, 5, 6), "carol", TTL)
	if !other.done {
		t.Fatal("the other client never created its record: the claim did not create without replacing")
	}
	for _, r := range res {
		want := commit.OK
		if r.ID == victim {
			want = commit.Held
		}
		if r.Outcome != want {
			t.Errorf("%s: %s (%s), want %s", r.ID.Short(), r.Outcome.Reason(), r.Detail, want.Reason())
		}
	}
	rp := st.RecordPath(leasefmt.Work, victim)
	for _, state := range []*Tree{rec.Snapshot(), rec.Durable()} {
		got, _, ok := state.Get(rp)
		if !ok || string(got) != string(data) {
			t.Errorf("the other client's record is %q, want %q", trunc(got, 120), trunc(data, 120))
		}
	}
	states := 0
	for c := 0; c <= rec.NumCalls(); c++ {
		for _, s := range rec.CrashStates(c, 16, rand.New(rand.NewPCG(1, uint64(c)))) {
			states++
			if got, _, ok := s.Get(rp); ok && string(got) != string(data) {
				t.Fatalf("crash state after call %d: %s holds %q, not the other client's record", c, rp, trunc(got, 120))
			}
		}
	}
	if states == 0 {
		t.Fatal("no crash states explored")
	}
	if errors.Is(res[2].Err(), durable.ErrAppeared) {
		t.Errorf("the refusal still carries the create's error: %v", res[2].Err())
	}
}
