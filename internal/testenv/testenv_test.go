package testenv

import (
	"os"
	"path/filepath"
	"strings"
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

// TestMissingRecordsSkip: a skip through Missing appends one line naming
// the package directory, the test and the reason to the file
// LEASE_TEST_SKIPS names, which make test lists at its end.
func TestMissingRecordsSkip(t *testing.T) {
	list := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SkipsEnv, list)
	t.Setenv(RequireEnv, "")
	for _, why := range []string{"frob is not installed: apt-get install frob", "two\nlines"} {
		t.Run("skipped", func(t *testing.T) { Missing(t, "frob", why) })
	}
	got, err := os.ReadFile(list)
	if err != nil {
		t.Fatal(err)
	}
	want := "./internal/testenv TestMissingRecordsSkip/skipped: frob is not installed: apt-get install frob\n" +
		"./internal/testenv TestMissingRecordsSkip/skipped#01: two lines\n"
	if string(got) != want {
		t.Errorf("%s holds %q, want %q", list, got, want)
	}
}

// TestNeedToolsNamesPackage: a missing tool's skip says which Debian
// package brings it.
func TestNeedToolsNamesPackage(t *testing.T) {
	list := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SkipsEnv, list)
	t.Setenv(RequireEnv, "")
	t.Setenv("PATH", t.TempDir())
	t.Run("mpirun", func(t *testing.T) { NeedTools(t, "mpirun") })
	got, err := os.ReadFile(list)
	if err != nil {
		t.Fatal(err)
	}
	if want := "mpirun is not installed: apt-get install openmpi-bin\n"; !strings.HasSuffix(string(got), want) {
		t.Errorf("%s holds %q, want a line ending %q", list, got, want)
	}
}
