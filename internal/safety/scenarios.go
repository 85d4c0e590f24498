package safety

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// TestID is the i-th ID of the test tables: a SHA-256 digest, as in use.
func TestID(i int) leasefmt.ID {
	s := sha256.Sum256([]byte(fmt.Sprintf("lease-safety-%d", i)))
	return leasefmt.ID(hex.EncodeToString(s[:]))
}

// The clocks of the scenarios: the starting table is built before T0 and
// operations run at Now.
const (
	T0  = 1000.0
	Now = 2000.0
	TTL = 100.0
	// HeldTTL makes the leases renewed by the scenarios live until 2050,
	// so that a renewal at Now (until 2100) extends them.
	HeldTTL = 1050.0
)

// The starting table of the work scenarios (4 work shards):
//
//	ID 0  held by alice, token 3, live until 6000
//	ID 1  expired (bob, token 1)
//	ID 2  released (token 1)
//	ID 3  done (token 1)
//	ID 4-7 no record
//	ID 8-11 held by bob, token 1, live until 2050
//	ID 12-43 held by erin, token 1, live until 2050 (the big batches)
//	ID 44-75 no record (the big claims)
//	stage/ID0.3/result.bin staged by alice (token 3 of ID 0)
//	stage/ID4.1/other.bin  staged by the next holder of ID 4 (token 1)
func workTable() *leasefmt.Table {
	return &leasefmt.Table{WorkShards: 4, TargetShards: 4, CreatedAt: T0}
}

// staged is a result staged by the holder of one token (SPEC §3.2).
type staged struct {
	id    int
	token int64
	name  string
	data  []byte
}

func (s staged) path() string { return path.Join(commit.StagePath(TestID(s.id), s.token), s.name) }

// Staged results of the starting table.
var stagedFiles = []staged{
	{0, 3, "result.bin", []byte("fuzzer findings: 3 crashes\n")},
	{4, 1, "other.bin", []byte("another result\n")},
}

// stagedData is the content staged as name.
func stagedData(name string) []byte {
	for _, s := range stagedFiles {
		if s.name == name {
			return s.data
		}
	}
	return nil
}

// stageFile writes a staged result through fsys, as a holder's command
// would (not durably: lease complete --publish fsyncs it).
func stageFile(st *commit.Store, fsys commit.FS, s staged) error {
	if _, err := st.MakeStage(TestID(s.id), s.token); err != nil {
		return err
	}
	f, err := fsys.CreateExcl(s.path())
	if err != nil {
		return err
	}
	if _, err := f.Write(s.data); err != nil {
		return err
	}
	return f.Close()
}

func one(st *commit.Store, id leasefmt.ID, f func([]commit.Item) []commit.Result, tok int64) error {
	res := f([]commit.Item{{ID: id, Token: tok}})
	if res[0].Outcome != commit.OK {
		return fmt.Errorf("setup %s: %s %s", id.Short(), res[0].Outcome.Reason(), res[0].Detail)
	}
	return nil
}

func claimAt(st *commit.Store, id leasefmt.ID, owner string, now, ttl float64) error {
	return one(st, id, func(it []commit.Item) []commit.Result { return at(st, now).Claim(it, owner, ttl) }, 0)
}

func setupWork(st *commit.Store, fsys commit.FS) error {
	st.Writers = 1
	id := TestID
	for _, t := range []float64{100, 200} {
		if err := claimAt(st, id(0), "alice", t, 1); err != nil {
			return err
		}
	}
	if err := claimAt(st, id(0), "alice", T0, 5000); err != nil {
		return err
	}
	if err := claimAt(st, id(1), "bob", T0, 10); err != nil {
		return err
	}
	if err := claimAt(st, id(2), "bob", T0, 10); err != nil {
		return err
	}
	if err := one(st, id(2), func(it []commit.Item) []commit.Result { return at(st, T0+1).Release(it) }, 1); err != nil {
		return err
	}
	if err := claimAt(st, id(3), "bob", T0, 10); err != nil {
		return err
	}
	if err := one(st, id(3), func(it []commit.Item) []commit.Result { return at(st, T0+1).Complete(it) }, 1); err != nil {
		return err
	}
	for i := 8; i < 12; i++ {
		if err := claimAt(st, id(i), "bob", T0, HeldTTL); err != nil {
			return err
		}
	}
	var big []commit.Item
	for i := 12; i < 44; i++ {
		big = append(big, commit.Item{ID: id(i)})
	}
	for _, r := range at(st, T0).Claim(big, "erin", HeldTTL) {
		if r.Outcome != commit.OK {
			return fmt.Errorf("setup %s: %s", r.ID.Short(), r.Outcome.Reason())
		}
	}
	for _, s := range stagedFiles {
		if err := stageFile(st, fsys, s); err != nil {
			return err
		}
	}
	return nil
}

func items(tok int64, ids ...int) []commit.Item {
	out := make([]commit.Item, len(ids))
	for i, n := range ids {
		out[i] = commit.Item{ID: TestID(n), Token: tok}
	}
	return out
}

func span(from, to int, tok int64) []commit.Item {
	var out []commit.Item
	for i := from; i < to; i++ {
		out = append(out, commit.Item{ID: TestID(i), Token: tok})
	}
	return out
}

func itemsTok(pairs ...int64) []commit.Item {
	var out []commit.Item
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, commit.Item{ID: TestID(int(pairs[i])), Token: pairs[i+1]})
	}
	return out
}

// publishRun completes id with token tok publishing name, as `lease
// complete --publish` does, and acknowledges what it reports.
func publishRun(r *Run, op string, it commit.Item, name string) {
	res, _ := at(r.Store, Now).CompletePublish(it, name)
	r.Outcome(res.Outcome)
	if res.Outcome == commit.OK {
		r.Ack(Ack{Op: op, Record: res.Record, Published: name, PublishedData: stagedData(name)})
	}
}

// WorkScenarios are the work-lease operations: init, claim, renew-batch,
// release, complete and complete --publish, alone and in sequence.
func WorkScenarios() []*Scenario {
	w := func(name string, writers int, run func(r *Run)) *Scenario {
		return &Scenario{Name: name, Table: workTable(), Setup: setupWork, Run: run, Writers: writers, Now: Now}
	}
	return []*Scenario{
		{Name: "init", Now: Now, Reinit: workTable(), Run: func(r *Run) {
			t := workTable()
			if _, err := commit.Open(Root, r.FS, t); err == nil {
				r.Ack(Ack{Op: "init", Table: t})
			} else {
				r.Outcome(commit.IOError)
			}
		}},
		w("claim", 1, func(r *Run) {
			r.AckResults("claim", at(r.Store, Now).Claim(items(0, 4, 5, 1, 2, 0, 3, 6), "carol", TTL))
		}),
		w("claim/4-writers", 4, func(r *Run) {
			r.AckResults("claim", at(r.Store, Now).Claim(items(0, 4, 5, 6, 7, 1, 2), "carol", TTL))
		}),
		w("claim --first 2", 1, func(r *Run) {
			r.AckResults("claim --first", at(r.Store, Now).ClaimFirst(items(0, 0, 4, 5, 6), 2, "carol", TTL))
		}),
		w("renew-batch", 1, func(r *Run) {
			r.AckResults("renew-batch", at(r.Store, Now).Renew(itemsTok(8, 1, 9, 1, 10, 1, 11, 1, 0, 2, 1, 1), TTL))
		}),
		w("renew-batch/4-writers", 4, func(r *Run) {
			r.AckResults("renew-batch", at(r.Store, Now).Renew(itemsTok(8, 1, 9, 1, 10, 1, 11, 1, 0, 3), TTL))
		}),
		w("release", 1, func(r *Run) {
			r.AckResults("release", at(r.Store, Now).Release(itemsTok(8, 1, 9, 1, 0, 1)))
		}),
		w("complete", 1, func(r *Run) {
			r.AckResults("complete", at(r.Store, Now).Complete(itemsTok(8, 1, 10, 1, 1, 1)))
		}),
		w("complete --publish", 1, func(r *Run) {
			publishRun(r, "complete --publish", commit.Item{ID: TestID(0), Token: 3}, "result.bin")
		}),
		w("claim/32", 1, func(r *Run) {
			r.AckResults("claim", at(r.Store, Now).Claim(span(44, 76, 0), "carol", TTL))
		}),
		w("renew-batch/32", 1, func(r *Run) {
			r.AckResults("renew-batch", at(r.Store, Now).Renew(span(12, 44, 1), TTL))
		}),
		w("renew-batch/32/8-writers", 8, func(r *Run) {
			r.AckResults("renew-batch", at(r.Store, Now).Renew(span(12, 44, 1), TTL))
		}),
		w("release/16", 1, func(r *Run) {
			r.AckResults("release", at(r.Store, Now).Release(span(12, 28, 1)))
		}),
		w("complete/16", 1, func(r *Run) {
			r.AckResults("complete", at(r.Store, Now).Complete(span(28, 44, 1)))
		}),
		w("claim+renew+complete --publish", 1, func(r *Run) {
			res := at(r.Store, Now).Claim(items(0, 4), "dave", TTL)
			r.AckResults("claim", res)
			if res[0].Outcome != commit.OK {
				return // a script stops at the first failure
			}
			rn := at(r.Store, Now+10).Renew([]commit.Item{{ID: TestID(4), Token: res[0].Token}}, TTL)
			r.AckResults("renew-batch", rn)
			if rn[0].Outcome != commit.OK {
				return
			}
			publishRun(r, "complete --publish", commit.Item{ID: TestID(4), Token: res[0].Token}, "other.bin")
		}),
	}
}

// Abandoned publishes (SPEC §3), for the claims that settle them:
//
//	ID 80 committing (bob, token 1, expired) publishing r80.bin, already
//	      moved to public/: a publisher killed between the move and done
//	ID 81 committing (bob, token 1, expired) publishing r81.bin, still
//	      staged: a publisher killed before the move
//	ID 84 committing (bob, token 1, live until 2050) publishing r84.bin,
//	      already moved: a complete killed after the move whose lease run
//	      then releases
var (
	staged84  = staged{84, 1, "r84.bin", []byte("result of 84\n")}
	staged80  = staged{80, 1, "r80.bin", []byte("result of 80\n")}
	staged81  = staged{81, 1, "r81.bin", []byte("result of 81, first holder\n")}
	staged81b = staged{81, 2, "r81.bin", []byte("result of 81, second holder\n")}
)

func setupAbandoned(st *commit.Store, fsys commit.FS) error {
	if err := setupWork(st, fsys); err != nil {
		return err
	}
	for _, s := range []staged{staged80, staged81, staged84} {
		ttl := 10.0
		if s.id == 84 {
			ttl = HeldTTL
		}
		if err := claimAt(st, TestID(s.id), "bob", T0, ttl); err != nil {
			return err
		}
		if err := stageFile(st, fsys, s); err != nil {
			return err
		}
		if err := fsys.SyncFile(s.path()); err != nil {
			return err
		}
		res := at(st, T0+2).Apply(leasefmt.Work, items(1, s.id), commit.CommittingDecision(s.name, 0))
		if res[0].Outcome != commit.OK {
			return fmt.Errorf("setup committing: %s %s", res[0].Outcome.Reason(), res[0].Detail)
		}
	}
	if err := st.DurableMove(staged80.path(), path.Join(commit.PublicDir, staged80.name)); err != nil {
		return err
	}
	return st.DurableMove(staged84.path(), path.Join(commit.PublicDir, staged84.name))
}

// lateClock is the clock of a batch whose input arrived late and whose
// filesystem is slow: half a second passes per call through the seam, so
// a 4 s lease written early in the batch is over before its directory is
// fsynced at the end.
func lateClock(calls int) float64 { return Now + float64(calls)*0.5 }

// AbandonedScenarios are claims that meet abandoned publishes, and
// batches whose clock moves while they run.
func AbandonedScenarios() []*Scenario {
	a := func(name string, run func(r *Run)) *Scenario {
		return &Scenario{Name: name, Table: workTable(), Setup: setupAbandoned, Run: run, Writers: 1, Now: Now}
	}
	return []*Scenario{
		a("claim/abandoned publish, moved", func(r *Run) {
			r.AckResults("claim", at(r.Store, Now).Claim(items(0, 80), "carol", TTL))
		}),
		a("claim/abandoned publish, staged, then publish", func(r *Run) {
			res := at(r.Store, Now).Claim(items(0, 81), "carol", TTL)
			r.AckResults("claim", res)
			if res[0].Outcome != commit.OK {
				return
			}
			if err := stageFile(r.Store, r.FS, staged81b); err != nil {
				r.Outcome(commit.IOError)
				return
			}
			pub, _ := at(r.Store, Now+1).CompletePublish(commit.Item{ID: TestID(81), Token: res[0].Token}, staged81b.name)
			r.Outcome(pub.Outcome)
			if pub.Outcome == commit.OK {
				r.Ack(Ack{Op: "complete --publish", Record: pub.Record, Published: staged81b.name, PublishedData: staged81b.data})
			}
		}),
		a("release/abandoned publish, moved", func(r *Run) {
			// lease run releasing after its complete was killed past the move
			r.AckResults("release", at(r.Store, Now).Release(itemsTok(84, 1)))
		}),
		a("release/abandoned publish, staged", func(r *Run) {
			r.AckResults("release", at(r.Store, Now).Release(itemsTok(81, 1)))
		}),
		{Name: "claim/8, late clock", Table: workTable(), Setup: setupWork, Writers: 1, Now: Now, Clock: lateClock,
			Run: func(r *Run) { r.AckResults("claim", r.Store.Claim(span(44, 52, 0), "carol", 4)) }},
		{Name: "renew-batch/8, late clock", Table: workTable(), Setup: setupWork, Writers: 1, Now: Now, Clock: lateClock,
			Run: func(r *Run) { r.AckResults("renew-batch", r.Store.Renew(span(12, 20, 1), 4)) }},
	}
}

func targets(from, to int) []leasefmt.ID {
	var out []leasefmt.ID
	for i := from; i < to; i++ {
		out = append(out, TestID(i))
	}
	return out
}

// The groups of the starting table of the group scenarios (4 target
// shards):
//
//	G1 = targets 200-203, held by alice, token 1, live until 2050
//	G2 = targets 204-205, bob, token 1, expired
//	G3 = targets 210-225, held by erin, token 1, live until 2050
//	targets 206-207 and 230-245 have no record
var (
	groupG1 = commit.GroupID(targets(200, 204))
	groupG2 = commit.GroupID(targets(204, 206))
	groupG3 = commit.GroupID(targets(210, 226))
)

func claimGroupAt(st *commit.Store, ts []leasefmt.ID, owner string, now, ttl float64) error {
	res, err := at(st, now).ClaimGroup(commit.GroupID(ts), ts, owner, ttl)
	if err != nil {
		return err
	}
	if res.Outcome != commit.OK {
		return fmt.Errorf("setup group %s: %s %s", res.ID.Short(), res.Outcome.Reason(), res.Detail)
	}
	return nil
}

func setupGroups(st *commit.Store, fsys commit.FS) error {
	st.Writers = 1
	if err := claimGroupAt(st, targets(200, 204), "alice", T0, HeldTTL); err != nil {
		return err
	}
	if err := claimGroupAt(st, targets(204, 206), "bob", T0, 10); err != nil {
		return err
	}
	return claimGroupAt(st, targets(210, 226), "erin", T0, HeldTTL)
}

// ackGroups acknowledges the manifests of the groups reported done; the
// group invariant (checked on every crash state) covers their targets.
func ackGroups(r *Run, op string, res []commit.GroupResult, err error) {
	if err != nil {
		r.Outcome(commit.IOError)
		return
	}
	for _, g := range res {
		r.Outcome(g.Outcome)
		if g.Outcome == commit.OK {
			r.Ack(Ack{Op: op, Record: g.Manifest})
		}
	}
}

func groupClaimRun(ts []leasefmt.ID) func(r *Run) {
	return func(r *Run) {
		res, err := at(r.Store, Now).ClaimGroup(commit.GroupID(ts), ts, "carol", TTL)
		ackGroups(r, "group-claim", []commit.GroupResult{res}, err)
	}
}

// GroupScenarios are the target-group operations: group-claim (over an
// expired group, refused by a held target, and of 16 targets),
// group-renew and group-release.
func GroupScenarios() []*Scenario {
	g := func(name string, run func(r *Run)) *Scenario {
		return &Scenario{Name: name, Table: workTable(), Setup: setupGroups, Run: run, Writers: 1, Now: Now, Group: true}
	}
	return []*Scenario{
		g("group-claim", groupClaimRun(targets(204, 208))),
		g("group-claim/held", groupClaimRun([]leasefmt.ID{TestID(203), TestID(206)})),
		g("group-claim/16", groupClaimRun(targets(230, 246))),
		g("group-renew", func(r *Run) {
			res, err := at(r.Store, Now).RenewGroups([]commit.Item{{ID: groupG1, Token: 1}, {ID: groupG2, Token: 1}}, TTL)
			ackGroups(r, "group-renew", res, err)
		}),
		g("group-renew/16", func(r *Run) {
			res, err := at(r.Store, Now).RenewGroups([]commit.Item{{ID: groupG3, Token: 1}}, TTL)
			ackGroups(r, "group-renew", res, err)
		}),
		g("group-release", func(r *Run) {
			res, err := at(r.Store, Now).ReleaseGroups([]commit.Item{{ID: groupG1, Token: 1}})
			ackGroups(r, "group-release", res, err)
		}),
		g("group-claim+renew", func(r *Run) {
			ts := targets(204, 208)
			res, err := at(r.Store, Now).ClaimGroup(commit.GroupID(ts), ts, "carol", TTL)
			ackGroups(r, "group-claim", []commit.GroupResult{res}, err)
			if err != nil || res.Outcome != commit.OK {
				return
			}
			rn, err := at(r.Store, Now+10).RenewGroups([]commit.Item{{ID: res.ID, Token: res.Token}}, TTL)
			ackGroups(r, "group-renew", rn, err)
		}),
	}
}

func encode(r *leasefmt.Record) []byte {
	b, err := leasefmt.Encode(r)
	if err != nil {
		panic(err)
	}
	return b
}

// Results of the damaged table, staged by token 1 of IDs 8, 9 and 54.
var (
	staged8  = staged{8, 1, "r8.bin", []byte("result of 8\n")}
	staged9  = staged{9, 1, "r9.bin", []byte("result of 9\n")}
	staged54 = staged{54, 1, "r54.bin", []byte("result of 54\n")}
)

// setupDamaged builds the work table with what crashes and other programs
// leave for fsck, before the damage of damageTable:
//
//	ID 8  committing (bob, token 1) publishing r8.bin, already moved to
//	      public/ (a crash between the move and done)
//	ID 9  committing (bob, token 1) publishing r9.bin, which is in
//	      public/ and still linked in its staging directory (the
//	      link+unlink fallback died between them)
//	ID 54 committing (bob, token 1) publishing r54.bin, still staged,
//	      expired (a crash before the move): rolled back
func setupDamaged(st *commit.Store, fsys commit.FS) error {
	if err := setupWork(st, fsys); err != nil {
		return err
	}
	if err := claimAt(st, TestID(54), "bob", T0, 10); err != nil {
		return err
	}
	for _, s := range []staged{staged8, staged9, staged54} {
		if err := stageFile(st, fsys, s); err != nil {
			return err
		}
		res := at(st, T0+2).Apply(leasefmt.Work, items(1, s.id), commit.CommittingDecision(s.name, 0))
		if res[0].Outcome != commit.OK {
			return fmt.Errorf("setup committing: %s %s", res[0].Outcome.Reason(), res[0].Detail)
		}
	}
	return st.DurableMove(staged8.path(), path.Join(commit.PublicDir, staged8.name))
}

// damageTable adds the damage that is not made through the store:
//
//	public/r9.bin    a second name of ID 9's staged r9.bin
//	public/orphan.bin a result no record names
//	stage/ID2.1/     the staging directory of a released token, not empty
//	stage/junk       a file that is not a staging directory
//	ID 10            a stray temp file beside its record
//	ID 52            a record that does not validate (empty owner) with
//	                 token 7: quarantined, token 7 kept in its place
//	ID 53            bytes that do not parse: quarantined, a fresh token
//	                 kept in its place
//	ID 50            a torn record (half its bytes)
//	ID 51            a valid record in the wrong shard directory
//	group of 206-207 a group-claim that crashed with its manifest and one
//	                 of its two targets written
func damageTable(st *commit.Store, t *Tree) *Tree {
	t = t.Link(staged9.path(), path.Join(commit.PublicDir, staged9.name))
	t = t.Put(path.Join(commit.PublicDir, "orphan.bin"), []byte("nobody's\n"))
	t = t.Put(path.Join(commit.StagePath(TestID(2), 1), "late.bin"), []byte("staged by a holder released since\n"))
	t = t.Put(path.Join(commit.StageDir, "junk"), []byte("not a staging directory\n"))
	bad52 := encode(&leasefmt.Record{Kind: leasefmt.Work, ID: TestID(52), Status: leasefmt.Leased, Owner: "x", Token: 7,
		ClaimedAt: T0, RenewedAt: T0, ExpiresAt: T0 + 5000})
	t = t.Put(st.RecordPath(leasefmt.Work, TestID(52)), []byte(strings.Replace(string(bad52), `"owner":"x"`, `"owner":""`, 1)))
	t = t.Put(st.RecordPath(leasefmt.Work, TestID(53)), []byte("\x00\x01 not a record at all"))
	rec := func(id int, owner string, tok int64) *leasefmt.Record {
		return &leasefmt.Record{Kind: leasefmt.Work, ID: TestID(id), Status: leasefmt.Leased, Owner: owner, Token: tok,
			ClaimedAt: T0, RenewedAt: T0, ExpiresAt: T0 + 5000}
	}
	p10 := st.RecordPath(leasefmt.Work, TestID(10))
	t = t.Put(path.Join(path.Dir(p10), commit.TempName(TestID(10).FileName())), encode(rec(10, "bob", 2))[:40])
	torn := encode(rec(50, "dan", 1))
	t = t.Put(st.RecordPath(leasefmt.Work, TestID(50)), torn[:len(torn)/2])
	right := st.RecordPath(leasefmt.Work, TestID(51))
	sh := TestID(51).Shard(st.Table.WorkShards)
	wrong := path.Join(st.ShardDir(leasefmt.Work, (sh+1)%st.Table.WorkShards), TestID(51).FileName())
	t = t.Put(wrong, encode(rec(51, "dan", 4)))
	_ = right
	ts := []leasefmt.ID{TestID(206), TestID(207)}
	slices.Sort(ts)
	gid := commit.GroupID(ts)
	m := &leasefmt.Record{Kind: leasefmt.Group, ID: gid, Status: leasefmt.Leased, Owner: "frank", Token: 1,
		ClaimedAt: T0, RenewedAt: T0, ExpiresAt: T0 + 5000, Targets: ts}
	t = t.Put(st.RecordPath(leasefmt.Group, gid), encode(m))
	tg := &leasefmt.Record{Kind: leasefmt.Target, ID: ts[0], Status: leasefmt.Leased, Owner: "frank", Token: 1,
		ClaimedAt: T0, RenewedAt: T0, ExpiresAt: T0 + 5000, Group: gid}
	t = t.Put(st.RecordPath(leasefmt.Target, ts[0]), encode(tg))
	return t
}

// damageQuarantine plants records fsck must quarantine:
//
//	ID 82 token 7 with an empty owner (the token is readable)
//	ID 83 bytes that do not parse, where a holder had token 1 (none is)
func damageQuarantine(st *commit.Store, t *Tree) *Tree {
	bad := encode(&leasefmt.Record{Kind: leasefmt.Work, ID: TestID(82), Status: leasefmt.Leased, Owner: "x", Token: 7,
		ClaimedAt: T0, RenewedAt: T0, ExpiresAt: T0 + 5000})
	t = t.Put(st.RecordPath(leasefmt.Work, TestID(82)), []byte(strings.Replace(string(bad), `"owner":"x"`, `"owner":""`, 1)))
	return t.Put(st.RecordPath(leasefmt.Work, TestID(83)), []byte("{\"schema\":\"lease.work/v1\",\"tok"))
}

// fsckRun runs fsck --repair and acknowledges what it reports repaired:
// every record that differs from the starting state afterwards.
func fsckRun(base func() *Tree) func(r *Run) {
	return func(r *Run) {
		code, err := (Fsck{}).RepairExit(r.FS, Now)
		r.SetExit(code)
		if err != nil {
			return
		}
		b := records(base())
		for p, data := range records(r.state()) {
			if string(b[p]) == string(data) {
				continue
			}
			if _, rec := decodeAny(data); rec != nil {
				r.Ack(Ack{Op: "fsck --repair", Record: rec})
			}
		}
	}
}

// FsckScenarios explore crashes of fsck --repair itself.
func FsckScenarios() []*Scenario {
	var damaged *Scenario
	damaged = &Scenario{Name: "fsck --repair", Table: workTable(), Setup: setupDamaged, Damage: damageTable, Now: Now, Writers: 1, NoStore: true}
	damaged.Run = fsckRun(func() *Tree { t, _ := Base(damaged); return t })
	var noTable *Scenario
	noTable = &Scenario{Name: "fsck --repair/no TABLE", Table: workTable(), Setup: setupWork, Now: Now, Writers: 1, NoStore: true,
		Damage: func(st *commit.Store, t *Tree) *Tree { return t.Remove(commit.TableFile) }}
	noTable.Run = fsckRun(func() *Tree { t, _ := Base(noTable); return t })
	// A quarantine followed by a claim: the claim's tokens must be larger
	// than any the quarantined bytes (or their lost holders) had.
	var quarantine *Scenario
	quarantine = &Scenario{Name: "fsck --repair, then claim", Table: workTable(), Setup: setupWork, Now: Now, Writers: 1, NoStore: true,
		Damage:   damageQuarantine,
		MinToken: map[leasefmt.ID]int64{TestID(82): 7, TestID(83): 1},
	}
	repair := fsckRun(func() *Tree { t, _ := Base(quarantine); return t })
	quarantine.Run = func(r *Run) {
		repair(r)
		if r.Exit()&^1 != 0 {
			return
		}
		st, err := commit.Open(Root, r.FS, nil)
		if err != nil {
			r.SetExit(4)
			return
		}
		st.Writers = 1
		r.Store = st
		r.AckResults("claim", at(st, Now).Claim(items(0, 82, 83), "carol", TTL))
	}
	return []*Scenario{damaged, noTable, quarantine}
}
