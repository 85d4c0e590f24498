// Package testenv gives tests one way to meet their prerequisites (root,
// tools, loop mounts, services): a test that cannot run here skips with the
// reason, and when LEASE_TEST_REQUIRE says the prerequisite must be there
// (CI sets LEASE_TEST_REQUIRE=all) it fails instead, so that in CI a skip is
// a failure.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RequireEnv names the variable: "all", or a comma-separated list of the
// prerequisite kinds that must be present (e.g. "mpi,fuse").
const RequireEnv = "LEASE_TEST_REQUIRE"

// Required reports whether RequireEnv demands prerequisites of this kind
// ("root", "mpi", "fuse", "slurm", "gluster", a tool's name, ...).
func Required(kind string) bool {
	for _, w := range strings.Split(os.Getenv(RequireEnv), ",") {
		if w = strings.TrimSpace(w); w == "all" || (w != "" && w == kind) {
			return true
		}
	}
	return false
}

// Missing skips t because a prerequisite of this kind is missing, saying
// why, or fails it when Required(kind).
func Missing(t testing.TB, kind, why string) {
	t.Helper()
	if Required(kind) {
		t.Fatalf("%s (%s=%s forbids skipping)", why, RequireEnv, os.Getenv(RequireEnv))
	}
	t.Skipf("skipping: %s (set %s=all to make this a failure)", why, RequireEnv)
}

// NeedRoot skips (or fails) t unless it runs as root; what says what needs
// it.
func NeedRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "root", what+" needs root")
	}
}

// NeedTools skips (or fails) t unless every tool is on PATH.
func NeedTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			Missing(t, tool, tool+" is not installed")
		}
	}
}

// LoopMount makes a fresh image of size bytes, formats it with
// mkfs.FSTYPE (extra mkfs arguments before the image), loop-mounts it on a
// new directory and returns the mountpoint; t.Cleanup unmounts it (lazily
// if a normal unmount fails, which also fails the test).
func LoopMount(t testing.TB, fstype string, size int64, mkfsArgs ...string) string {
	t.Helper()
	NeedRoot(t, "loop-mounting "+fstype)
	mkfs := "mkfs." + fstype
	NeedTools(t, mkfs, "mount", "umount")
	dir := t.TempDir()
	img := filepath.Join(dir, fstype+".img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-q"}, mkfsArgs...)
	if fstype == "xfs" || fstype == "btrfs" {
		args = append(args, "-f")
	}
	if out, err := exec.Command(mkfs, append(args, img)...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", mkfs, err, out)
	}
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", "-t", fstype, img, mnt).CombinedOutput(); err != nil {
		Missing(t, "loop", "mount -o loop "+fstype+": "+strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return mnt
}
