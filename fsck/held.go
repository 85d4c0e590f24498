package fsck

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// The held/ phase (docs/design.md#queue, abandoned first): held/ID.E.TOKEN
// is an empty regular file per work lease in flight, made by its claim and
// removed when the lease ends. held/ is optional (a table made before it,
// or never claimed from) and only an accelerator of claims, so:
//   - a name of an item not held under that token (its finisher was
//     killed before the removal, a crash brought it back) is debris: a
//     notice, removed by --repair under the record's lock;
//   - anything else in held/ (a name that is not ID.E.TOKEN, a file that
//     is not regular and empty, a directory) is an error, moved to
//     lost+found/ by --repair; a symbolic link is never followed.

// checkHeld checks held/ when it is a directory (checkTop reports it when
// it is anything else).
func (c *checker) checkHeld() {
	fi, err := c.fs.Lstat(layout.HeldDir)
	if err != nil || !fi.IsDir() {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.emit(c.ioFinding(layout.HeldDir, "cannot stat", err))
		}
		return
	}
	ents, err := c.readDirSorted(layout.HeldDir)
	if err != nil {
		c.emit(c.listFailed(layout.HeldDir, "cannot list", err))
		return
	}
	for _, e := range ents {
		if f := c.checkHeldName(e); f != nil {
			c.emit(f)
		}
	}
}

func (c *checker) checkHeldName(e fs.DirEntry) *Finding {
	rel := path.Join(layout.HeldDir, e.Name())
	typ := e.Type()
	if typ&fs.ModeSymlink != 0 {
		return c.symlink(rel, "", noUnlock)
	}
	id, _, token, ok := layout.ParseHeldName(e.Name())
	if f, ok := c.emptyEntry(rel, typ, ok, emptyEntryRule{kind: KindHeld, id: id, name: "ID.EXPIRY.TOKEN",
		expected: "an empty regular file ID.EXPIRY.TOKEN per lease held", rule: "a held/ name is an empty file ID.EXPIRY.TOKEN"}); !ok {
		return f // not such a file (f), or removed since the listing (a finish, a claim)
	}
	rec, err := c.st.Read(c.ctx, leasefmt.Work, id)
	if err != nil && !errors.Is(err, leasefmt.ErrCorrupt) {
		return c.ioFinding(rel, "cannot read the record of the held/ name", err)
	}
	if err != nil || heldBy(rec, token) {
		return nil // held (or a corrupt record: the record check reports it)
	}
	f := &Finding{Kind: KindHeld, Path: rel, ID: id, Debris: true, Found: "the name of " + notHeld(rec, token),
		Expected: "names of leases held (a finisher killed before removing its name)", Repair: "remove it"}
	if !c.opt.Repair {
		return f
	}
	unlock, err := c.lockAt(path.Dir(c.st.RecordPath(leasefmt.Work, id)), id)
	if errors.Is(err, commit.ErrLockTimeout) {
		failed(f, errors.New("the record's lock is busy: the next repair looks again"))
		return f
	}
	if err != nil {
		failed(f, err)
		return f
	}
	defer unlock()
	if rec, err = c.st.Read(c.ctx, leasefmt.Work, id); err != nil {
		failed(f, err)
		return f
	}
	if heldBy(rec, token) {
		return nil // claimed meanwhile under that token: not debris
	}
	// Not fsynced: a name a crash brings back is removed again.
	if err := c.fs.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		failed(f, err)
		return f
	}
	fixed(f, "removed")
	return f
}

// heldBy reports whether rec is a lease in flight under token.
func heldBy(rec *leasefmt.Record, token int64) bool {
	return rec != nil && rec.Token == token && (rec.Status == leasefmt.Leased || rec.Status == leasefmt.Committing)
}

func notHeld(rec *leasefmt.Record, token int64) string {
	switch {
	case rec == nil:
		return "an item with no record"
	case rec.Token != token:
		return fmt.Sprintf("token %d, but the record's token is %d (%s)", token, rec.Token, rec.Status)
	}
	return fmt.Sprintf("an item %s (token %d)", rec.Status, rec.Token)
}
