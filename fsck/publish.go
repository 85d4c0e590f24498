package fsck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// The publish phase checks stage/ and public/ against the work records
// (docs/design.md#records, #staging), in an order that converges in one repair run:
//
//  1. committing records that name a published result and whose publisher
//     is gone are settled under their lock, as the next claim would: rolled
//     forward to done when the result reached public/ (at any time: the
//     completer holds the lock throughout, so a committing record met under
//     the lock has no completer at work), rolled back to released when it
//     did not and the lease expired (with clock_skew);
//  2. every entry of stage/ must be a staging directory ID.TOKEN of a
//     current lease (leased or committing with that token); anything else
//     is stale: a name that is the same file (one inode) as its public/
//     name (a link left when a no-replace move fell back to link and
//     unlink) is removed, an empty directory is removed, and the rest is
//     moved to lost+found/, never deleted (a staged file that merely holds
//     the bytes of a published one included);
//  3. every result in public/ (a file or a directory) must be named by a
//     done or committing work record (its "publish"; "." names public/ID,
//     the whole staging directory of ID); an orphan is moved to
//     lost+found/;
//  4. links anywhere below stage/ or public/ are reported.

// listPublic reads the names in public/ before the record scan, so that
// the scan can tell which of them a record names. A result reaches
// public/ only after a committing record naming it is durable, and every
// later state of that record keeps the name, so a result listed here and
// named by no record the scan then reads is an orphan.
func (c *checker) listPublic() {
	if !c.isDir(layout.PublicDir) {
		return
	}
	ents, err := c.readDirSorted(layout.PublicDir)
	if err != nil {
		c.emit(c.listFailed(layout.PublicDir, "cannot list", err))
		return
	}
	c.public = map[string]bool{}
	for _, e := range ents {
		if e.Type().IsRegular() || e.IsDir() { // a result is a file or a directory
			c.public[e.Name()] = false
		}
	}
}

// namePublished records that a work record names a result in public/.
func (c *checker) namePublished(rec *leasefmt.Record) {
	if rec.Publish == "" || (rec.Status != leasefmt.Done && rec.Status != leasefmt.Committing) {
		return
	}
	name := rec.Publish
	if name == leasefmt.PublishStage {
		name = string(rec.ID) // the whole staging directory, published as public/ID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.public[name]; ok {
		c.public[name] = true
	}
}

func (c *checker) checkPublish() {
	sort.Slice(c.committing, func(a, b int) bool { return c.committing[a].id < c.committing[b].id })
	for _, cr := range c.committing {
		c.emit(c.checkCommitting(cr))
	}
	if c.isDir(layout.StageDir) {
		ents, err := c.readDirSorted(layout.StageDir)
		if err != nil {
			c.emit(c.listFailed(layout.StageDir, "cannot list", err))
		}
		for _, e := range ents {
			c.checkStageEntry(e.Name(), e.Type())
		}
	}
	// Orphans only after a whole, successful scan of the work records: a
	// record not read (a shard not listed, a SHARD argument) may name one.
	names := make([]string, 0, len(c.public))
	for name, named := range c.public {
		if !named && !c.partial.Load() && len(c.opt.Shards) == 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		c.emit(c.orphan(name))
	}
	if c.isDir(layout.PublicDir) {
		c.walkLinks(layout.PublicDir, 0)
	}
}

// isDir reports whether rel is a directory; an I/O error is an io finding
// (a missing name or another type is checkTop's).
func (c *checker) isDir(rel string) bool {
	fi, err := c.fs.Lstat(rel)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.emit(c.ioFinding(rel, "cannot stat", err))
	}
	return err == nil && fi.IsDir()
}

// checkCommitting settles a committing record that names a published
// result once its publisher is gone.
func (c *checker) checkCommitting(cr committingRec) *Finding {
	rel := c.st.RecordPath(leasefmt.Work, cr.id)
	moved, err := c.st.ResultPublished(cr.id, cr.token, cr.publish)
	if err != nil {
		return c.ioFinding(rel, "cannot stat the published result", err)
	}
	var f *Finding
	switch {
	case moved:
		f = &Finding{Kind: KindUnfinishedPublish, Path: rel, ID: cr.id,
			Found:    fmt.Sprintf("committing (token %d) with its result %s already in %s/", cr.token, leasefmt.Quote(cr.publish), layout.PublicDir),
			Expected: "done once the result is published", Repair: "roll it forward to done"}
	case !commit.Taken(&leasefmt.Record{Status: leasefmt.Committing, ExpiresAt: cr.expires}, c.opt.Now, c.opt.ClockSkew):
		f = &Finding{Kind: KindAbandonedPublish, Path: rel, ID: cr.id,
			Found: fmt.Sprintf("committing (token %d), expired, its result %s still in %s/", cr.token, leasefmt.Quote(cr.publish),
				layout.StagePath(cr.id, cr.token)),
			Expected: "a publish that finished, or none", Repair: "roll it back to released (the staged file stays; the next claim redoes the work)"}
	default:
		return nil // a publish under way, or a holder that may still resume it
	}
	if !c.opt.Repair {
		return f
	}
	rec, done, err := c.st.Settle(c.ctx, cr.id)
	switch {
	case err != nil:
		failed(f, err)
	case rec == nil:
		return nil // finished or taken meanwhile
	default:
		fixed(f, done)
		c.namePublished(rec)
	}
	return f
}

// checkStageEntry checks one entry of stage/.
func (c *checker) checkStageEntry(name string, typ fs.FileMode) {
	rel := path.Join(layout.StageDir, name)
	if typ&fs.ModeSymlink != 0 {
		c.emit(c.symlink(rel, "", noUnlock))
		return
	}
	id, token, ok := layout.ParseStageName(name)
	if !ok || !typ.IsDir() {
		f := &Finding{Kind: KindStaleStage, Path: rel, Found: userfile.TypeName(typ) + " that is not a staging directory ID.TOKEN",
			Expected: "only stage/ID.TOKEN/ directories of current leases", Repair: "move it to lost+found/"}
		if c.opt.Repair {
			c.quarantineInto(rel, f, "stage/ holds only the staging directories of current leases")
		}
		c.emit(f)
		return
	}
	c.checkStageDir(rel, id, token)
}

// checkStageDir checks the staging directory of token of id, under the
// record's lock: a lease run or a claimer makes it after its claim is
// durable, so a directory whose token is not the current one of a leased
// or committing record can no longer be published from.
func (c *checker) checkStageDir(rel string, id leasefmt.ID, token int64) {
	unlock, err := c.lockAt(c.st.ShardDir(leasefmt.Work, id.Shard(c.st.Table().WorkShards)), id)
	if err != nil {
		c.emit(c.ioFinding(rel, "cannot lock the record of the staging directory", err))
		return
	}
	defer unlock()
	cur, err := c.st.Read(c.ctx, leasefmt.Work, id)
	if err != nil && !errors.Is(err, leasefmt.ErrCorrupt) {
		c.emit(c.ioFinding(rel, "cannot read the record of the staging directory", err))
		return
	}
	owner, private, serr := c.privateStage(rel)
	if errors.Is(serr, fs.ErrNotExist) {
		return // removed meanwhile (by the lease run that made it)
	}
	if serr != nil {
		c.emit(c.ioFinding(rel, "cannot stat the staging directory", serr))
		return
	}
	if cur != nil && cur.Token == token && (cur.Status == leasefmt.Leased || cur.Status == leasefmt.Committing) {
		if !private { // another account's is its alone while it holds the lease
			c.walkLinks(rel, 0)
		}
		return
	}
	why := "no work record"
	switch {
	case err != nil:
		why = "the record does not validate"
	case cur == nil:
	case cur.Token != token:
		why = fmt.Sprintf("the current token is %d", cur.Token)
	default:
		why = fmt.Sprintf("the lease is %s", cur.Status)
	}
	if private {
		c.emit(&Finding{Kind: KindStaleStage, Path: rel, ID: id, Debris: true,
			Found:    fmt.Sprintf("the staging directory of token %d, but %s (private to uid %d: only that account or root can list it and sweep it)", token, why, owner),
			Expected: "staging directories of current leases only (results of other tokens can never be published)"})
		return
	}
	ents, silly, lerr := c.readDirSilly(rel)
	if lerr != nil {
		c.emit(c.listFailed(rel, "cannot list", lerr))
		return
	}
	// Names that are the same file as their public/ name: a publication
	// that finished but did not remove the staged name.
	kept := ents[:0]
	for _, e := range ents {
		name := e.Name()
		same, err := c.linkedPublished(path.Join(rel, name))
		if err != nil {
			c.emit(c.ioFinding(path.Join(rel, name), "cannot stat", err))
			return
		}
		if !same {
			kept = append(kept, e)
			continue
		}
		lf := &Finding{Kind: KindPublishLeftover, Path: path.Join(rel, name), ID: id,
			Found:    "the same file as " + path.Join(layout.PublicDir, name) + " (a publication that finished but did not remove the staged name)",
			Expected: "no staged name once the result is published", Repair: "remove the stage/ name (the bytes stay in public/)"}
		if c.opt.Repair {
			if err := c.removeDurably(path.Join(rel, name)); errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile
			} else if err != nil {
				failed(lf, err)
				kept = append(kept, e)
			} else {
				fixed(lf, "removed the stage/ name; the result is in "+path.Join(layout.PublicDir, name))
			}
		}
		c.emit(lf)
	}
	f := &Finding{Kind: KindStaleStage, Path: rel, ID: id, Debris: true,
		Found:    fmt.Sprintf("the staging directory of token %d, but %s", token, why),
		Expected: "staging directories of current leases only (results of other tokens can never be published)"}
	if len(kept) == 0 && silly > 0 {
		// Empty but for files its NFS client renamed when they were
		// removed while open (a holder killed with a staged file open, a
		// soft mount's failed call): they are left alone as everywhere
		// (readDirSorted), and the directory with them, since moving it
		// would move them; a later repair removes it once its client
		// deleted them on close.
		f.Found += fmt.Sprintf(" (empty but for %d NFS silly-rename file(s): staged files removed while open on an NFS client, which deletes them on close)", silly)
		f.Repair = "none while they are there (moving the directory would move files that may be open); a later repair removes it once they are gone"
		c.emit(f)
		return
	}
	if len(kept) == 0 {
		f.Found += " (empty)"
		f.Repair = "remove the empty directory"
		if !c.opt.Repair {
			c.emit(f)
			return
		}
		err := c.removeDurably(rel)
		switch {
		case err == nil:
			fixed(f, "removed the empty directory")
			c.emit(f)
			return
		case errors.Is(err, fs.ErrNotExist):
			return // removed meanwhile (by the lease run that made it)
		case !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST):
			failed(f, err)
			c.emit(f)
			return
		}
		// A stale holder staged a file since the listing: its directory is
		// moved, never removed with what it holds.
		f.Found = fmt.Sprintf("the staging directory of token %d, but %s (a file was staged in it during the check)", token, why)
	} else {
		f.Found += fmt.Sprintf(" (%d entries)", len(kept))
	}
	f.Repair = "move it to lost+found/ (never deleted)"
	if c.opt.Repair {
		c.quarantineInto(rel, f, "a staging directory of a token that is no longer current: "+why)
	}
	c.emit(f)
}

// privateStage reports whether the staging directory rel is another
// account's private one (mode 0700, as lease makes them in a shared
// table), which this process (not root) can neither list nor move, and
// its owner.
func (c *checker) privateStage(rel string) (int, bool, error) {
	fi, err := c.fs.Lstat(rel)
	if err != nil || !fi.IsDir() {
		return 0, false, err
	}
	mode, uid, _, ok := seam.Owner(fi)
	euid := os.Geteuid()
	return uid, ok && uid != euid && euid != 0 && mode&0o077 == 0, nil
}

// linkedPublished reports whether the staged file at the table-relative
// name staged is one file (one inode) with public/ under its base name: a
// publication that finished and left the staged name, whose removal loses
// no byte. Equal bytes in two files are not enough: the staged copy is
// then a file of its own, and a repair never deletes a staged file.
func (c *checker) linkedPublished(staged string) (bool, error) {
	sfi, err := c.fs.Lstat(staged)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	pfi, err := c.fs.Lstat(path.Join(layout.PublicDir, path.Base(staged)))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return seam.SameFile(sfi, pfi), nil
}

// orphan is the finding about a result in public/ that no done or
// committing record names: not published by lease complete --publish, or
// published by a holder whose record was taken over since (before settling
// existed). It is moved to lost+found/ so that public/ holds exactly one
// result per completed publish.
func (c *checker) orphan(name string) *Finding {
	rel := path.Join(layout.PublicDir, name)
	f := &Finding{Kind: KindOrphanResult, Path: rel, Found: "a result that no done or committing work record names",
		Expected: "only results published by lease complete --publish", Repair: "move it to lost+found/ (never deleted)"}
	if c.opt.Repair {
		c.quarantineInto(rel, f, "no work record names this result")
	}
	return f
}
