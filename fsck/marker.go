package fsck

import (
	"errors"
	"io/fs"
	"path"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// checkMarker checks a status marker ID.STATUS.ATTEMPTS
// (docs/design.md#statistics): it must be a second name of its record as
// the record is now, saying the record's status and attempts. One that is
// not (the record was rewritten since by a retry that died before removing
// it, by another program, or by this repair) is debris: nothing trusts it,
// since the summary compares inode numbers, but it pins the old record's
// inode. A repair removes it under the record's lock, where no writer is
// making one.
func (c *checker) checkMarker(t task, rel string, id leasefmt.ID, status leasefmt.Status, attempts int64, home bool) *Finding {
	unlock := noUnlock
	if home && c.opt.Repair {
		// Under the record's lock or not at all: a lock that fails here is
		// reported (no repair below would take it again).
		u, err := c.lockAt(t.dir, id)
		if errors.Is(err, commit.ErrLockTimeout) {
			return nil // a live worker holds it: the next repair checks this marker
		}
		if err != nil {
			return c.ioFinding(path.Join(t.dir, layout.LockFile), "lock the record of the status marker", err)
		}
		unlock = u
	}
	defer unlock()
	mfi, err := c.fs.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // removed meanwhile (a retry)
	case err != nil:
		return c.ioFinding(rel, "cannot stat", err)
	}
	recRel := path.Join(t.dir, string(id)+".json")
	why := ""
	rfi, err := c.fs.Lstat(recRel)
	switch {
	case !home:
		why = "a marker outside its record's shard"
	case errors.Is(err, fs.ErrNotExist):
		why = "a marker of no record"
	case err != nil:
		return c.ioFinding(recRel, "cannot stat", err)
	case !seam.SameFile(mfi, rfi):
		why = "a marker that is not the record's file (the record was rewritten since)"
	default:
		data, err := c.readRecord(recRel)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile
		} else if err != nil {
			return c.ioFinding(recRel, "cannot read", err)
		}
		rec, err := decodeRecord(data, leasefmt.Work, id)
		if err != nil {
			return nil // likewise
		}
		if rec.Status == status && rec.Attempts == attempts {
			return nil
		}
		why = "a marker that says " + string(status) + " of a record that is " + string(rec.Status)
	}
	f := &Finding{Kind: KindMarker, Path: rel, ID: id, Found: why,
		Expected: "a status marker is a second name of its record, saying its status and attempts",
		Repair:   "remove it under the record's lock", Debris: true}
	if !c.opt.Repair {
		return f
	}
	if err := c.fs.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		failed(f, err)
		return f
	}
	fixed(f, "removed")
	return f
}

// markRecord gives a done or failed work record that has no status marker
// its marker, on a repair run: the records another program finished
// (knowing nothing of markers) are counted by the next summary from the
// listing instead of read. Not a finding when it works: nothing was
// wrong; an I/O error of a call is returned as one (a scan worker calls
// it: the caller adds it to its shardResult, never emits it). Under the
// record's lock, the record is read again first, so the marker is a name
// of the record it says.
func (c *checker) markRecord(t task, id leasefmt.ID, rec *leasefmt.Record) *Finding {
	if !c.opt.Repair || t.kind != leasefmt.Work || (rec.Status != leasefmt.Done && rec.Status != leasefmt.Failed) {
		return nil
	}
	l, ok := seam.As[seam.Linker](c.fs)
	if !ok {
		return nil
	}
	// The marker is a hint, but the calls that find out whether one is
	// due are the table's own: an I/O error of one is reported as any
	// other (the check is partial), not passed over.
	m := path.Join(t.dir, layout.MarkerName(id, rec.Status, rec.Attempts))
	if _, err := c.fs.Lstat(m); err == nil {
		return nil // checkMarker checks it
	} else if !errors.Is(err, fs.ErrNotExist) {
		return c.ioFinding(m, "look up the status marker", err)
	}
	unlock, err := c.lockAt(t.dir, id)
	if err != nil {
		if !errors.Is(err, commit.ErrLockTimeout) {
			return c.ioFinding(path.Join(t.dir, layout.LockFile), "lock the record to mark it", err)
		}
		return nil
	}
	defer unlock()
	recRel := path.Join(t.dir, string(id)+".json")
	data, err := c.readRecord(recRel)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return c.ioFinding(recRel, "read the record to mark it", err)
		}
		return nil
	}
	now, err := decodeRecord(data, leasefmt.Work, id)
	if err != nil || now.Status != rec.Status || now.Attempts != rec.Attempts {
		return nil
	}
	if l.Link(recRel, m) == nil {
		c.marked.Add(1)
	}
	return nil
}
