//go:build linux

package seam_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasetool/lease/commit/seam"
)

// TestOpenDirReadsEveryNameOnce: OSFS's directory reader, whose getdents
// buffer is sized by the first request, returns every name of a directory
// exactly once over requests of any size (also after most names were
// removed, when the directory's blocks are mostly empty), never "." or
// "..", at most n per call, then io.EOF.
func TestOpenDirReadsEveryNameOnce(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "d")
	os.Mkdir(dir, 0o777)
	want := map[string]bool{}
	for i := range 3000 {
		sum := sha256.Sum256([]byte(fmt.Sprint(i)))
		name := hex.EncodeToString(sum[:])
		os.WriteFile(filepath.Join(dir, name), nil, 0o666)
		if i%37 == 0 { // keep one in 37: a sparse directory
			want[name] = true
		} else if i >= 1500 {
			os.Remove(filepath.Join(dir, name))
		} else {
			want[name] = true
		}
	}
	f, err := seam.OS(root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, sizes := range [][]int{{32, 128}, {1}, {7, 500, 3}, {4096}} {
		d, err := f.OpenDir("d")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for i := 0; ; i++ {
			n := sizes[min(i, len(sizes)-1)]
			names, err := d.ReadNames(n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(names) == 0 || len(names) > n {
				t.Fatalf("sizes %v: call %d returned %d names, want 1 to %d", sizes, i, len(names), n)
			}
			for _, name := range names {
				if !want[name] || seen[name] {
					t.Fatalf("sizes %v: unexpected or repeated name %q", sizes, name)
				}
				seen[name] = true
			}
		}
		d.Close()
		if len(seen) != len(want) {
			t.Errorf("sizes %v: read %d names, want %d", sizes, len(seen), len(want))
		}
	}
}
