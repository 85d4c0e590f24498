// Package faultfstest mounts faultfs filesystems inside Go tests.
package faultfstest

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/leasetool/lease/faultfs"
	"github.com/leasetool/lease/internal/testenv"
)

// RequireEnv is the environment variable that turns missing test
// prerequisites from skips into failures: "all", or a comma-separated list
// that contains "fuse" or "faultfs".
const RequireEnv = "LEASE_TEST_REQUIRE"

// Required reports whether RequireEnv demands that faultfs tests run.
func Required() bool {
	for _, w := range strings.Split(os.Getenv(RequireEnv), ",") {
		switch strings.TrimSpace(w) {
		case "all", "fuse", "faultfs":
			return true
		}
	}
	return false
}

// Require skips t when faultfs cannot mount on this machine, with the
// reason; when Required(), it fails t instead.
func Require(t testing.TB) {
	t.Helper()
	if err := faultfs.Available(); err != nil {
		if Required() {
			t.Fatalf("%s=%s but faultfs cannot run: %v", RequireEnv, os.Getenv(RequireEnv), err)
		}
		testenv.Missing(t, "fuse", err.Error())
	}
}

// Mounted is a faultfs mounted for one test.
type Mounted struct {
	*faultfs.FS
	// Backing is the mirrored directory (a fresh t.TempDir()).
	Backing string
	// Dir is the mountpoint (a fresh t.TempDir()).
	Dir string
}

// Mount calls Require, then mounts a faultfs with opts over a new empty
// backing directory on a new mountpoint, both from t.TempDir(). The mount is
// unmounted by t.Cleanup before the directories are removed; if a normal
// unmount fails the test fails and the mount is detached with umount -l.
func Mount(t testing.TB, opts faultfs.Options) *Mounted {
	t.Helper()
	Require(t)
	return MountOn(t, t.TempDir(), t.TempDir(), opts)
}

// MountOn is Mount over a given backing directory and mountpoint.
func MountOn(t testing.TB, backing, dir string, opts faultfs.Options) *Mounted {
	t.Helper()
	Require(t)
	fsys, err := faultfs.Mount(dir, backing, opts)
	if err != nil {
		t.Fatalf("faultfs.Mount: %v", err)
	}
	t.Cleanup(func() {
		if err := fsys.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
				t.Logf("umount -l %s: %v: %s", dir, err, out)
			}
		}
	})
	return &Mounted{FS: fsys, Backing: backing, Dir: dir}
}

// ReadOnly returns the rules that make a mount look read-only to its
// writers: every create, rename, write and sync fails with EROFS (reads
// go on). mount -o remount,ro is refused while a process holds a file
// open for writing, as lease processes hold their shards' lock files.
func ReadOnly() []faultfs.Rule {
	var rules []faultfs.Rule
	for _, op := range []faultfs.Op{faultfs.OpCreate, faultfs.OpRename, faultfs.OpWrite, faultfs.OpFsync, faultfs.OpFsyncDir} {
		rules = append(rules, faultfs.Rule{Op: op, Errno: syscall.EROFS})
	}
	return rules
}
