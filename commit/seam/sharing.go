package seam

// Tables shared by the accounts of a group (lease init --shared), as git
// shares a repository (core.sharedRepository): every directory and file
// the table creates gets the modes the sharing calls for, whatever the
// umask of the process that creates it. The sharing itself is recorded in
// the table's header (package commit).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

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
type Sharing struct {
	// Name is the value in TABLE.
	Name  string
	exact uint32 // the mode of "0xxx", else 0
}

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
		if m, err := strconv.ParseUint(s, 8, 32); err == nil && m&0o600 == 0o600 {
			return Sharing{Name: s, exact: uint32(m)}, nil
		}
	}
	return Sharing{}, fmt.Errorf("%w: %s: want group, all, or an octal mode 0xxx that lets its owner read and write (0660)", ErrSharing, leasefmt.Quote(s))
}

// FileMode is the mode of a file created with actual as its mode (what
// the umask left of 0666); writable is set for lock files.
func (s Sharing) FileMode(actual uint32, writable bool) uint32 {
	if s.exact != 0 {
		return s.exact
	}
	add := uint32(0o640)
	if writable {
		add = 0o660
	}
	if s.Name == "all" {
		add |= 0o004
	}
	return actual | add
}

// DirMode is the mode of a directory created with actual as its mode
// (what the umask left of 0777): setgid always.
func (s Sharing) DirMode(actual uint32) uint32 {
	if s.exact != 0 {
		m := s.exact
		m |= (m & 0o444) >> 2 // x where r
		return m | unix.S_ISGID
	}
	m := actual | 0o770
	if s.Name == "all" {
		m |= 0o005
	}
	return m | unix.S_ISGID
}

// DirBits and FileBits are the mode bits a shared table's directories and
// lock files must have (lease fsck checks them).
func (s Sharing) DirBits() uint32 { return s.DirMode(0) }

// LockBits: see DirBits.
func (s Sharing) LockBits() uint32 { return s.FileMode(0, true) }

// ShareRoot gives the table root itself the mode of a shared directory
// (lease init --shared): the directories created in it then inherit its
// group.
func ShareRoot(root string, s Sharing) error {
	fi, err := os.Stat(root)
	if err != nil {
		return err
	}
	mode := s.DirMode(uint32(fi.Mode().Perm()))
	if err := unix.Chmod(root, mode); err != nil {
		return &fs.PathError{Op: "chmod", Path: root, Err: err}
	}
	return nil
}
