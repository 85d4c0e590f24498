package safety

// The fsck scenarios: a table damaged by crashes and other programs, and
// crashes of fsck --repair itself.

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

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
func setupDamaged(st *commit.Store, fsys seam.FS) error {
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
		res := at(st, T0+2).Apply(context.Background(), leasefmt.Work, items(1, s.id), commit.CommittingDecision(s.name, 0))
		if res[0].Outcome != commit.OK {
			return fmt.Errorf("setup committing: %s %s", res[0].Outcome.Reason(), res[0].Detail)
		}
	}
	return st.Disk().Move(staged8.path(), path.Join(layout.PublicDir, staged8.name))
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
	t = t.Link(staged9.path(), path.Join(layout.PublicDir, staged9.name))
	t = t.Put(path.Join(layout.PublicDir, "orphan.bin"), []byte("nobody's\n"))
	t = t.Put(path.Join(layout.StagePath(TestID(2), 1), "late.bin"), []byte("staged by a holder released since\n"))
	t = t.Put(path.Join(layout.StageDir, "junk"), []byte("not a staging directory\n"))
	bad52 := encode(&leasefmt.Record{Kind: leasefmt.Work, ID: TestID(52), Status: leasefmt.Leased, Owner: "x", Token: 7,
		ClaimedAt: T0, RenewedAt: T0, ExpiresAt: T0 + 5000})
	t = t.Put(st.RecordPath(leasefmt.Work, TestID(52)), []byte(strings.Replace(string(bad52), `"owner":"x"`, `"owner":""`, 1)))
	t = t.Put(st.RecordPath(leasefmt.Work, TestID(53)), []byte("\x00\x01 not a record at all"))
	rec := func(id int, owner string, tok int64) *leasefmt.Record {
		return &leasefmt.Record{Kind: leasefmt.Work, ID: TestID(id), Status: leasefmt.Leased, Owner: owner, Token: tok,
			ClaimedAt: T0, RenewedAt: T0, ExpiresAt: T0 + 5000}
	}
	p10 := st.RecordPath(leasefmt.Work, TestID(10))
	t = t.Put(path.Join(path.Dir(p10), durable.TempName(TestID(10).FileName())), encode(rec(10, "bob", 2))[:40])
	torn := encode(rec(50, "dan", 1))
	t = t.Put(st.RecordPath(leasefmt.Work, TestID(50)), torn[:len(torn)/2])
	right := st.RecordPath(leasefmt.Work, TestID(51))
	sh := TestID(51).Shard(st.Table().WorkShards)
	wrong := path.Join(st.ShardDir(leasefmt.Work, (sh+1)%st.Table().WorkShards), TestID(51).FileName())
	t = t.Put(wrong, encode(rec(51, "dan", 4)))
	_ = right
	ts := []leasefmt.ID{TestID(206), TestID(207)}
	slices.Sort(ts)
	gid := groups.ID(ts)
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
		Damage: func(st *commit.Store, t *Tree) *Tree { return t.Remove(layout.TableFile) }}
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
		if r.Exit()&^exitcode.FsckCorrected != 0 {
			return
		}
		st, err := commit.Open(Root, commit.Options{FS: r.FS, Writers: 1})
		if err != nil {
			r.SetExit(exitcode.IO)
			return
		}
		r.Store = st
		r.AckResults("claim", r.At(Now).Claim(context.Background(), items(0, 82, 83), "carol", TTL))
	}
	return []*Scenario{damaged, noTable, quarantine, concurrentRepairs()}
}

// ConcurrentRepairs is the name of the scenario of two fsck --repair at
// once.
const ConcurrentRepairs = "fsck --repair x2 at once"

// concurrentRepairs runs two fsck --repair at once on the damaged table,
// as an operator and a cron job might, their calls interleaved one by one
// (Writers 2: the Recorder yields before every call). The second waits for
// the first on the repair lock and then finds nothing left to do; without
// the lock each moved what the other was checking and reported the
// vanished names as damage. Its exit status is the two statuses or-ed.
func concurrentRepairs() *Scenario {
	var sc *Scenario
	sc = &Scenario{Name: ConcurrentRepairs, Table: workTable(), Setup: setupDamaged, Damage: damageTable, Now: Now, Writers: 2, NoStore: true}
	sc.Run = func(r *Run) {
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], _ = (Fsck{}).RepairExit(r.FS, Now)
			}()
		}
		wg.Wait()
		r.SetExit(codes[0] | codes[1])
		base, _ := Base(sc)
		b := records(base)
		for p, data := range records(r.state()) {
			if string(b[p]) == string(data) {
				continue
			}
			if _, rec := decodeAny(data); rec != nil {
				r.Ack(Ack{Op: "fsck --repair", Record: rec})
			}
		}
	}
	return sc
}
