//go:build linux

package seam_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/leasetool/lease/commit/seam"
)

// TestScanDirentsAndLink: Link makes a second name of a file and refuses an
// existing one; ScanDirents hands out every name once with its inode
// number, the same for both names of one file, also after a ReadNames that
// left names in a smaller buffer.
func TestScanDirentsAndLink(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	const n = 3000
	for i := range n {
		os.WriteFile(filepath.Join(root, "d", fmt.Sprintf("f%05d", i)), nil, 0o644)
	}
	f, err := seam.OS(root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, ok := seam.As[seam.Linker](seam.WithHook(f, func(seam.Op, string) error { return nil }))
	if !ok {
		t.Fatal("no Linker through a hooked FS")
	}
	if err := l.Link("d/f00007", "d/link"); err != nil {
		t.Fatal(err)
	}
	if err := l.Link("d/f00008", "d/link"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("link over an existing name: %v, want ErrExist", err)
	}
	d, err := f.OpenDir("d")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	first, err := d.ReadNames(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]uint64{}
	for _, name := range first {
		seen[name] = 1
	}
	err = d.(seam.DirentScanner).ScanDirents(func(name []byte, ino uint64) {
		if _, dup := seen[string(name)]; dup {
			t.Errorf("%s handed out twice", name)
		}
		seen[string(name)] = ino
	})
	if err != nil || len(seen) != n+1 {
		t.Fatalf("%d names (%v), want %d", len(seen), err, n+1)
	}
	var st syscall.Stat_t
	syscall.Stat(filepath.Join(root, "d", "f00007"), &st)
	// A name ReadNames handed out first is marked 1 (no inode known):
	// the directory's hash order decides which five those are.
	if (seen["link"] != st.Ino && seen["link"] != 1) || (seen["f00007"] != st.Ino && seen["f00007"] != 1) {
		t.Errorf("inode of link %d, of f00007 %d, want %d", seen["link"], seen["f00007"], st.Ino)
	}
}
