package fsck

import (
	"errors"
	"io/fs"
	"path"
	"strings"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// The tally (docs/design.md#statistics): every finished work record has a
// link tally/B/ID.STATUS.ATTEMPTS, every unfinished one without a queue
// entry a flag tally/unqueued/ID, and nothing else is there. While
// tally/TRUSTED exists lease status --summary counts from it, so a finished
// record without its link, or a link of no finished record, makes the
// summary wrong: an error. On a table whose tally is not trusted (made
// before the tally, or untrusted by a writer that could not keep it)
// nothing counts from it: a repair run builds it quietly, and trusts it
// once every record was checked and nothing failed (beginTally, endTally).

// beginTally notes whether the tally is trusted, and on a repair run of
// the whole table makes TRUSTED.pending: a writer that cannot keep the
// tally while the repair walks removes it, and the repair then does not
// trust what it built.
func (c *checker) beginTally() {
	trusted, err := c.st.TallyTrusted()
	if err != nil {
		c.emit(c.settleTally(c.ioFinding(layout.TrustedFile, "look up", err)))
	}
	c.tallyTrusted = trusted
	if !c.opt.Repair || len(c.opt.Shards) > 0 {
		return
	}
	if err := c.st.Disk().EnsureDir(layout.TallyDir); err != nil {
		c.emit(c.ioFinding(layout.TallyDir, "make the tally", err))
		return
	}
	if c.tallyTrusted {
		return
	}
	f, err := c.fs.CreateExcl(layout.TrustPending)
	if err == nil {
		err = f.Close()
	}
	if err == nil || errors.Is(err, fs.ErrExist) {
		err = c.fs.SyncDir(layout.TallyDir)
	}
	if err != nil {
		c.emit(c.ioFinding(layout.TrustPending, "begin checking the tally", err))
		return
	}
	c.tallyPending = true
}

// endTally trusts the tally a repair run built, when nothing was left
// wrong, no part of the check failed, and no writer untrusted it meanwhile
// (TRUSTED.pending is still there).
func (c *checker) endTally() {
	c.sum.Tallied = int(c.tallied.Load())
	if c.tallyTrusted && c.opt.Repair && c.tallyLeft.Load() > 0 {
		c.st.Untrust() // what is left wrong would make the summary wrong
		return
	}
	c.sum.Trusted = c.tallyTrusted
	if !c.tallyPending {
		return
	}
	if c.tallyLeft.Load() > 0 || c.partial.Load() {
		if err := c.fs.Remove(layout.TrustPending); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.emit(c.ioFinding(layout.TrustPending, "remove", err))
		}
		return
	}
	if err := c.fs.Rename(layout.TrustPending, layout.TrustedFile); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.emit(c.ioFinding(layout.TrustedFile, "trust the tally", err))
		}
		return
	}
	if err := c.fs.SyncDir(layout.TallyDir); err != nil {
		c.emit(c.ioFinding(layout.TallyDir, "trust the tally", err))
		return
	}
	c.sum.Trusted = true
}

// tallyFinding is a finding of the tally: an error while the tally is
// trusted, else debris (nothing counts from it).
func (c *checker) tallyFinding(rel string, id leasefmt.ID, found, repair string) *Finding {
	return &Finding{Kind: KindTally, Path: rel, ID: id, Found: found,
		Expected: "a link in the tally for each finished record, a flag for each unfinished one that is not queued, nothing else",
		Repair:   repair, Debris: !c.tallyTrusted}
}

// settleTally records how a finding of the tally ended: one left makes the
// repair run not trust the tally.
func (c *checker) settleTally(f *Finding) *Finding {
	if f != nil && !f.Repaired {
		c.tallyLeft.Add(1)
	}
	return f
}

// tallyRecord checks rec, a valid work record at home, against the tally:
// a finished one must have its link, an unfinished one without a queue
// entry its flag. What looks wrong is looked at again under the record's
// lock (a writer may be between its rename and its link), and repaired
// there.
func (c *checker) tallyRecord(t task, id leasefmt.ID, rec *leasefmt.Record) *Finding {
	if t.kind != leasefmt.Work {
		return nil
	}
	if p, err := c.tallyProblem(id, rec); err != nil {
		return c.settleTally(c.ioFinding(c.st.RecordPath(leasefmt.Work, id), "check the tally", err))
	} else if p == tallyFine {
		return nil
	}
	unlock, err := c.lockAt(t.dir, id)
	if errors.Is(err, commit.ErrLockTimeout) {
		return nil // a live writer holds it: the next check sees it
	}
	if err != nil {
		return c.settleTally(c.ioFinding(path.Join(t.dir, layout.LockFile), "lock the record to check the tally", err))
	}
	defer unlock()
	data, err := c.readRecord(c.st.RecordPath(leasefmt.Work, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return c.settleTally(c.ioFinding(c.st.RecordPath(leasefmt.Work, id), "cannot read", err))
	}
	now, err := decodeRecord(data, leasefmt.Work, id)
	if err != nil {
		return nil // the record check reports it
	}
	p, err := c.tallyProblem(id, now)
	if err != nil {
		return c.settleTally(c.ioFinding(c.st.RecordPath(leasefmt.Work, id), "check the tally", err))
	}
	var f *Finding
	switch p {
	case tallyFine:
		return nil
	case tallyOtherFile:
		// The link counts the record right (its name is the record's),
		// but pins an older file: debris.
		f = &Finding{Kind: KindTally, Path: layout.TallyPath(now), ID: id, Found: "a finished record whose link in the tally is another file (the record was rewritten since)",
			Expected: "the link is the record's file", Repair: "link the record there", Debris: true}
	case tallyUnlinked:
		f = c.tallyFinding(layout.TallyPath(now), id, "a finished record missing from the tally", "link it into the tally")
		// Still queued, or flagged as claimed by name: a worker killed
		// between its record's rename and its link. The summary counts
		// the record from its queue entry or flag meanwhile, and whoever
		// drops the entry makes the link first, so nothing counts wrong:
		// debris.
		for _, p := range []string{c.st.QueuePath(id), layout.UnqueuedFlag(id)} {
			if _, err := c.fs.Lstat(p); err == nil {
				f.Found += " (still queued or flagged: a writer killed before its link)"
				f.Debris = true
				break
			} else if !errors.Is(err, fs.ErrNotExist) {
				return c.settleTally(c.ioFinding(p, "look up", err))
			}
		}
	case tallyUnflagged:
		f = c.tallyFinding(layout.UnqueuedFlag(id), id, "an unfinished record with neither a queue entry nor a flag", "flag it")
	}
	quiet := !c.tallyTrusted && p != tallyOtherFile // nothing counts from it: not worth a line
	if !c.opt.Repair {
		if quiet {
			return nil
		}
		return c.settleTally(f)
	}
	if err := c.retallyLocked(now); err != nil {
		failed(f, err)
		return c.settleTally(f)
	}
	if quiet {
		c.tallied.Add(1)
		return nil
	}
	fixed(f, "done")
	return f
}

// What tallyProblem finds.
const (
	tallyFine = iota
	tallyUnlinked
	tallyOtherFile
	tallyUnflagged
)

// tallyProblem says what the tally lacks for rec.
func (c *checker) tallyProblem(id leasefmt.ID, rec *leasefmt.Record) (int, error) {
	if rec.Status == leasefmt.Done || rec.Status == leasefmt.Failed {
		lfi, err := c.fs.Lstat(layout.TallyPath(rec))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return tallyUnlinked, nil
		case err != nil:
			return tallyFine, err
		}
		rfi, err := c.fs.Lstat(c.st.RecordPath(leasefmt.Work, id))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return tallyFine, nil // removed meanwhile
		case err != nil:
			return tallyFine, err
		case seam.SameFile(lfi, rfi):
			return tallyFine, nil
		}
		return tallyOtherFile, nil
	}
	for _, name := range []string{c.st.QueuePath(id), layout.UnqueuedFlag(id)} {
		if _, err := c.fs.Lstat(name); err == nil {
			return tallyFine, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return tallyFine, err
		}
	}
	return tallyUnflagged, nil
}

// retallyLocked gives rec, the work record of its ID as it is now (the
// caller holds its lock), what the tally needs: its link when finished,
// else its flag when it has no queue entry. Used by the check and by the
// repairs that put a record in place (a misplaced one moved home, a
// placeholder).
func (c *checker) retallyLocked(rec *leasefmt.Record) error {
	if rec.Status != leasefmt.Done && rec.Status != leasefmt.Failed {
		return c.flagIfUnqueued(rec.ID)
	}
	want := layout.TallyPath(rec)
	if err := c.st.Disk().EnsureDir(path.Dir(want)); err != nil {
		return err
	}
	l, ok := seam.As[seam.Linker](c.fs)
	if !ok {
		return errors.New("the filesystem makes no hard links")
	}
	if err := c.fs.Remove(want); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := l.Link(c.st.RecordPath(leasefmt.Work, rec.ID), want); err != nil {
		return err
	}
	return c.fs.SyncDir(path.Dir(want))
}

// checkTally walks the tally: each link of a bucket must be its finished
// record's (the same file, the same status, attempts and bucket), each flag
// that of an unfinished record without a queue entry. Links and flags of
// nothing are removed by a repair, under the record's lock; the
// checkpoint's temp files of a summary that died are debris.
func (c *checker) checkTally() {
	if len(c.opt.Shards) > 0 {
		return // a partial check cannot say which links belong to no record
	}
	ents, err := c.readDirSorted(layout.TallyDir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		c.emit(c.settleTally(c.listFailed(layout.TallyDir, "list the tally", err)))
		return
	}
	for _, e := range ents {
		name := e.Name()
		rel := path.Join(layout.TallyDir, name)
		_, bucket := layout.ParseBucket(name)
		switch {
		case bucket && e.IsDir():
			c.checkBucket(rel)
		case rel == layout.UnqueuedDir && e.IsDir():
			c.checkFlags()
		case rel == layout.TrustedFile, rel == layout.TrustPending, rel == layout.CheckpointFile:
		case strings.HasPrefix(name, ".CHECKPOINT.tmp."):
			f := &Finding{Kind: KindTemp, Path: rel, Found: "a temp file of a summary's checkpoint", Expected: "none", Repair: "remove it", Debris: true}
			if c.opt.Repair {
				if err := c.fs.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
					failed(f, err)
				} else {
					fixed(f, "removed")
				}
			}
			c.emit(f)
		default:
			c.emit(c.unknownOrLink(rel, e.Type(), "the tally's buckets, unqueued/, TRUSTED and CHECKPOINT"))
		}
	}
}

// checkBucket checks the links of one bucket directory.
func (c *checker) checkBucket(dir string) {
	ents, err := c.readDirSorted(dir)
	if err != nil {
		c.emit(c.settleTally(c.listFailed(dir, "list the tally's bucket", err)))
		return
	}
	for _, e := range ents {
		rel := path.Join(dir, e.Name())
		id, status, _, ok := layout.ParseMarkerName(e.Name())
		if !ok {
			c.emit(c.unknownOrLink(rel, e.Type(), "links ID.STATUS.ATTEMPTS"))
			continue
		}
		c.emit(c.settleTally(c.checkLink(rel, id, status)))
	}
}

// checkLink checks one link of the tally, and removes it on a repair run
// when it is not its record's.
func (c *checker) checkLink(rel string, id leasefmt.ID, status leasefmt.Status) *Finding {
	shardDir := path.Dir(c.st.RecordPath(leasefmt.Work, id))
	recRel := c.st.RecordPath(leasefmt.Work, id)
	unlock, err := c.lockAt(shardDir, id)
	if errors.Is(err, commit.ErrLockTimeout) {
		return nil // a live writer holds it: the next check sees this link
	}
	if err != nil {
		return c.ioFinding(path.Join(shardDir, layout.LockFile), "lock the record of the tally's link", err)
	}
	defer unlock()
	if _, err := c.fs.Lstat(rel); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return c.ioFinding(rel, "cannot stat", err)
	}
	why := ""
	data, err := c.readRecord(recRel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		why = "a link of no record"
	case err != nil:
		return c.ioFinding(recRel, "cannot read", err)
	default:
		rec, err := decodeRecord(data, leasefmt.Work, id)
		if err != nil {
			return nil // the record check reports it
		}
		if (rec.Status == leasefmt.Done || rec.Status == leasefmt.Failed) && layout.TallyPath(rec) == rel {
			return nil // its name counts the record right; tallyRecord checks it is its file
		}
		why = "a link that says " + string(status) + " in bucket " + path.Base(path.Dir(rel)) + " of a record that is " + string(rec.Status)
		if rec.Status == leasefmt.Done || rec.Status == leasefmt.Failed {
			why += " in bucket " + path.Base(path.Dir(layout.TallyPath(rec)))
		}
	}
	f := c.tallyFinding(rel, id, why, "remove it under the record's lock")
	if !c.opt.Repair {
		return f
	}
	if err := c.removeDurably(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		failed(f, err)
		return f
	}
	fixed(f, "removed")
	return f
}

// checkFlags removes, on a repair run, the flags of items that no longer
// need one (done, failed or queued since, or never given a record: a claim
// that failed after making its flag). They cost the summary a read each,
// nothing else, so they are no finding.
func (c *checker) checkFlags() {
	if !c.opt.Repair {
		return
	}
	ents, err := c.readDirSorted(layout.UnqueuedDir)
	if err != nil {
		c.emit(c.settleTally(c.listFailed(layout.UnqueuedDir, "list the flags", err)))
		return
	}
	for _, e := range ents {
		id, err := leasefmt.ParseID(e.Name())
		rel := path.Join(layout.UnqueuedDir, e.Name())
		if err != nil {
			c.emit(c.unknownOrLink(rel, e.Type(), "flags named by an ID"))
			continue
		}
		c.dropFlag(rel, id)
	}
}

func (c *checker) dropFlag(rel string, id leasefmt.ID) {
	shardDir := path.Dir(c.st.RecordPath(leasefmt.Work, id))
	unlock, err := c.lockAt(shardDir, id)
	if errors.Is(err, commit.ErrLockTimeout) {
		return // a live writer holds it: the next repair looks again
	}
	if err != nil {
		c.emit(c.ioFinding(path.Join(shardDir, layout.LockFile), "lock the record of the flag", err))
		return
	}
	defer unlock()
	_, err = c.fs.Lstat(c.st.QueuePath(id))
	switch {
	case err == nil:
	case !errors.Is(err, fs.ErrNotExist):
		c.emit(c.ioFinding(c.st.QueuePath(id), "look up the queue entry", err))
		return
	default:
		data, err := c.readRecord(c.st.RecordPath(leasefmt.Work, id))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			c.emit(c.ioFinding(c.st.RecordPath(leasefmt.Work, id), "cannot read", err))
			return
		default:
			rec, err := decodeRecord(data, leasefmt.Work, id)
			if err != nil || (rec.Status != leasefmt.Done && rec.Status != leasefmt.Failed) {
				return // still needed (or the record check reports it)
			}
		}
	}
	// No fsync: a flag that comes back costs one read.
	if err := c.fs.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.emit(c.ioFinding(rel, "remove", err))
	}
}

// flagIfUnqueued makes the flag of id, whose record a repair just wrote
// unfinished (a placeholder), when it has no queue entry: the caller holds
// the record's lock.
func (c *checker) flagIfUnqueued(id leasefmt.ID) error {
	if _, err := c.fs.Lstat(c.st.QueuePath(id)); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	flag := layout.UnqueuedFlag(id)
	if err := c.st.Disk().EnsureDir(path.Dir(flag)); err != nil {
		return err
	}
	f, err := c.fs.CreateExcl(flag)
	if err == nil {
		err = f.Close()
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return c.fs.SyncDir(path.Dir(flag))
}
