package commit

// Tables shared by the accounts of a group (lease init --shared), as git
// shares a repository (core.sharedRepository): the sharing (seam.Sharing)
// is recorded in TABLE as the extra key "shared", and every directory and
// file the table creates from then on gets the modes it calls for (the FS's
// seam.Sharer), whatever the umask of the process that creates it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
)

// sharedKey is the key of TABLE that records how the table is shared.
const sharedKey = "shared"

// tableSharing returns the sharing TABLE records, and false for a table
// that is not shared. A value lease cannot read is corrupt: a table
// shared by another version must not be written with the wrong modes.
func tableSharing(t *leasefmt.Table) (seam.Sharing, bool, error) {
	for _, f := range t.Extra {
		if f.Key != sharedKey {
			continue
		}
		var v string
		if err := json.Unmarshal(f.Value, &v); err != nil {
			return seam.Sharing{}, false, fmt.Errorf("%w: %s: not a string", leasefmt.ErrCorrupt, sharedKey)
		}
		s, err := seam.ParseSharing(v)
		if err != nil {
			return seam.Sharing{}, false, fmt.Errorf("%w: %s: %w", leasefmt.ErrCorrupt, sharedKey, err)
		}
		return s, true, nil
	}
	return seam.Sharing{}, false, nil
}

// RootSharing is tableSharing bounded by the mode of the table's root
// (seam.Sharing.Within): a member of the group can replace TABLE, never
// the root's mode, so no mode the sharing gives exceeds what the root
// gives. widened, when not nil, wraps seam.ErrWidened: TABLE asks for more
// (lease fsck reports it; nothing applies it). A root whose mode cannot
// be read bounds the sharing by the default bound only (others never
// write).
func RootSharing(f seam.FS, t *leasefmt.Table) (sh seam.Sharing, ok bool, widened, err error) {
	sh, ok, err = tableSharing(t)
	if err != nil || !ok {
		return sh, ok, nil, err
	}
	fi, lerr := f.Lstat("")
	if lerr != nil {
		return sh, true, nil, nil
	}
	mode, _, _, known := seam.Owner(fi)
	if !known {
		return sh, true, nil, nil
	}
	sh, widened = sh.Within(mode)
	return sh, true, widened, nil
}

// withSharing returns t recording s.
func withSharing(t *leasefmt.Table, s seam.Sharing) *leasefmt.Table {
	out := *t
	out.Extra = nil
	for _, f := range t.Extra {
		if f.Key != sharedKey {
			out.Extra = append(out.Extra, f)
		}
	}
	v, _ := json.Marshal(s.Name)
	out.Extra = append(out.Extra, leasefmt.Field{Key: sharedKey, Value: v})
	return &out
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

// shareResult gives the entry staged (a file or a directory of a result
// about to be published, fi its Lstat) the modes of a shared table: the
// command that staged it wrote it with its own umask, and the staging
// directory was its claimer's alone. Publication is the one process that
// changes these modes, through a descriptor of the entry (PermFixer): an
// entry that is not one it may change in place (seam.ErrNotInPlace) is
// refused with ErrStaged; any other failure leaves the mode, and the
// result is published all the same.
func (s *Store) shareResult(staged string, fi fs.FileInfo) error {
	if s.sharing == nil {
		return nil
	}
	fixer, ok := seam.As[seam.PermFixer](s.fs)
	if !ok {
		return nil
	}
	mode, _, _, ok := seam.Owner(fi)
	if !ok {
		return nil
	}
	want := s.sharing.FileMode(mode&0o777, false)
	if fi.IsDir() {
		want = s.sharing.DirMode(mode & 0o777)
	}
	if want == mode {
		return nil
	}
	if err := fixer.FixPerm(staged, want, -1); errors.Is(err, seam.ErrNotInPlace) {
		return fmt.Errorf("%w %s: %w", ErrStaged, s.Abs(staged), err)
	}
	return nil
}

// checkStaged refuses (ErrStaged) an entry of a result (fi its Lstat)
// that its publisher did not make: one owned by another account, or a file
// with more than one link, whose inode another name (perhaps outside the
// table) reaches; publication would hand it to public/ and change its
// mode.
func (s *Store) checkStaged(name string, fi fs.FileInfo) error {
	if _, uid, _, ok := seam.Owner(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("%w %s: owned by uid %d, not by the account publishing it (uid %d): never published", ErrStaged, s.Abs(name), uid, os.Geteuid())
	}
	if n := seam.Links(fi); fi.Mode().IsRegular() && n > 1 {
		return fmt.Errorf("%w %s: a file with %d links (a hard link: another name, perhaps outside the table, reaches it): never published; stage a copy", ErrStaged, s.Abs(name), n)
	}
	return nil
}
