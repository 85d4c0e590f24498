package fsck

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// topDirs are the directories of the layout (docs/design.md#layout), lost+found/ last
// because it is checked first, on its own.
var topDirs = []string{leasefmt.Work.Dir(), leasefmt.Target.Dir(), leasefmt.Group.Dir(), layout.StageDir, layout.PublicDir, layout.LostFound}

// checkLostFound makes sure lost+found/ is a directory before anything is
// moved into it. Whatever is in its place is moved aside and then into the
// new lost+found/.
func (c *checker) checkLostFound() {
	fi, err := c.fs.Lstat(layout.LostFound)
	if err == nil && fi.IsDir() {
		return
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.emit(c.ioFinding(layout.LostFound, "cannot stat", err))
		return
	}
	f := &Finding{Kind: KindLayout, Path: layout.LostFound, Found: "missing", Expected: "a directory", Repair: "create it"}
	if err == nil {
		f.Found = userfile.TypeName(fi.Mode())
		if fi.Mode()&fs.ModeSymlink != 0 {
			f.Kind, f.Found = KindSymlink, c.readLink(layout.LostFound)+" (never followed)"
		}
		f.Repair = "move it aside, create the directory and move it into it"
	}
	if !c.opt.Repair {
		c.emit(f)
		return
	}
	aside := ""
	if err == nil {
		aside = fmt.Sprintf(".lost+found.aside.%d", unixNanos())
		if err := c.fs.RenameNoReplace(layout.LostFound, aside); err != nil {
			failed(f, err)
			c.emit(f)
			return
		}
	}
	if err := c.mkdirDurably(layout.LostFound); err != nil {
		failed(f, err)
		c.emit(f)
		return
	}
	if aside == "" {
		fixed(f, "created")
		c.emit(f)
		return
	}
	moved, err := c.quarantine(aside, f, "it was where lost+found/ belongs")
	if err != nil {
		failed(f, fmt.Errorf("created lost+found/, but the old one is still at %s: %w", aside, err))
	} else {
		f.MovedTo = moved
		fixed(f, "created the directory; the old one moved to "+moved)
	}
	c.emit(f)
}

// checkTop checks the other names at the top of the table.
func (c *checker) checkTop() {
	ents, err := c.readDirSorted("")
	if err != nil {
		c.emit(c.ioFinding("", "cannot list the table root", err))
		return
	}
	seen := map[string]fs.FileMode{}
	for _, e := range ents {
		name, typ := e.Name(), e.Type()
		seen[name] = typ
		switch {
		case name == layout.TableFile, name == layout.LostFound:
			// phase 1 and checkLostFound
		case isTopDir(name):
			if typ.IsDir() {
				continue
			}
			f := &Finding{Kind: KindLayout, Path: name, Found: userfile.TypeName(typ), Expected: "a directory",
				Repair: "move it to lost+found/ and create the directory"}
			if typ&fs.ModeSymlink != 0 {
				f.Kind, f.Found = KindSymlink, c.readLink(name)+" (never followed)"
			}
			if c.opt.Repair {
				if c.quarantineInto(name, f, "it was where a directory of the table belongs") {
					if err := c.mkdirDurably(name); err != nil {
						failed(f, fmt.Errorf("moved to %s, but cannot create the directory: %w", f.MovedTo, err))
					} else {
						f.Done += "; created the directory"
					}
				}
			}
			c.emit(f)
		case strings.HasPrefix(name, "."+layout.TableFile+".tmp."):
			c.emit(c.rootTemp(name, typ))
		default:
			c.emit(c.unknownOrLink(name, typ, "only TABLE and the directories of the table"))
		}
	}
	for _, d := range topDirs {
		if _, ok := seen[d]; ok || d == layout.LostFound {
			continue
		}
		f := &Finding{Kind: KindLayout, Path: d, Found: "missing", Expected: "a directory", Repair: "create it"}
		if c.opt.Repair {
			if err := c.mkdirDurably(d); err != nil {
				failed(f, err)
			} else {
				fixed(f, "created")
			}
		}
		c.emit(f)
	}
}

// optionalDirs are top-level directories a table may lack: made on demand.
var optionalDirs = []string{layout.QueueDir, layout.HeldDir, layout.InputDir, durable.ReserveDir, layout.TallyDir}

func isTopDir(name string) bool {
	for _, d := range append(topDirs, optionalDirs...) {
		if d == name {
			return true
		}
	}
	return false
}

// rootTemp is a temp file of the TABLE header left by a `lease init` that
// died. Once a valid TABLE exists no creator writes one again.
func (c *checker) rootTemp(name string, typ fs.FileMode) *Finding {
	if typ&fs.ModeSymlink != 0 {
		return c.unknownOrLink(name, typ, "")
	}
	f := &Finding{Kind: KindTemp, Path: name, Found: "a temp file of the table header left by a creator that did not finish",
		Expected: "no temp file once TABLE exists", Repair: "remove it"}
	if !c.opt.Repair {
		return f
	}
	if _, err := c.fs.ReadFile(layout.TableFile, leasefmt.MaxRecordSize); err != nil {
		failed(f, fmt.Errorf("TABLE is not readable (%v): a creator may still need it", err))
		return f
	}
	if err := c.removeDurably(name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		failed(f, err)
		return f
	}
	fixed(f, "removed")
	return f
}

// quarantineInto quarantines rel for f and records the outcome on f.
func (c *checker) quarantineInto(rel string, f *Finding, why string) bool {
	moved, err := c.quarantine(rel, f, why)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && c.vanished(rel) {
			f.gone = true // renamed or removed meanwhile: nothing to move
			return false
		}
		failed(f, err)
		return false
	}
	f.MovedTo = moved
	fixed(f, "moved to "+moved)
	return true
}

// unknownOrLink is the finding about a name that is not part of the table:
// a symbolic link is an error (quarantined by a repair), anything else a
// notice; a directory is also walked for links.
func (c *checker) unknownOrLink(rel string, typ fs.FileMode, want string) *Finding {
	if typ&fs.ModeSymlink != 0 {
		return c.symlink(rel, "", noUnlock)
	}
	f := &Finding{Kind: KindUnknown, Path: rel, Found: userfile.TypeName(typ) + " that is not part of a lease table", Expected: want}
	if typ.IsDir() {
		c.emit(f)
		c.walkLinks(rel, 0)
		return nil
	}
	return f
}

// symlink is the finding about a symbolic link at rel; a repair moves the
// link (never its target) to lost+found/ while holding lock (taken by the
// caller when rel is a record's name, else a no-op).
func (c *checker) symlink(rel string, id leasefmt.ID, unlock func()) *Finding {
	defer unlock()
	f := &Finding{Kind: KindSymlink, Path: rel, ID: id, Found: c.readLink(rel) + " (never followed)",
		Expected: "no symbolic links in a lease table", Repair: "move the link to lost+found/"}
	if c.opt.Repair {
		fi, err := c.fs.Lstat(rel)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil && fi.Mode()&fs.ModeSymlink == 0 {
			return nil // replaced by a real file meanwhile: the next run checks it
		}
		c.quarantineInto(rel, f, "symbolic links are never followed in a lease table")
	}
	return f
}

// walkLinks reports the symbolic links below a directory that is not part
// of the table (or is user data: stage/, public/).
func (c *checker) walkLinks(dir string, depth int) {
	if depth > 32 {
		return
	}
	ents, err := c.readDirSorted(dir)
	if err != nil {
		c.emit(c.listFailed(dir, "cannot list", err))
		return
	}
	for _, e := range ents {
		rel := path.Join(dir, e.Name())
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			c.emit(c.symlink(rel, "", noUnlock))
		case e.IsDir():
			c.walkLinks(rel, depth+1)
		}
	}
}

// checkKindDirs checks the entries of work/, targets/ and groups/ and
// returns the directories to scan: the shard directories, then any other
// directory (whose valid records are all misplaced).
func (c *checker) checkKindDirs() []task {
	var tasks []task
	for _, k := range kinds {
		n := c.st.Table().Shards(k)
		fi, err := c.fs.Lstat(k.Dir())
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.emit(c.ioFinding(k.Dir(), "cannot stat", err))
			continue
		}
		if err != nil || !fi.IsDir() {
			continue // reported by checkTop
		}
		ents, err := c.readDirSorted(k.Dir())
		if err != nil {
			c.emit(c.listFailed(k.Dir(), "cannot list", err))
			continue
		}
		var other []task
		for _, e := range ents {
			name, typ := e.Name(), e.Type()
			rel := path.Join(k.Dir(), name)
			sh, isShard := leasefmt.ParseShardDirName(name, n)
			switch {
			case isShard && typ.IsDir():
				tasks = append(tasks, task{kind: k, dir: rel, shard: sh})
			case isShard:
				f := &Finding{Kind: KindLayout, Path: rel, Found: userfile.TypeName(typ), Expected: "a shard directory",
					Repair: "move it to lost+found/ and create the directory"}
				if typ&fs.ModeSymlink != 0 {
					f.Kind, f.Found = KindSymlink, c.readLink(rel)+" (never followed)"
				}
				if c.opt.Repair && c.quarantineInto(rel, f, "it was where a shard directory belongs") {
					if err := c.mkdirDurably(rel); err != nil {
						failed(f, fmt.Errorf("moved to %s, but cannot create the directory: %w", f.MovedTo, err))
					} else {
						f.Done += "; created the directory"
					}
				}
				c.emit(f)
			case typ.IsDir():
				c.emit(&Finding{Kind: KindUnknown, Path: rel, Found: "a directory that is not a shard directory of this table",
					Expected: fmt.Sprintf("only the shard directories %s..%s", leasefmt.ShardDirName(0, n), leasefmt.ShardDirName(n-1, n))})
				other = append(other, task{kind: k, dir: rel, shard: -1})
			default:
				c.emit(c.unknownOrLink(rel, typ, "only shard directories"))
			}
		}
		tasks = append(tasks, other...)
	}
	return tasks
}
