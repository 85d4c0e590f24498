package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Fill takes every byte left on the filesystem at dir, as a fuzzer
// filling its scratch space does: fallocate of ever smaller files
// (dir/filler.N) until even 4 KiB fails; it fails the test unless statfs
// then says no block is free. Unfill removes the files.
func Fill(t testing.TB, dir string) {
	t.Helper()
	n := 0
	for _, size := range []int64{64 << 20, 1 << 20, 64 << 10, 4 << 10} {
		for {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("filler.%d", n)))
			if err != nil {
				break
			}
			n++
			err = syscall.Fallocate(int(f.Fd()), 0, 0, size)
			f.Close()
			if err != nil {
				break
			}
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Bavail != 0 {
		t.Fatalf("filling %s: %d blocks still free", dir, st.Bavail)
	}
}

// Unfill removes what Fill left in dir.
func Unfill(dir string) {
	fillers, _ := filepath.Glob(filepath.Join(dir, "filler.*"))
	for _, f := range fillers {
		os.Remove(f)
	}
}
