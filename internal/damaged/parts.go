package damaged

// The scenarios with one kind of damage each, and the checks of the
// records a repair rewrites.

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/leasetool/lease/leasefmt"
)

// parts are the scenarios with one kind of damage each.
var parts = []Scenario{
	{Name: "table-missing", Doc: "TABLE is gone; fsck writes it with the counts of the shard directories", Check: 4, Repair: 1, build: func(b *Builder) {
		b.remove("TABLE")
		b.Expect.Changed["TABLE"] = nil
	}},
	{Name: "table-invalid", Doc: "TABLE is torn; fsck quarantines it and writes a new one", Check: 4, Repair: 1, build: func(b *Builder) {
		torn := []byte(`{"schema":"lease.table/v1","work_sh`)
		b.write("TABLE", torn)
		b.quarantined(Original{From: "TABLE", Data: torn})
		b.Expect.Changed["TABLE"] = nil
	}},
	{Name: "table-symlink", Doc: "TABLE is a symbolic link; never followed, quarantined, rewritten", Check: 4, Repair: 1, build: func(b *Builder) {
		b.remove("TABLE")
		b.symlink("../elsewhere/TABLE", "TABLE")
		b.quarantined(Original{From: "TABLE", Type: fs.ModeSymlink, Link: "../elsewhere/TABLE"})
		b.Expect.Changed["TABLE"] = nil
	}},
	{Name: "temp", Doc: "temp files of writers that died: beside a record, alone, and of the TABLE header; removed", Check: 4, Repair: 1, build: func(b *Builder) {
		live := b.ID(leasefmt.Work, "live-temp")
		rel := b.put(lease(leasefmt.Work, live, "host-a/fuzz-9", 2, Now+100))
		t1 := path.Join(path.Dir(rel), "."+live.FileName()+".tmp.0a1b2c3d4e5f")
		b.write(t1, replace(b.validRecord(live), "host-c", "host-x"))
		lone := b.ID(leasefmt.Work, "lone-temp")
		t2 := path.Join(path.Dir(Home(leasefmt.Work, lone)), "."+lone.FileName()+".tmp.ffffffffffff")
		b.write(t2, []byte(`{"schema":"lease.wo`))
		gt := b.ID(leasefmt.Group, "group-temp")
		t3 := path.Join(path.Dir(Home(leasefmt.Group, gt)), "."+gt.FileName()+".tmp.000000000000")
		b.write(t3, nil)
		b.write(".TABLE.tmp.123456abcdef", []byte(`{"schema":"lease.table/v1"}`))
		b.Expect.Removed = append(b.Expect.Removed, t1, t2, t3, ".TABLE.tmp.123456abcdef")
	}},
	{Name: "invalid-empty", Doc: "a zero-byte record", Check: 4, Repair: 1, build: func(b *Builder) {
		b.badRecord("empty", fresh, func(leasefmt.ID) []byte { return []byte{} })
	}},
	{Name: "invalid-torn", Doc: "a record whose second half is zeros (a torn block write)", Check: 4, Repair: 1, build: func(b *Builder) {
		b.badRecord("torn", 5, func(id leasefmt.ID) []byte {
			d := b.validRecord(id)
			return append(d[:len(d)/2:len(d)/2], make([]byte, len(d)-len(d)/2)...)
		})
	}},
	{Name: "invalid-truncated", Doc: "a record cut short", Check: 4, Repair: 1, build: func(b *Builder) {
		b.badRecord("truncated", fresh, func(id leasefmt.ID) []byte { return b.validRecord(id)[:100] })
	}},
	{Name: "invalid-nan", Doc: "a record whose expires_at is NaN", Check: 4, Repair: 1, build: func(b *Builder) {
		b.badRecord("nan", 5, func(id leasefmt.ID) []byte {
			d := b.validRecord(id)
			i := strings.Index(string(d), `"expires_at":`) + len(`"expires_at":`)
			return append(append(d[:i:i], "NaN"...), '}', '\n')
		})
	}},
	{Name: "invalid-schema", Doc: "a record of an unknown schema", Check: 4, Repair: 1, build: func(b *Builder) {
		b.badRecord("schema", 5, func(id leasefmt.ID) []byte { return replace(b.validRecord(id), "lease.work/v1", "lease.work/v2") })
	}},
	{Name: "invalid-id", Doc: "a record whose id is not its file name", Check: 4, Repair: 1, build: func(b *Builder) {
		b.badRecord("wrong-id", 5, func(leasefmt.ID) []byte { return b.validRecord(b.ID(leasefmt.Work, "other-id")) })
	}},
	{Name: "invalid-token", Doc: "a record with token 0", Check: 4, Repair: 1, build: func(b *Builder) {
		b.badRecord("token", fresh, func(id leasefmt.ID) []byte { return replace(b.validRecord(id), `"token":5`, `"token":0`) })
	}},
	{Name: "invalid-owner", Doc: "a record with token 7 and an empty owner: quarantined, a released record with token 7 left in its place, so the next claim gets token 8", Check: 4, Repair: 1, build: func(b *Builder) {
		b.badRecord("owner", 7, func(id leasefmt.ID) []byte {
			return replace(replace(b.validRecord(id), `"token":5`, `"token":7`), `"owner":"host-c/fuzz-1"`, `"owner":""`)
		})
	}},
	{Name: "invalid-fifo", Doc: "a FIFO and a directory where records belong", Check: 4, Repair: 1, build: func(b *Builder) {
		id := b.ID(leasefmt.Work, "fifo")
		rel := Home(leasefmt.Work, id)
		b.mkdir(path.Dir(rel))
		b.fail(syscall.Mkfifo(b.abs(rel), 0o644))
		b.quarantined(Original{From: rel, Type: fs.ModeNamedPipe})
		b.Expect.Changed[rel] = isPlaceholder(fresh)
		dir := Home(leasefmt.Target, b.ID(leasefmt.Target, "dir"))
		b.mkdir(dir)
		b.quarantined(Original{From: dir, Type: fs.ModeDir})
		b.Expect.Changed[dir] = isPlaceholder(fresh)
	}},
	{Name: "misplaced", Doc: "valid records outside their shard: moved home, or quarantined when home is taken", Check: 4, Repair: 1, build: func(b *Builder) {
		a := b.ID(leasefmt.Work, "stray")
		home := Home(leasefmt.Work, a)
		wrong := path.Join("work", leasefmt.ShardDirName((a.Shard(WorkShards)+1)%WorkShards, WorkShards), a.FileName())
		d := b.validRecord(a)
		b.write(wrong, d)
		b.Expect.Moved[wrong] = Move{To: home, Data: d}
		taken := b.ID(leasefmt.Work, "taken")
		b.put(lease(leasefmt.Work, taken, "host-d/fuzz-1", 12, Now+100))
		wrong2 := path.Join("work", leasefmt.ShardDirName((taken.Shard(WorkShards)+2)%WorkShards, WorkShards), taken.FileName())
		d2 := b.encode(lease(leasefmt.Work, taken, "host-d/fuzz-0", 11, Now-500))
		b.write(wrong2, d2)
		b.quarantined(Original{From: wrong2, Data: d2})
		old := b.ID(leasefmt.Target, "old-layout")
		tr := lease(leasefmt.Target, old, "host-e/fuzz-1", 1, Now-900)
		tr.Status, tr.Group = leasefmt.Released, b.ID(leasefmt.Group, "old-group")
		from := path.Join("targets", "old", old.FileName())
		d3 := b.encode(tr)
		b.write(from, d3)
		b.Expect.Moved[from] = Move{To: Home(leasefmt.Target, old), Data: d3}
		b.Expect.KeptDirs = append(b.Expect.KeptDirs, "targets/old")
	}},
	{Name: "symlink", Doc: "links at a record's name, in stage/, as a shard directory, as a lock file and at the top; the links are quarantined", Check: 4, Repair: 1, build: func(b *Builder) {
		id := b.ID(leasefmt.Work, "link")
		rel := Home(leasefmt.Work, id)
		b.symlink("../../TABLE", rel)
		b.quarantined(Original{From: rel, Type: fs.ModeSymlink, Link: "../../TABLE"})
		b.Expect.Changed[rel] = isPlaceholder(fresh)
		b.symlink("/etc/hostname", "stage/result.lnk")
		b.quarantined(Original{From: "stage/result.lnk", Type: fs.ModeSymlink, Link: "/etc/hostname"})
		shard := path.Join("groups", leasefmt.ShardDirName(reservedShard, TargetShards))
		b.remove(shard)
		b.symlink("../../elsewhere/groups", shard)
		b.quarantined(Original{From: shard, Type: fs.ModeSymlink, Link: "../../elsewhere/groups"})
		b.Expect.Created = append(b.Expect.Created, shard)
		lock := path.Join("targets", leasefmt.ShardDirName(2, TargetShards), ".lock")
		b.remove(lock)
		b.symlink("/tmp/lock", lock)
		b.quarantined(Original{From: lock, Type: fs.ModeSymlink, Link: "/tmp/lock"})
		b.symlink("work", "latest")
		b.quarantined(Original{From: "latest", Type: fs.ModeSymlink, Link: "work"})
	}},
	{Name: "lock", Doc: "a shard's .lock that is a directory; quarantined, the next lock creates a fresh one", Check: 4, Repair: 1, build: func(b *Builder) {
		lock := path.Join("work", leasefmt.ShardDirName(1, WorkShards), ".lock")
		b.remove(lock)
		b.mkdir(lock)
		b.quarantined(Original{From: lock, Type: fs.ModeDir})
	}},
	{Name: "unknown", Doc: "files that are not part of a table: reported, left alone (notices, exit 0)", Check: 0, Repair: 0, build: func(b *Builder) {
		b.keep("README", []byte("campaign notes\n"))
		b.keep("work/02/notes.txt", []byte("do not delete\n"))
		b.keep("groups/00/sub/x.json", []byte("{}\n"))
		if !b.all { // the scenario with everything has no lost+found/
			b.keep("lost+found/old-note", []byte("from last year\n"))
		}
		b.Expect.KeptDirs = append(b.Expect.KeptDirs, "groups/00/sub")
	}},
	{Name: "nfs-silly-rename", Doc: "files the NFS client renamed to .nfsXXXX when they were removed while open, in a shard, the queue, held/, stage/, public/ and a stale staging directory (its only file): reported as such, left alone with that directory (notices, exit 0)", Check: 0, Repair: 0, build: func(b *Builder) {
		live := b.ID(leasefmt.Work, "silly")
		rel := b.put(lease(leasefmt.Work, live, "host-a/fuzz-3", 5, Now+100))
		// The record as it was before a rewrite renamed over it while a
		// reader of the same client had it open.
		b.keep(path.Join(path.Dir(rel), ".nfs000000000123abcd00000001"), replace(b.validRecord(live), "host-c", "host-a"))
		b.keep(path.Join(path.Dir(Home(leasefmt.Group, live)), ".nfs000000000123abcd00000002"), nil)
		b.keep(path.Join("queue", leasefmt.ShardDirName(0, WorkShards), ".nfs000000000123abcd00000003"), nil)
		b.keep("held/.nfs000000000123abcd00000004", nil)
		if !b.all { // the scenario with everything has no stage/ and public/ is a file
			b.keep("stage/.nfs000000000123abcd00000005", []byte("a staged file removed while open\n"))
			b.keep("public/.nfs000000000123abcd00000006", []byte("a result removed while open\n"))
			// A staging directory of a token no longer current (no
			// record) that holds only a staged file removed while open:
			// left for a later repair, the .nfs file with it.
			stale := stagePath(b.ID(leasefmt.Work, "silly-stage"), 2)
			b.keep(stale+"/.nfs000000000000abcd00000007", []byte("a staged file removed while open\n"))
			b.Expect.KeptDirs = append(b.Expect.KeptDirs, stale)
		}
	}},
	{Name: "unfinished-publish", Doc: "a committing record whose result is already in public/: rolled forward to done; one still staged and live: left alone", Check: 4, Repair: 1, build: func(b *Builder) {
		id := b.ID(leasefmt.Work, "committing")
		r := lease(leasefmt.Work, id, "host-f/fuzz-1", 3, Now+100)
		r.Status, r.Publish = leasefmt.Committing, "result-1.tar"
		b.putChanged(r, isDone(3, "result-1.tar"))
		b.keep("public/result-1.tar", []byte("crashes found: 17\n"))
		pid := b.ID(leasefmt.Work, "pending")
		pending := lease(leasefmt.Work, pid, "host-f/fuzz-2", 4, Now+100)
		pending.Status, pending.Publish = leasefmt.Committing, "result-2.tar"
		b.put(pending)
		b.keep(stagePath(pid, 4)+"/result-2.tar", []byte("not yet published\n"))
	}},
	{Name: "abandoned-publish", Doc: "an expired committing record whose result is still staged (its publisher died before the move): rolled back to released, its staging directory moved to lost+found/", Check: 4, Repair: 1, build: func(b *Builder) {
		id := b.ID(leasefmt.Work, "abandoned")
		r := lease(leasefmt.Work, id, "host-f/fuzz-3", 2, Now-100)
		r.Status, r.Publish = leasefmt.Committing, "result-5.tar"
		b.putChanged(r, isReleased(2))
		dir := stagePath(id, 2)
		b.write(dir+"/result-5.tar", []byte("staged, never published\n"))
		b.quarantined(Original{From: dir, Type: fs.ModeDir})
	}},
	{Name: "publish-leftover", Doc: "staged results still linked after their publication finished: the stage/ name and the emptied staging directory are removed", Check: 4, Repair: 1, build: func(b *Builder) {
		pid := b.ID(leasefmt.Work, "published")
		done := lease(leasefmt.Work, pid, "host-g/fuzz-1", 6, Now-100)
		done.Status, done.Publish = leasefmt.Done, "result-3.tar"
		b.put(done)
		b.keep("public/result-3.tar", []byte("result three\n"))
		b.mkdir(stagePath(pid, 6))
		b.fail(os.Link(b.abs("public/result-3.tar"), b.abs(stagePath(pid, 6)+"/result-3.tar")))
		mid := b.ID(leasefmt.Work, "mid-move")
		m := lease(leasefmt.Work, mid, "host-g/fuzz-2", 8, Now+100)
		m.Status, m.Publish = leasefmt.Committing, "result-4.tar"
		b.putChanged(m, isDone(8, "result-4.tar"))
		b.keep("public/result-4.tar", []byte("result four\n"))
		b.mkdir(stagePath(mid, 8))
		b.fail(os.Link(b.abs("public/result-4.tar"), b.abs(stagePath(mid, 8)+"/result-4.tar")))
		b.Expect.Removed = append(b.Expect.Removed, stagePath(pid, 6), stagePath(pid, 6)+"/result-3.tar",
			stagePath(mid, 8), stagePath(mid, 8)+"/result-4.tar")
	}},
	{Name: "stale-stage", Doc: "staging directories of tokens that are not current (released, superseded, no record) and a loose file in stage/: empty ones removed, the rest moved to lost+found/; the current one kept", Check: 4, Repair: 1, build: func(b *Builder) {
		live, released := b.baseID(leasefmt.Work, "live"), b.baseID(leasefmt.Work, "released")
		b.keep(stagePath(live, 7)+"/work-in-progress.bin", []byte("the live holder's\n"))
		b.write(stagePath(released, 3)+"/late.bin", []byte("staged after the release\n"))
		b.quarantined(Original{From: stagePath(released, 3), Type: fs.ModeDir})
		b.mkdir(stagePath(live, 6))
		b.Expect.Removed = append(b.Expect.Removed, stagePath(live, 6))
		nobody := b.ID(leasefmt.Work, "never-claimed")
		b.write(stagePath(nobody, 1)+"/x.bin", []byte("no record\n"))
		b.quarantined(Original{From: stagePath(nobody, 1), Type: fs.ModeDir})
		b.write("stage/loose.bin", []byte("old layout\n"))
		b.quarantined(Original{From: "stage/loose.bin", Data: []byte("old layout\n")})
	}},
	{Name: "orphan-result", Doc: "a result in public/ that no done or committing record names: moved to lost+found/", Check: 4, Repair: 1, build: func(b *Builder) {
		b.write("public/orphan.tar", []byte("whose?\n"))
		b.quarantined(Original{From: "public/orphan.tar", Data: []byte("whose?\n")})
	}},
	{Name: "group", Doc: "group manifests whose targets disagree (older token, no record) and a live target whose group has no manifest: released; a group whose records differ only in expiry: kept, set to the earliest", Check: 4, Repair: 1, build: func(b *Builder) {
		// G1: a target with an older token (a claim that did not finish).
		m1, ts1 := b.group("g1", 5, Now+300, "g1-a", "g1-b")
		ts1[1].Token = 4
		b.putChanged(m1, isReleased(5))
		for _, t := range ts1 {
			b.putChanged(t, isReleased(5))
		}
		// G2: a target with another expiry (a group-renew that did not
		// finish): the group is kept, every record set to the earliest.
		m2, ts2 := b.group("g2", 2, Now+300, "g2-a")
		ts2[0].ExpiresAt, ts2[0].RenewedAt = Now+30, Now-90
		b.putChanged(m2, isLeased(2, Now+30))
		b.put(ts2[0])
		// G3: a listed target with no record: a released one is written.
		m3, ts3 := b.group("g3", 6, Now+300, "g3-a", "g3-b")
		b.putChanged(m3, isReleased(6))
		b.putChanged(ts3[0], isReleased(6))
		b.Expect.Changed[Home(leasefmt.Target, ts3[1].ID)] = isReleased(6)
		// An orphan: a live target naming a group with no manifest.
		orphan := lease(leasefmt.Target, b.ID(leasefmt.Target, "orphan"), "host-h/x", 3, Now+300)
		orphan.Group = b.ID(leasefmt.Group, "no-manifest")
		b.putChanged(orphan, isReleased(3))
		// Healthy: an expired group whose target another group claimed
		// after it ended.
		m5, ts5 := b.group("g5", 4, Now-600, "shared")
		m6, ts6 := b.group("g6", 5, Now+300, "shared")
		ts6[0].ClaimedAt = Now - 300
		m6.ClaimedAt = Now - 300
		b.put(m5)
		b.put(m6)
		b.put(ts6[0])
		_ = ts5
	}},
	{Name: "expired", Doc: "expired leased and committing records: counted, not touched (exit 0)", Check: 0, Repair: 0, build: func(b *Builder) {
		b.put(lease(leasefmt.Work, b.ID(leasefmt.Work, "expired-1"), "host-i/fuzz-1", 2, Now-1))
		c := lease(leasefmt.Work, b.ID(leasefmt.Work, "expired-2"), "host-i/fuzz-2", 9, Now-3600)
		c.Status = leasefmt.Committing
		b.put(c)
		m, ts := b.group("expired-group", 3, Now-5, "e1")
		b.put(m)
		b.put(ts[0])
	}},
	{Name: "layout", Doc: "lost+found/ and stage/ missing, public/ a regular file: created, the file quarantined", Check: 4, Repair: 1, build: func(b *Builder) {
		b.remove("lost+found")
		b.Expect.Created = append(b.Expect.Created, "lost+found")
		if b.all {
			return // the other parts need stage/ and public/
		}
		b.remove("stage")
		b.remove("public")
		b.write("public", []byte("not a directory\n"))
		b.quarantined(Original{From: "public", Data: []byte("not a directory\n")})
		b.Expect.Created = append(b.Expect.Created, "stage", "public")
	}},
}

func isDone(token int64, publish string) func(*leasefmt.Record) error {
	return func(r *leasefmt.Record) error {
		if r.Status != leasefmt.Done || r.Token != token || r.Publish != publish {
			return fmt.Errorf("want done, token %d, publish %s; got %s, token %d, publish %q", token, publish, r.Status, r.Token, r.Publish)
		}
		return nil
	}
}

func isLeased(token int64, expires float64) func(*leasefmt.Record) error {
	return func(r *leasefmt.Record) error {
		if r.Status != leasefmt.Leased || r.Token != token || r.ExpiresAt != expires {
			return fmt.Errorf("want leased with token %d until %v; got %s, token %d until %v", token, expires, r.Status, r.Token, r.ExpiresAt)
		}
		return nil
	}
}

// isPlaceholder: the released record fsck leaves in place of a record it
// quarantined, with a token of at least min.
func isPlaceholder(min int64) func(*leasefmt.Record) error {
	return func(r *leasefmt.Record) error {
		if r.Status != leasefmt.Released || r.Token < min || r.Owner != "lease-fsck" {
			return fmt.Errorf("want released by lease-fsck with token >= %d; got %s, token %d, owner %q", min, r.Status, r.Token, r.Owner)
		}
		return nil
	}
}

func isReleased(token int64) func(*leasefmt.Record) error {
	return func(r *leasefmt.Record) error {
		if r.Status != leasefmt.Released || r.Token != token {
			return fmt.Errorf("want released with token %d; got %s, token %d", token, r.Status, r.Token)
		}
		return nil
	}
}
