package seam_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasetool/lease/commit/seam"
)

// TestFixPermNeverInPlaceThroughLinks: FixPerm sets the mode of a
// directory and of a regular file of one link, and refuses
// (ErrNotInPlace) a symbolic link and a file with a second name, leaving
// what they reach unchanged; on both of its ways of setting a mode.
func TestFixPermNeverInPlaceThroughLinks(t *testing.T) {
	t.Parallel()
	for _, old := range []bool{false, true} {
		seam.SetNoFchmodat2(old)
		root, outside := t.TempDir(), t.TempDir()
		private := filepath.Join(outside, "private")
		if err := os.WriteFile(private, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, err := range []error{
			os.Mkdir(filepath.Join(root, "d"), 0o700),
			os.WriteFile(filepath.Join(root, "f"), nil, 0o600),
			os.Symlink(private, filepath.Join(root, "link")),
			os.Link(private, filepath.Join(root, "hard")),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		o, err := seam.OS(root)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]os.FileMode{"d": os.ModeDir | os.ModeSetgid | 0o770, "f": 0o640} {
			if err := o.FixPerm(name, uint32(want.Perm())|map[bool]uint32{true: 0o2000}[want.IsDir()], -1); err != nil {
				t.Errorf("old kernel %v: FixPerm %s: %v", old, name, err)
			}
			if fi, err := os.Lstat(filepath.Join(root, name)); err != nil || fi.Mode() != want {
				t.Errorf("old kernel %v: %s: %v %v, want %v", old, name, fi.Mode(), err, want)
			}
		}
		for _, name := range []string{"link", "hard"} {
			if err := o.FixPerm(name, 0o644, -1); !errors.Is(err, seam.ErrNotInPlace) {
				t.Errorf("old kernel %v: FixPerm %s: %v, want ErrNotInPlace", old, name, err)
			}
		}
		if fi, err := os.Stat(private); err != nil || fi.Mode() != 0o600 {
			t.Errorf("old kernel %v: the file outside: %v %v, want 0600", old, fi.Mode(), err)
		}
		o.Close()
	}
	seam.SetNoFchmodat2(false)
}
