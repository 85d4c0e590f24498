package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRequired(t *testing.T) {
	for _, c := range []struct {
		env, kind string
		want      bool
	}{
		{"", "mpi", false},
		{"all", "mpi", true},
		{"mpi,fuse", "fuse", true},
		{" mpi , fuse ", "mpi", true},
		{"mpi", "gluster", false},
		{"mpi,", "", false},
	} {
		t.Setenv(RequireEnv, c.env)
		if got := Required(c.kind); got != c.want {
			t.Errorf("%s=%q: Required(%q) = %v, want %v", RequireEnv, c.env, c.kind, got, c.want)
		}
	}
}

// TestLoopMount mounts a small ext4 image and writes to it.
func TestLoopMount(t *testing.T) {
	mnt := LoopMount(t, "ext4", 16<<20)
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}
