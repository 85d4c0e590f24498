package seam

// Tables shared by the accounts of a group (lease init --shared), as git
// shares a repository (core.sharedRepository): every directory and file
// the table creates gets the modes the sharing calls for, whatever the
// umask of the process that creates it. The sharing itself is recorded in
// the table's header (package commit).

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/leasefmt"
)

// Sharing is how a table is shared: "group", "all" or an octal mode.
//
//   - group: directories are setgid (what is created in them gets their
//     group) and readable, writable and searchable by the group; lock
//     files are readable and writable by the group (fcntl write locks need
//     a descriptor open for writing); records and the other files are
//     readable by the group. Others keep what the umask gives them.
//   - all: as group, and everyone may read the files and search the
//     directories.
//   - an octal mode such as 0660: every file gets exactly that mode, and
//     every directory that mode with x where it has r, and setgid.
//
// Records need no write permission: they are replaced by rename, which
// takes write permission on their directory only.
//
// TABLE is in the table's root, which the group may write: a member can
// replace it. So a sharing read from TABLE is bounded by the root's own
// mode, which only its owner (or root) can change ([Sharing.Within]): no
// mode it gives has bits the root does not give the same class, and none
// ever lets others write. Lock files are readable only by the classes that
// may write them (see [Sharing.FileMode]).
type Sharing struct {
	// Name is the value in TABLE.
	Name  string
	exact uint32 // the mode of "0xxx", else 0
	limit uint32 // the permission bits any mode may have (Within); 0: defaultLimit
}

// defaultLimit bounds the modes of a sharing not yet bounded by its root:
// others never write.
const defaultLimit = 0o775

// ErrSharing is wrapped by the errors of ParseSharing.
var ErrSharing = errors.New("bad sharing")

// ParseSharing reads the value of lease init --shared (and of TABLE's
// "shared" key).
func ParseSharing(s string) (Sharing, error) {
	switch s {
	case "group", "all":
		return Sharing{Name: s}, nil
	}
	if len(s) == 4 && s[0] == '0' {
		if m, err := strconv.ParseUint(s, 8, 32); err == nil && m&0o600 == 0o600 && m&0o002 == 0 {
			return Sharing{Name: s, exact: uint32(m)}, nil
		}
	}
	return Sharing{}, fmt.Errorf("%w: %s: want group, all, or an octal mode 0xxx that lets its owner read and write and does not let others write (0660)", ErrSharing, leasefmt.Quote(s))
}

// ErrWidened is wrapped by the error of Within: TABLE asks for modes the
// table's root does not give.
var ErrWidened = errors.New("the sharing asks for more than the table root's mode gives")

// Within returns s bounded by the mode of the table's root (its
// permission bits, as Lstat gives them): what the root gives the group
// and others, never write to others. The root's mode is its owner's
// choice (lease init --shared sets it), which no member can change; TABLE
// is not: a member may rename another TABLE over it. The error, wrapping
// ErrWidened, says when the sharing itself (without a umask's bits) asks
// for more than that bound; the sharing returned never applies it.
func (s Sharing) Within(root uint32) (Sharing, error) {
	s.limit = 0o700 | root&0o070 | root&0o005
	want := Sharing{Name: s.Name, exact: s.exact}
	if extra := (want.DirMode(0) | want.FileMode(0, false) | want.FileMode(0, true)) & 0o777 &^ s.limit; extra != 0 {
		return s, fmt.Errorf("%w: %s gives %04o, which the root's mode %04o does not", ErrWidened, leasefmt.Quote(s.Name), extra, root&0o7777)
	}
	return s, nil
}

// bound is the mask of the permission bits s may give.
func (s Sharing) bound() uint32 {
	if s.limit == 0 {
		return defaultLimit
	}
	return s.limit
}

// lockable keeps of a lock file's mode m read permission only for the
// classes that may also write it: an fcntl read lock needs only a
// descriptor open for reading, and one held on a shard's lock file stops
// every writer of the shard, so an account that may not write the table
// must not be able to open it at all.
func lockable(m uint32) uint32 {
	w := m & 0o222
	return m & (w<<1 | w | 0o111)
}

// FileMode is the mode of a file created with actual as its mode (what
// the umask left of 0666); writable is set for lock files.
// Lock files are readable only by the classes that may write them (see
// lockable): never by others.
func (s Sharing) FileMode(actual uint32, writable bool) uint32 {
	m := s.exact
	if m == 0 {
		add := uint32(0o640)
		if writable {
			add = 0o660
		}
		if s.Name == "all" {
			add |= 0o004
		}
		m = actual | add
	}
	m &= s.bound()
	if writable {
		m = lockable(m) &^ 0o007
	}
	return m
}

// DirMode is the mode of a directory created with actual as its mode
// (what the umask left of 0777): setgid always.
func (s Sharing) DirMode(actual uint32) uint32 {
	if s.exact != 0 {
		m := s.exact
		m |= (m & 0o444) >> 2 // x where r
		return m&s.bound() | unix.S_ISGID
	}
	m := actual | 0o770
	if s.Name == "all" {
		m |= 0o005
	}
	return m&s.bound() | unix.S_ISGID
}

// DirBits and FileBits are the mode bits a shared table's directories and
// lock files must have (lease fsck checks them).
func (s Sharing) DirBits() uint32 { return s.DirMode(0) }

// LockBits: see DirBits.
func (s Sharing) LockBits() uint32 { return s.FileMode(0, true) }

// StickyDirs are the directories of a shared table that carry the sticky
// bit (S_ISVTX, as /tmp does), as table-relative names: the root ("") and
// stage/ (layout.StageDir). Both are written by every member, and in a
// sticky directory only an entry's owner (or the directory's, or root) may
// rename or remove it: no member can move away another's live staging
// directory, stage/ or TABLE and put a link at its name
// (docs/safety.md#stage). No lease operation run by a member renames or
// removes another account's entry there.
var StickyDirs = []string{"", "stage"}

// IsSticky reports whether the table-relative directory name is one of
// StickyDirs.
func IsSticky(name string) bool {
	name = strings.Trim(path.Clean("/"+name), "/")
	for _, d := range StickyDirs {
		if name == d {
			return true
		}
	}
	return false
}

// DirModeOf is DirMode of the table-relative directory name: with the
// sticky bit for StickyDirs.
func (s Sharing) DirModeOf(name string, actual uint32) uint32 {
	m := s.DirMode(actual)
	if IsSticky(name) {
		m |= unix.S_ISVTX
	}
	return m
}

// DirBitsOf is the mode bits the shared table's directory name must have
// (lease fsck checks them): DirBits, and the sticky bit for StickyDirs.
func (s Sharing) DirBitsOf(name string) uint32 { return s.DirModeOf(name, 0) }

// ShareRoot gives the table root of f itself the mode of a shared
// directory, sticky (lease init --shared): the directories created in it
// then inherit its group, and no member can rename another's entries of
// it. The mode is set through a descriptor of the root (PermFixer), never
// by its path.
func ShareRoot(f FS, s Sharing) error {
	fi, err := f.Lstat("")
	if err != nil {
		return err
	}
	mode, _, _, ok := Owner(fi)
	fixer, fixes := As[PermFixer](f)
	if !ok || !fixes {
		return fmt.Errorf("cannot set the mode of the table root: %w", ErrUnsupported)
	}
	return fixer.FixPerm("", s.DirModeOf("", mode&0o777), -1)
}
