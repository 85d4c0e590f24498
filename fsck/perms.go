package fsck

// Permissions of a shared table (lease init --shared): every directory
// must be setgid and usable by the group, and every shard lock file
// writable by it, all in the root's group; otherwise a member of the group
// cannot lock or write there. Tables that are not shared are not checked:
// their modes are their owner's business.

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
	"github.com/leasetool/lease/leasefmt"
)

// checkPerms checks the directories and lock files of a shared table.
func (c *checker) checkPerms(t *leasefmt.Table) {
	sh, ok, err := commit.TableSharing(t)
	if err != nil || !ok {
		return
	}
	seam.Share(c.fs, sh) // what a repair creates is shared too
	root, err := c.fs.Lstat("")
	if err != nil {
		c.emit(c.ioFinding("", "cannot read the mode of the table root", err))
		return
	}
	_, _, gid, ok := seam.Owner(root)
	if !ok {
		return
	}
	p := permCheck{c: c, sh: sh, gid: gid}
	p.check("", true)
	dirs := []string{leasefmt.Work.Dir(), leasefmt.Target.Dir(), leasefmt.Group.Dir(), commit.StageDir, commit.PublicDir, commit.LostFound, "queue"}
	for _, top := range dirs {
		if !p.check(top, true) {
			continue
		}
		ents, err := c.fs.ReadDir(top)
		if err != nil {
			continue // checkTop and the scan report it
		}
		for _, e := range ents {
			if !e.IsDir() || top == commit.StageDir || top == commit.LostFound {
				// A staging directory is its claimer's alone while the
				// lease is held (mode 0700): publication gives its
				// result the group's modes (docs/safety.md). What was
				// moved to lost+found/ keeps the modes it had.
				continue
			}
			sub := path.Join(top, e.Name())
			p.check(sub, true)
			if top == leasefmt.Work.Dir() || top == leasefmt.Target.Dir() || top == leasefmt.Group.Dir() {
				p.check(path.Join(sub, commit.LockFile), false)
			}
		}
	}
}

type permCheck struct {
	c   *checker
	sh  seam.Sharing
	gid int
}

// check checks the directory (dir) or lock file rel and reports a finding
// when it keeps the group out; it returns false when rel is not there or
// not of its type (other phases report that).
func (p permCheck) check(rel string, dir bool) bool {
	fi, err := p.c.fs.Lstat(rel)
	if err != nil || fi.IsDir() != dir || (!dir && !fi.Mode().IsRegular()) {
		return false
	}
	mode, _, gid, ok := seam.Owner(fi)
	if !ok {
		return true
	}
	need := p.sh.LockBits()
	what := "lock file"
	if dir {
		need, what = p.sh.DirBits(), "directory"
	}
	var wrong []string
	if mode&need != need {
		wrong = append(wrong, fmt.Sprintf("mode %04o lacks %04o", mode, need&^mode))
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
	f := &Finding{Kind: KindPermission, Path: name, Found: what + " " + strings.Join(wrong, ", "),
		Expected: fmt.Sprintf("the bits %04o set and group %s (the table is shared: %s), so that every member of the group can use it", need, groupName(p.gid), p.sh.Name),
		Repair:   fmt.Sprintf("set mode %04o and group %s (as the owner or root)", mode|need, groupName(p.gid))}
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
			err := fixer.FixPerm(rel, mode|need, g)
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
				fixed(f, fmt.Sprintf("set mode %04o, group %s", mode|need, groupName(p.gid)))
			}
		}
	}
	p.c.emit(f)
	return true
}

// groupName is the name of group gid, or the number.
func groupName(gid int) string {
	s := strconv.Itoa(gid)
	if g, err := user.LookupGroupId(s); err == nil {
		return g.Name
	}
	return s
}
