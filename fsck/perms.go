package fsck

// Permissions of a table. In a shared table (lease init --shared) every
// directory must be setgid and usable by the group, and every shard lock
// file writable by it, all in the root's group; otherwise a member of the
// group cannot lock or write there. The root and stage/ are also sticky
// (seam.StickyDirs): otherwise a member can rename another's live staging
// directory, stage/ or TABLE and put a link at its name. The sharing TABLE records is bounded
// by the root's own mode (commit.RootSharing): a TABLE asking for more
// (a member may rename another TABLE over it) is an error, never applied.
// No lock file may be readable by an account that may not write it (an
// fcntl read lock needs only that, and stops every writer of the shard)
// and no directory writable by others. Tables that are not shared are not
// checked: their modes are their owner's business (lease makes their lock
// files 0600).

import (
	"errors"
	"fmt"
	"io/fs"
	"os/user"
	"path"
	"strconv"
	"strings"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// checkPerms checks TABLE's sharing and the directories and lock files of
// a shared table.
func (c *checker) checkPerms(t *leasefmt.Table) {
	sh, shared, widened, err := commit.RootSharing(c.fs, t)
	if err != nil {
		// No command opens the table with it (exit 3): a member may have
		// replaced TABLE.
		c.emit(&Finding{Kind: KindPermission, Path: layout.TableFile, Found: err.Error(),
			Expected: "the sharing lease init --shared recorded: group, all or an octal mode that does not let others write (a member of the group may have replaced TABLE)",
			Repair:   "none automatic: restore TABLE from the owner's copy"})
		return
	}
	root, err := c.fs.Lstat("")
	if err != nil {
		c.emit(c.ioFinding("", "cannot read the mode of the table root", err))
		return
	}
	rootMode, _, gid, ok := seam.Owner(root)
	if !ok {
		return
	}
	if shared {
		seam.Share(c.fs, sh) // what a repair creates is shared too
		if widened != nil {
			// Never repaired: only the owner knows what it chose at init,
			// and the modes applied are bounded all the same.
			c.emit(&Finding{Kind: KindPermission, Path: layout.TableFile,
				Found:    fmt.Sprintf("the sharing %s, which the root's mode %04o does not allow: %v", leasefmt.Quote(sh.Name), rootMode, widened),
				Expected: "the sharing lease init --shared recorded, within the root's mode (a member of the group may have replaced TABLE); lease applies only what the root's mode allows",
				Repair:   "none automatic: restore TABLE from the owner's copy, or, as the owner, change the root's mode if the table is meant to be shared so"})
		}
	}
	if !shared {
		return
	}
	p := permCheck{c: c, sh: sh, gid: gid}
	p.check("", true)
	dirs := []string{leasefmt.Work.Dir(), leasefmt.Target.Dir(), leasefmt.Group.Dir(), layout.StageDir, layout.PublicDir, layout.LostFound, "queue", layout.HeldDir}
	for _, top := range dirs {
		if !p.check(top, true) {
			continue
		}
		ents, err := c.fs.ReadDir(top)
		if err != nil {
			continue // checkTop and the scan report it
		}
		for _, e := range ents {
			if !e.IsDir() || top == layout.StageDir || top == layout.LostFound {
				// A staging directory is its claimer's alone while the
				// lease is held (mode 0700): publication gives its
				// result the group's modes (docs/safety.md). What was
				// moved to lost+found/ keeps the modes it had.
				continue
			}
			sub := path.Join(top, e.Name())
			p.check(sub, true)
			if top == leasefmt.Work.Dir() || top == leasefmt.Target.Dir() || top == leasefmt.Group.Dir() {
				p.check(path.Join(sub, layout.LockFile), false)
			}
		}
	}
}

type permCheck struct {
	c   *checker
	sh  seam.Sharing
	gid int
}

// excess is the bits of mode that no entry of its type may have: for a
// directory, write by others; for a lock file, any bit of others, and read
// by the group when the group may not write it.
func excess(mode uint32, dir bool) uint32 {
	if dir {
		return mode & 0o002
	}
	x := mode & 0o007
	if mode&0o020 == 0 {
		x |= mode & 0o040
	}
	return x
}

// check checks the directory (dir) or lock file rel and reports a finding
// when it keeps the group out, or lets in an account it must not; it
// returns false when rel is not there or not of its type (other phases
// report that).
func (p permCheck) check(rel string, dir bool) bool {
	fi, err := p.c.fs.Lstat(rel)
	if err != nil || fi.IsDir() != dir || (!dir && !fi.Mode().IsRegular()) {
		return false
	}
	mode, _, gid, ok := seam.Owner(fi)
	if !ok {
		return true
	}
	need, what := p.sh.LockBits(), "lock file"
	if dir {
		need, what = p.sh.DirBitsOf(rel), "directory"
	}
	extra := excess(mode, dir)
	var wrong []string
	if mode&need != need {
		wrong = append(wrong, fmt.Sprintf("mode %04o lacks %04o", mode, need&^mode))
	}
	if extra != 0 {
		who, does := "others", "write in it"
		if extra&0o070 != 0 {
			who = "the group, which may not write it,"
		}
		if !dir {
			does = "open it: a read lock held there stops every writer of the shard"
		}
		wrong = append(wrong, fmt.Sprintf("mode %04o lets %s %s (%04o)", mode, who, does, extra))
	}
	if gid != p.gid {
		wrong = append(wrong, fmt.Sprintf("group %s, not the root's %s", groupName(gid), groupName(p.gid)))
	}
	if len(wrong) == 0 {
		return true
	}
	name := rel
	if name == "" {
		name = "."
	}
	want := (mode | need) &^ extra
	f := &Finding{Kind: KindPermission, Path: name, Found: what + " " + strings.Join(wrong, ", "),
		Expected: fmt.Sprintf("the bits %04o set and group %s (the table is shared: %s), so that every member of the group can use it", need, groupName(p.gid), p.sh.Name),
		Repair:   fmt.Sprintf("set mode %04o and group %s (as the owner or root)", want, groupName(p.gid))}
	if extra != 0 {
		f.Expected += "; never " + fmt.Sprintf("%04o", extra)
	}
	if p.c.opt.Repair {
		fixer, ok := seam.As[seam.PermFixer](p.c.fs)
		switch {
		case !ok:
			failed(f, fmt.Errorf("this filesystem cannot set modes: %w", errors.ErrUnsupported))
		default:
			g := -1
			if gid != p.gid {
				g = p.gid
			}
			err := fixer.FixPerm(rel, want, g)
			switch {
			case errors.Is(err, seam.ErrNotInPlace):
				// Not what the Lstat above saw (a link or a hard link
				// swapped in): never changed in place, moved away.
				f.Found += fmt.Sprintf(" (now %v)", errors.Unwrap(err))
				f.Repair = "move it to lost+found/ (a mode is never changed through a link)"
				p.c.quarantineInto(rel, f, "an entry whose mode lease may not change in place: "+err.Error())
			case err != nil:
				if errors.Is(err, fs.ErrPermission) {
					err = fmt.Errorf("%w (only the owner of %s or root can change it)", err, name)
				}
				failed(f, err)
			default:
				fixed(f, fmt.Sprintf("set mode %04o, group %s", want, groupName(p.gid)))
			}
		}
	}
	p.c.emit(f)
	return true
}

// checkReadLocks reports each shard lock file held by a read lock (kind
// lock). lease's writers take write locks only, so a read lock was taken
// by a process that could not have held a lease, and it stops every writer
// of the shard; nothing lease can do releases it. One sequential pass over
// the shards' lock files, before the records are scanned.
func (c *checker) checkReadLocks(t *leasefmt.Table) {
	finder, ok := seam.As[seam.ReadLockFinder](c.fs)
	if !ok {
		return
	}
	for _, k := range kinds {
		n := t.Shards(k)
		for sh := 0; sh < n; sh++ {
			rel := path.Join(k.Dir(), leasefmt.ShardDirName(sh, n), layout.LockFile)
			locked, pid, err := finder.ReadLocked(rel)
			if err != nil || !locked {
				continue // missing, not a regular file, or not ours to open: other checks say so
			}
			who := "a process that could only read it (an OFD lock: the kernel does not name its pid)"
			if pid > 0 {
				who = fmt.Sprintf("process %d, which could only read it", pid)
			}
			f := &Finding{Kind: KindLock, Path: rel, Found: "held by a read lock of " + who + ": every writer of the shard waits for it",
				Expected: "only the write locks of lease's writers",
				Repair:   "none automatic: stop that process; make the lock file readable only by those who may write the table (lease fsck --repair does in a shared table, for the next opener)"}
			if c.opt.Repair {
				failed(f, seam.ErrReadLocked)
			}
			c.emit(f)
		}
	}
}

// groupName is the name of group gid, or the number.
func groupName(gid int) string {
	s := strconv.Itoa(gid)
	if g, err := user.LookupGroupId(s); err == nil {
		return g.Name
	}
	return s
}
