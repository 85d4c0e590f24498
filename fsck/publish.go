package fsck

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// checkPublish checks stage/ and public/ against the committing work
// records that name a result (`lease complete --publish`):
//
//   - a staged name that is the same file as the published one (a link
//     left when the no-replace move fell back to link+unlink and died
//     between them) is a leftover: the stage/ name is removed, the bytes
//     stay in public/;
//   - a committing record whose result is in public/ and no longer in
//     stage/ crashed between the move and done: it is rolled forward to
//     done, under its lock, as `lease complete` would have;
//   - links anywhere below stage/ or public/ are reported.
func (c *checker) checkPublish() {
	sort.Slice(c.committing, func(a, b int) bool { return c.committing[a].id < c.committing[b].id })
	byName := map[string][]committingRec{}
	for _, cr := range c.committing {
		byName[cr.publish] = append(byName[cr.publish], cr)
	}
	leftover := map[string]bool{}
	if c.isDir(commit.StageDir) {
		ents, err := c.readDirSorted(commit.StageDir)
		if err != nil {
			c.emit(c.ioFinding(commit.StageDir, "cannot list", err))
		}
		for _, e := range ents {
			name, typ := e.Name(), e.Type()
			rel := path.Join(commit.StageDir, name)
			switch {
			case typ&fs.ModeSymlink != 0:
				c.emit(c.symlink(rel, "", noUnlock))
			case typ.IsDir():
				c.walkLinks(rel, 0)
			case typ.IsRegular():
				if f := c.checkLeftover(name, byName[name]); f != nil {
					leftover[name] = true
					c.emit(f)
				}
			}
		}
	}
	if c.isDir(commit.PublicDir) {
		c.walkLinks(commit.PublicDir, 0)
	}
	for _, cr := range c.committing {
		c.emit(c.checkUnfinished(cr, leftover[cr.publish]))
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

// sameFile reports whether a and b are the same regular file (one inode).
func sameFile(a, b fs.FileInfo) bool {
	if a == nil || b == nil || !a.Mode().IsRegular() || !b.Mode().IsRegular() {
		return false
	}
	ka, oka := inode(a)
	kb, okb := inode(b)
	return oka && okb && ka == kb
}

type fileKey struct{ dev, ino uint64 }

func inode(fi fs.FileInfo) (fileKey, bool) {
	switch st := fi.Sys().(type) {
	case *unix.Stat_t:
		return fileKey{uint64(st.Dev), st.Ino}, true
	case *syscall.Stat_t:
		return fileKey{uint64(st.Dev), st.Ino}, true
	}
	return fileKey{}, false
}

// leftoverState reports whether stage/name and public/name are one file.
func (c *checker) leftoverState(name string) (bool, error) {
	sfi, err := c.fs.Lstat(path.Join(commit.StageDir, name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	pfi, err := c.fs.Lstat(path.Join(commit.PublicDir, name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	return sameFile(sfi, pfi), nil
}

// lockAll takes the locks of the work records crs, in ID order.
func (c *checker) lockAll(crs []committingRec) (func(), error) {
	l := c.newGroupLocker()
	for _, cr := range crs {
		if err := l.take(leasefmt.Work, cr.id); err != nil {
			l.release()
			return noUnlock, err
		}
	}
	return l.release, nil
}

func (c *checker) checkLeftover(name string, crs []committingRec) *Finding {
	same, err := c.leftoverState(name)
	if err != nil {
		return c.ioFinding(path.Join(commit.StageDir, name), "cannot stat", err)
	}
	if !same {
		return nil
	}
	rel := path.Join(commit.StageDir, name)
	pub := path.Join(commit.PublicDir, name)
	f := &Finding{Kind: KindPublishLeftover, Path: rel, Found: "the same file as " + pub + " (a publication that finished but did not remove the staged name)",
		Expected: "no staged name once the result is published", Repair: "remove the stage/ name (the bytes stay in " + pub + ")"}
	if len(crs) > 0 {
		f.ID = crs[0].id
	}
	if !c.opt.Repair {
		return f
	}
	// A publisher of this name holds its record's lock while it moves.
	unlock, err := c.lockAll(crs)
	if err != nil {
		failed(f, err)
		return f
	}
	defer unlock()
	if same, err := c.leftoverState(name); err != nil || !same {
		if err != nil {
			failed(f, err)
			return f
		}
		return nil
	}
	if err := c.removeDurably(rel); err != nil {
		failed(f, err)
		return f
	}
	fixed(f, "removed the stage/ name; the result is in "+pub)
	return f
}

// checkUnfinished rolls a committing record forward to done when its result
// is published: in public/, and no longer in stage/ (or only as a leftover
// link, which a read-only run counts as gone).
func (c *checker) checkUnfinished(cr committingRec, leftover bool) *Finding {
	rel := c.st.RecordPath(leasefmt.Work, cr.id)
	staged, public := path.Join(commit.StageDir, cr.publish), path.Join(commit.PublicDir, cr.publish)
	published := func() (bool, error) {
		pfi, err := c.fs.Lstat(public)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !pfi.Mode().IsRegular() {
			return false, nil
		}
		_, err = c.fs.Lstat(staged)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return true, nil
		case err != nil:
			return false, err
		}
		return leftover && !c.opt.Repair, nil
	}
	ok, err := published()
	if err != nil {
		return c.ioFinding(rel, "cannot stat the published result", err)
	}
	if !ok {
		return nil
	}
	f := &Finding{Kind: KindUnfinishedPublish, Path: rel, ID: cr.id,
		Found:    fmt.Sprintf("committing (token %d) with its result %s already in %s/", cr.token, leasefmt.Quote(cr.publish), commit.PublicDir),
		Expected: "done once the result is published", Repair: "roll it forward to done"}
	if !c.opt.Repair {
		return f
	}
	unlock, err := c.st.Lock(leasefmt.Work, cr.id)
	if err != nil {
		failed(f, fmt.Errorf("record lock: %w", err))
		return f
	}
	defer unlock()
	cur, err := c.st.Read(leasefmt.Work, cr.id)
	if err != nil {
		failed(f, err)
		return f
	}
	if cur == nil || cur.Status != leasefmt.Committing || cur.Token != cr.token || cur.Publish != cr.publish {
		return nil // finished or taken meanwhile
	}
	if ok, err := published(); err != nil || !ok {
		if err != nil {
			failed(f, err)
			return f
		}
		return nil
	}
	next, out, detail := commit.DoneDecision(c.opt.Now)(commit.Item{ID: cr.id, Token: cr.token}, cur)
	if out != commit.OK {
		failed(f, fmt.Errorf("%s: %s", out.Reason(), detail))
		return f
	}
	if err := c.st.WriteOne(next); err != nil {
		failed(f, err)
		return f
	}
	fixed(f, fmt.Sprintf("rolled forward to done (token %d)", next.Token))
	return f
}
