package commit

// Tables shared by the accounts of a group (lease init --shared), as git
// shares a repository (core.sharedRepository): the sharing is recorded in
// TABLE as the extra key "shared", and every directory and file the table
// creates from then on gets the modes it calls for, whatever the umask of
// the process that creates it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/leasefmt"
)

// SharedKey is the key of TABLE that records how the table is shared.
const SharedKey = "shared"

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

// fileMode is the mode of a file created with actual as its mode (what
// the umask left of 0666); writable is set for lock files.
func (s Sharing) fileMode(actual uint32, writable bool) uint32 {
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

// dirMode is the mode of a directory created with actual as its mode
// (what the umask left of 0777): setgid always.
func (s Sharing) dirMode(actual uint32) uint32 {
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
func (s Sharing) DirBits() uint32 { return s.dirMode(0) }

// LockBits: see DirBits.
func (s Sharing) LockBits() uint32 { return s.fileMode(0, true) }

// TableSharing returns the sharing TABLE records, and false for a table
// that is not shared. A value lease cannot read is corrupt: a table
// shared by another version must not be written with the wrong modes.
func TableSharing(t *leasefmt.Table) (Sharing, bool, error) {
	for _, f := range t.Extra {
		if f.Key != SharedKey {
			continue
		}
		var v string
		if err := json.Unmarshal(f.Value, &v); err != nil {
			return Sharing{}, false, fmt.Errorf("%w: %s: not a string", leasefmt.ErrCorrupt, SharedKey)
		}
		s, err := ParseSharing(v)
		if err != nil {
			return Sharing{}, false, fmt.Errorf("%w: %s: %w", leasefmt.ErrCorrupt, SharedKey, err)
		}
		return s, true, nil
	}
	return Sharing{}, false, nil
}

// WithSharing returns t recording s.
func WithSharing(t *leasefmt.Table, s Sharing) *leasefmt.Table {
	out := *t
	out.Extra = nil
	for _, f := range t.Extra {
		if f.Key != SharedKey {
			out.Extra = append(out.Extra, f)
		}
	}
	v, _ := json.Marshal(s.Name)
	out.Extra = append(out.Extra, leasefmt.Field{Key: SharedKey, Value: v})
	return &out
}

// sharer is the optional FS extension through which a store tells its
// filesystem how the table is shared (OSFS implements it).
type sharer interface{ SetSharing(Sharing) }

// ShareFS makes f create what it creates with the modes of sharing s,
// when f supports it (OSFS does); Open does it for the stores it opens.
func ShareFS(f FS, s Sharing) { applySharing(f, s) }

// applySharing passes the table's sharing to the filesystem.
func applySharing(f FS, s Sharing) {
	if sh, ok := f.(sharer); ok {
		sh.SetSharing(s)
	}
}

// ShareRoot gives the table root itself the mode of a shared directory
// (lease init --shared): the directories created in it then inherit its
// group.
func ShareRoot(root string, s Sharing) error {
	fi, err := os.Stat(root)
	if err != nil {
		return err
	}
	mode := s.dirMode(uint32(fi.Mode().Perm()))
	if err := unix.Chmod(root, mode); err != nil {
		return &fs.PathError{Op: "chmod", Path: root, Err: err}
	}
	return nil
}

// processUmask is the umask of this process. It is read from
// /proc/self/status; where that is not available, set and restored, which
// is safe only while no other goroutine creates files (a store is being
// opened).
func processUmask() uint32 {
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return uint32(m)
				}
			}
		}
	}
	m := unix.Umask(0o022)
	unix.Umask(m)
	return uint32(m)
}

// AccessError is the error of a batch that could not start because this
// process may not use the table: a shard's lock file or directory that it
// cannot open for writing (permission denied), or a read-only filesystem.
// Nothing was written.
type AccessError struct {
	// Path is the file that could not be used.
	Path string
	Err  error
}

// Error names the path and the cause.
func (e *AccessError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the cause (errors.Is(err, fs.ErrPermission)).
func (e *AccessError) Unwrap() error { return e.Err }

// ReadOnly reports whether the cause is a read-only filesystem.
func (e *AccessError) ReadOnly() bool { return errors.Is(e.Err, unix.EROFS) }

// accessDenied reports whether err is one of the causes of an AccessError.
func accessDenied(err error) bool {
	return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS)
}

// PermFixer is the optional FS extension that sets the mode and group of
// a directory or file of the table (lease fsck --repair of a shared
// table); OSFS implements it. name "" is the root.
type PermFixer interface {
	FixPerm(name string, mode uint32, gid int) error
}

// Owner returns the mode bits (with setgid), owner and group of fi, and
// false when fi does not say.
func Owner(fi fs.FileInfo) (mode uint32, uid, gid int, ok bool) {
	switch st := fi.Sys().(type) {
	case *unix.Stat_t:
		return st.Mode & 0o7777, int(st.Uid), int(st.Gid), true
	case *syscall.Stat_t:
		return st.Mode & 0o7777, int(st.Uid), int(st.Gid), true
	}
	return 0, 0, 0, false
}

// shareResult makes a result about to be published readable by the group
// of a shared table: the command that staged it wrote it with its own
// umask. Best effort: a result that keeps its mode is published all the
// same.
func (s *Store) shareResult(staged string) {
	if s.Sharing == nil {
		return
	}
	fixer, ok := s.FS.(PermFixer)
	if !ok {
		return
	}
	fi, err := s.FS.Lstat(staged)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	mode, _, _, ok := Owner(fi)
	if !ok {
		return
	}
	if want := s.Sharing.fileMode(mode&0o777, false); want != mode {
		fixer.FixPerm(staged, want, -1)
	}
}
