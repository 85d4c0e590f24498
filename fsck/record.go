package fsck

// The checks of one record file: it is read (bounded), decoded and
// validated, and must be in its home shard; the findings about records that
// do not validate or are misplaced.

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/leasefmt"
)

// checkRecord checks one record file.
func (c *checker) checkRecord(t task, r *shardResult, rel string, id leasefmt.ID, typ fs.FileMode, home bool) {
	var (
		rec  *leasefmt.Record
		bad  string
		berr error
	)
	if home && c.wasMovedHome(rel) {
		return // checked where it was found (misplaced)
	}
	if !typ.IsRegular() {
		bad = userfile.TypeName(typ) + ", not a regular file"
	} else {
		data, err := c.readRecord(rel)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return // removed meanwhile
		case errors.Is(err, seam.ErrNotRegular):
			bad, berr = "not a regular file", err
		case err != nil:
			r.add(c.ioFinding(rel, "cannot read", err))
			return
		default:
			rec, berr = decodeRecord(data, t.kind, id)
			if berr != nil {
				bad = "does not validate: " + berr.Error()
			}
		}
	}
	c.records.Add(1)
	if bad != "" {
		r.add(c.invalid(t, rel, id, home, bad, berr))
		return
	}
	if !home {
		r.add(c.misplaced(t, rel, id))
		return
	}
	r.records++
	r.add(c.markRecord(t, id, rec)) // a scan worker: its findings go through r
	r.add(c.tallyRecord(t, id, rec))
	switch {
	case rec.Live(c.opt.Now):
		r.live++
	case rec.Status == leasefmt.Leased || rec.Status == leasefmt.Committing:
		r.expired++
	}
	if t.kind == leasefmt.Work && rec.Status == leasefmt.Committing && rec.Publish != "" {
		c.mu.Lock()
		c.committing = append(c.committing, committingRec{id: id, token: rec.Token, publish: rec.Publish, expires: rec.ExpiresAt})
		c.mu.Unlock()
	}
	if t.kind == leasefmt.Work {
		c.namePublished(rec)
	}
	switch {
	case t.kind == leasefmt.Group:
		r.add(c.checkGroup(rel, rec))
	case t.kind == leasefmt.Target && rec.Live(c.opt.Now):
		if r.manifests == nil {
			r.manifests = manifestCache{}
		}
		r.add(c.checkTargetGroup(rel, rec, r.manifests))
	}
}

// smallRecord is the read size tried first: records the commands write are
// a few hundred bytes, and FS.ReadFile allocates max+1 bytes for each read.
const smallRecord = 1023

// readRecord reads a record file, at most leasefmt.MaxRecordSize bytes
// plus one (so an oversize file is seen), trying a small buffer first.
func (c *checker) readRecord(rel string) ([]byte, error) {
	data, err := c.fs.ReadFile(rel, smallRecord)
	if err == nil && len(data) > smallRecord {
		data, err = c.fs.ReadFile(rel, leasefmt.MaxRecordSize)
	}
	return data, err
}

// invalid is the finding about a record that does not validate; a repair
// re-reads it under its lock and quarantines it.
func (c *checker) invalid(t task, rel string, id leasefmt.ID, home bool, bad string, cause error) *Finding {
	f := &Finding{Kind: KindInvalid, Path: rel, ID: id, Found: bad, Err: cause,
		Expected: "a valid " + t.kind.Schema() + " record", Repair: "move it to lost+found/"}
	if !c.opt.Repair {
		return f
	}
	unlock := noUnlock
	if home {
		u, err := c.lockAt(t.dir, id)
		if err != nil {
			failed(f, fmt.Errorf("record lock: %w", err))
			return f
		}
		unlock = u
	}
	defer unlock()
	fi, err := c.fs.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var data []byte
	if err == nil && fi.Mode().IsRegular() {
		data, err = c.fs.ReadFile(rel, leasefmt.MaxRecordSize)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			// Its bytes are needed: they hold the token to keep.
			failed(f, fmt.Errorf("cannot read it under its lock: %w", err))
			return f
		}
		if _, derr := leasefmt.Decode(data, t.kind, id); derr == nil {
			return nil // valid now: the next run checks it
		}
	} else if err != nil {
		failed(f, fmt.Errorf("cannot stat it under its lock: %w", err))
		return f
	}
	const why = "the record does not validate"
	if home && fi.Mode().IsRegular() && data != nil && (t.kind == leasefmt.Work || t.kind == leasefmt.Target) {
		// Copied aside, then replaced in place: the ID never has no record.
		moved, err := c.quarantineCopy(rel, f, why, data)
		if err != nil {
			failed(f, err)
			return f
		}
		f.MovedTo = moved
		fixed(f, "copied to "+moved)
		c.placeholder(f, t.kind, id, data)
		return f
	}
	c.quarantineInto(rel, f, why)
	if home {
		c.placeholderIfGone(f, t.kind, id, rel)
	}
	return f
}

// misplaced is the finding about a valid record outside its shard
// directory; a repair moves it home under the home lock when no record is
// there, else quarantines it.
func (c *checker) misplaced(t task, rel string, id leasefmt.ID) *Finding {
	dest := c.st.RecordPath(t.kind, id)
	f := &Finding{Kind: KindMisplaced, Path: rel, ID: id,
		Found:    fmt.Sprintf("a valid record of shard %s in %s/", path.Base(path.Dir(dest)), t.dir),
		Expected: "in " + path.Dir(dest) + "/", Repair: "move it to " + path.Dir(dest) + "/, or to lost+found/ when a record is there"}
	if !c.opt.Repair {
		return f
	}
	unlock, err := c.st.Lock(c.ctx, t.kind, id)
	if err != nil {
		failed(f, fmt.Errorf("record lock: %w", err))
		return f
	}
	defer unlock()
	if _, err := c.fs.Lstat(rel); errors.Is(err, fs.ErrNotExist) {
		return nil // moved by another repair since the scan
	} else if err != nil {
		failed(f, fmt.Errorf("re-check under the lock: %w", err)) // nothing moved unseen
		return f
	}
	_, err = c.fs.Lstat(dest)
	switch {
	case err == nil:
		if c.quarantineInto(rel, f, "a record of this ID is already at "+dest) {
			f.Done = "a record is already in " + path.Dir(dest) + "/; moved to " + f.MovedTo
		}
		return f
	case !errors.Is(err, fs.ErrNotExist):
		failed(f, err)
		return f
	}
	// Named before the move: the home's listing may see it the moment it
	// is renamed there.
	c.setMovedHome(dest, true)
	err = c.disk.Move(rel, dest)
	if err != nil {
		c.setMovedHome(dest, false)
	}
	if errors.Is(err, fs.ErrExist) {
		if c.quarantineInto(rel, f, "a record of this ID is already at "+dest) {
			f.Done = "a record is already in " + path.Dir(dest) + "/; moved to " + f.MovedTo
		}
		return f
	}
	if err != nil {
		failed(f, err)
		return f
	}
	f.MovedTo = dest
	fixed(f, "moved to "+dest)
	if t.kind == leasefmt.Work {
		// Home now, it needs what the tally keeps of it (tally.go).
		data, err := c.readRecord(dest)
		if err == nil {
			if rec, derr := decodeRecord(data, leasefmt.Work, id); derr == nil {
				err = c.retallyLocked(rec)
			}
		}
		if err != nil {
			failed(f, fmt.Errorf("moved to %s, but the tally could not be kept: %w", dest, err))
		}
	}
	return f
}

// wasMovedHome reports whether this run moved a misplaced record to rel:
// whether its home's listing saw it there or not, it is counted once.
func (c *checker) wasMovedHome(rel string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.movedHome[rel]
}

func (c *checker) setMovedHome(rel string, moved bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.movedHome == nil {
		c.movedHome = map[string]bool{}
	}
	if moved {
		c.movedHome[rel] = true
	} else {
		delete(c.movedHome, rel)
	}
}
