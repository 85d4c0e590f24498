package safety

// The checker of one scenario: what it needs (the base table, the calls,
// the acks, the versions written) and check, which checks one crash state
// before and after fsck --repair; the invariants it applies are in
// invariants.go.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/leasetool/lease/census"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// checker holds what the checks of one scenario need.
type checker struct {
	x        *Explorer
	sc       *Scenario
	base     *Tree
	calls    []Call
	acks     []Ack
	allowed  map[string]bool           // every complete content written, or in the base
	versions map[recKey][]*versionInfo // record versions written by the operation, in order
	baseRecs map[recKey]*leasefmt.Record
	planted  map[recKey]bool   // base records Scenario.Damage put there: never acknowledged to anyone
	staged   map[string][]byte // stage/ files of the base by path below stage/: never lost
	public   map[string][]byte // public/ files of the undamaged base: published, never unpublished

	cacheMu sync.Mutex
	cache   map[string]*leasefmt.Record // decoded record files by path and content; nil: invalid
}

func newChecker(x *Explorer, sc *Scenario, base *Tree, acks []Ack, written [][]byte, calls []Call) *checker {
	c := &checker{x: x, sc: sc, base: base, calls: calls, acks: acks,
		allowed: map[string]bool{}, versions: map[recKey][]*versionInfo{},
		baseRecs: map[recKey]*leasefmt.Record{}, staged: map[string][]byte{}, cache: map[string]*leasefmt.Record{}}
	base.Walk(func(p string, dir bool, data []byte) {
		if dir {
			return
		}
		c.allowed[string(data)] = true
		if k, r := decodeAny(data); r != nil && isRecordPath(p, k.kind) {
			c.baseRecs[k] = r
		}
		if strings.HasPrefix(p, layout.StageDir+"/") {
			c.staged[strings.TrimPrefix(p, layout.StageDir+"/")] = data
		}
	})
	for _, d := range written {
		c.allowed[string(d)] = true
		if k, r := decodeAny(d); r != nil {
			c.versions[k] = append(c.versions[k], &versionInfo{data: d, rec: r})
		}
	}
	c.planted = plantedRecords(sc, c.baseRecs)
	c.public = publicFiles(sc, base)
	return c
}

// publicFiles are the results in public/ of sc's starting table before
// any Damage: each was published by a complete --publish.
func publicFiles(sc *Scenario, base *Tree) map[string][]byte {
	t := base
	if sc.Damage != nil {
		undamaged := *sc
		undamaged.Damage = nil
		var err error
		if t, err = Base(&undamaged); err != nil {
			return nil
		}
	}
	out := map[string][]byte{}
	t.Walk(func(p string, dir bool, data []byte) {
		if name, ok := strings.CutPrefix(p, layout.PublicDir+"/"); ok && !dir {
			out[name] = data // a file result, or a file of a directory result
		}
	})
	return out
}

// plantedRecords are the base records that sc.Damage added or changed: a
// crash or another program left them, no holder was ever told they hold.
func plantedRecords(sc *Scenario, baseRecs map[recKey]*leasefmt.Record) map[recKey]bool {
	planted := map[recKey]bool{}
	if sc.Damage == nil {
		return planted
	}
	undamaged := *sc
	undamaged.Damage = nil
	t, err := Base(&undamaged)
	if err != nil {
		return planted
	}
	before := map[recKey]*leasefmt.Record{}
	t.Walk(func(p string, dir bool, data []byte) {
		if k, r := decodeAny(data); !dir && r != nil && isRecordPath(p, k.kind) {
			before[k] = r
		}
	})
	for k, r := range baseRecs {
		if b := before[k]; b == nil || !sameRecord(b, r) {
			planted[k] = true
		}
	}
	return planted
}

func (c *checker) callName(n int) string {
	if n == 0 {
		return "before the first call"
	}
	cl := c.calls[n-1]
	s := string(cl.Op) + " " + cl.Name
	if cl.Err != nil {
		s += " (failed)"
	}
	return s
}

// acksAt reports whether an ack was made exactly at call n (so a state
// seen at an earlier prefix has new obligations now).
func (c *checker) acksAt(n int) bool {
	for _, a := range c.acks {
		if a.call == n {
			return true
		}
	}
	return false
}

// Repair state error when the table is gone.
var errNoTable = errors.New("no table")

// check checks one crash state t, left by a crash after the first n calls.
func (c *checker) check(t *Tree, n int, claimAfter bool) []string {
	var v []string
	var acks []Ack
	for _, a := range c.acks {
		if a.call <= n {
			acks = append(acks, a)
		}
	}
	// 1. Before any repair, nothing torn reads as valid; nothing was
	// reported granted or renewed that was already over when reported.
	_, _, bad := c.validRecords(t, nil, "before repair", false)
	v = append(v, bad...)
	for _, a := range acks {
		if r := a.Record; r != nil && r.Status == leasefmt.Leased && a.at != 0 && r.ExpiresAt-c.skew() <= a.at {
			v = append(v, fmt.Sprintf("%s/%s: %s reported token %d until %v at %v, when it was already over", r.Kind.Dir(), r.ID, a.Op, r.Token, r.ExpiresAt, a.at))
		}
	}
	_, _, hasTable := t.Get(layout.TableFile)
	_, _, baseTable := c.base.Get(layout.TableFile)
	tableAcked := false
	for _, a := range acks {
		if a.Table != nil {
			tableAcked = true
		}
	}
	if !hasTable && (baseTable || tableAcked) {
		v = append(v, "TABLE is gone although it was durable or reported created")
	}
	fr := NewRecorder(t)
	if !hasTable && !baseTable {
		// The table was never reported created, and a crash left no TABLE:
		// fsck cannot know the shard counts of a table half made, and the
		// recovery is to run the operation again (lease init, or any
		// command that creates the table), which must finish it.
		if c.x.Repair == nil || c.sc.Reinit == nil {
			return v
		}
		if _, err := commit.Open(Root, commit.Options{FS: fr, Create: c.sc.Reinit}); err != nil {
			return append(v, fmt.Sprintf("re-running init after the crash: %v", err))
		}
		t = fr.Snapshot()
		fr = NewRecorder(t)
	}
	// 2. Repair.
	after := t
	if c.x.Repair != nil {
		if err := c.x.Repair.Repair(fr, c.sc.Now); err != nil {
			return append(v, fmt.Sprintf("fsck --repair: %v", err))
		}
		after = fr.Snapshot()
		errs, err := c.x.Repair.Check(NewRecorder(after), c.sc.Now)
		if err != nil || errs != 0 {
			v = append(v, fmt.Sprintf("fsck after repair still finds %d errors (%v)", errs, err))
		}
	}
	recs, _, bad := c.validRecords(after, fr.Written(), "after repair", true)
	v = append(v, bad...)
	// 3. Every acknowledged record, or a later version of it, is there; no
	// token went backwards; no valid record vanished.
	latest := map[recKey]Ack{}
	for _, a := range acks {
		if a.Record != nil {
			latest[recKey{a.Record.Kind, a.Record.ID}] = a
		}
	}
	for k, a := range latest {
		got := recs[k]
		if got == nil {
			v = append(v, fmt.Sprintf("%s: acknowledged by %s (token %d, %s) but missing after recovery", k, a.Op, a.Record.Token, a.Record.Status))
			continue
		}
		if msg := c.laterVersion(k, a.Record, got); msg != "" {
			v = append(v, fmt.Sprintf("%s: acknowledged by %s as token %d %s until %v; after recovery %s", k, a.Op, a.Record.Token, a.Record.Status, a.Record.ExpiresAt, msg))
		}
	}
	for _, a := range acks {
		if r := a.Record; r != nil && r.Kind == leasefmt.Work && a.Op == "claim" && r.Token <= c.sc.MinToken[r.ID] {
			v = append(v, fmt.Sprintf("%s: claim granted token %d, not above token %d that an earlier holder had", recKey{r.Kind, r.ID}, r.Token, c.sc.MinToken[r.ID]))
		}
	}
	for k, b := range c.baseRecs {
		got := recs[k]
		if got == nil {
			v = append(v, fmt.Sprintf("%s: durable before the operation (token %d) but missing after recovery", k, b.Token))
			continue
		}
		if got.Token < b.Token {
			v = append(v, fmt.Sprintf("%s: token went back from %d to %d", k, b.Token, got.Token))
		}
	}
	for k, got := range recs {
		if msg := c.knownVersion(k, got); msg != "" {
			v = append(v, fmt.Sprintf("%s: %s", k, msg))
		}
	}
	// 4. Acknowledged holders still hold: one live holder per ID.
	v = append(v, c.holders(recs, acks)...)
	// 5. Groups: every live manifest's targets carry its token, and no
	// target is live under two groups.
	v = append(v, groupInvariant(recs, c.sc.Now)...)
	// 6. Published and staged results.
	v = append(v, c.published(after, recs, acks)...)
	// 7. Queued items stay queued until done.
	v = append(v, c.queuedInvariant(after, recs, acks)...)
	// 8. A fresh claim after recovery gets a larger token than any handed out.
	if claimAfter {
		v = append(v, c.claimAfter(after, acks)...)
	}
	// 9. The summary counts what the records say: from the tally (when it
	// is trusted after the repair) as from the shards' listings.
	if c.x.Repair != nil {
		v = append(v, c.censusInvariant(after, c.sc.Now)...)
	}
	return v
}

// goOn is the campaign going on from t, the state a kill left (no call's
// effect lost: Recorder.Killed), without a repair, long
// after every lease expired: a claim from the queue takes every item it
// can (dropping the entries of finished items it meets, as a worker's
// claim does), and the items granted are completed. A kill at any step
// must leave only debris: the summary then counts what the records say,
// and fsck without a repair finds no error.
func (c *checker) goOn(t *Tree) []string {
	later := c.sc.Now + 1e6
	fr := NewRecorder(t)
	st, err := commit.Open(Root, commit.Options{FS: fr, Writers: 1, Clock: func() float64 { return later }})
	if err != nil {
		return nil // no table to go on with (the checks after the repair say why)
	}
	ctx := context.Background()
	nx := st.ClaimNext(ctx, 1<<10, "campaign", 10, rand.New(rand.NewPCG(1, 2)))
	var granted []commit.Item
	got := map[leasefmt.ID]bool{}
	for _, r := range nx.Results {
		if r.Outcome == commit.OK {
			granted = append(granted, commit.Item{ID: r.ID, Token: r.Token})
			got[r.ID] = true
		}
	}
	// The items claimed by name (those of the operation, and the base's
	// records) are claimed by name again.
	ids := c.workIDs(c.acks)
	for k := range c.baseRecs {
		if k.kind == leasefmt.Work && !slices.Contains(ids, k.id) {
			ids = append(ids, k.id)
		}
	}
	slices.Sort(ids)
	var byName []commit.Item
	for _, id := range ids {
		if !got[id] {
			byName = append(byName, commit.Item{ID: id})
		}
	}
	for _, r := range st.Claim(ctx, byName, "campaign", 10) {
		if r.Outcome == commit.OK {
			granted = append(granted, commit.Item{ID: r.ID, Token: r.Token})
		}
	}
	var v []string
	for _, r := range st.Complete(ctx, granted) {
		if r.Outcome != commit.OK {
			v = append(v, fmt.Sprintf("the campaign going on: complete of work/%s token %d: %s: %s", r.ID, r.Token, r.Outcome.Reason(), r.Detail))
		}
	}
	st.Close()
	after := fr.Snapshot()
	for _, msg := range c.censusInvariant(after, later) {
		v = append(v, "the campaign going on without a repair: "+msg)
	}
	if errs, err := c.x.Repair.Check(NewRecorder(after), later); err != nil || errs != 0 {
		v = append(v, fmt.Sprintf("the campaign going on without a repair: fsck finds %d errors (%v)", errs, err))
	}
	return v
}

// censusInvariant compares the tally's census of t at now with the
// listing's.
func (c *checker) censusInvariant(t *Tree, now float64) []string {
	st, err := commit.Open(Root, commit.Options{FS: NewRecorder(t), Clock: func() float64 { return now }})
	if err != nil {
		return nil // no table to count (the checks above say why)
	}
	defer st.Close()
	ctx := context.Background()
	tally, err := census.Take(ctx, st, 1)
	if err != nil {
		return []string{fmt.Sprintf("census after recovery: %v", err)}
	}
	if tally.Method != census.MethodTally {
		return nil
	}
	listing, err := census.Listing(ctx, st, 1)
	if err != nil {
		return []string{fmt.Sprintf("listing census after recovery: %v", err)}
	}
	tally.Method = listing.Method
	if !reflect.DeepEqual(tally, listing) {
		return []string{fmt.Sprintf("after recovery the tally counts %+v, the records %+v", tally, listing)}
	}
	return nil
}

// skew is the clock skew of the scenario's stores (none: 0).
func (c *checker) skew() float64 { return 0 }
