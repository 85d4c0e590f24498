//go:build linux

package powercut_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/internal/powercut"
	"github.com/leasetool/lease/internal/testenv"
)

// TestMountCutLogReplay: the image a btrfs cut left in CI (seed 661506075:
// a directory named twice in the log tree the guest's 6.1 kernel wrote,
// "invalid nlink: has 2 expect no more than 1 for dir" on replay) does not
// mount, and MountCut says btrfs failed to replay its log (it mounts with
// rescue=nologreplay); a new btrfs image mounts; an image of nothing is a
// plain failure, no log replay.
func TestMountCutLogReplay(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "loop mounts")
	testenv.NeedTools(t, "mkfs.btrfs", "xz", "mount", "umount")
	btrfs := powercut.Filesystems["btrfs"]
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.img")
	xz := exec.Command("sh", "-c", `xz -dc "$1" | cp --sparse=always /dev/stdin "$2"`, "sh", "testdata/btrfs-logreplay-661506075.img.xz", bad)
	if out, err := xz.CombinedOutput(); err != nil {
		t.Fatalf("unpacking the image: %v: %s", err, out)
	}
	replay, err := powercut.MountCut(btrfs, bad, mnt)
	if err == nil {
		exec.Command("umount", mnt).Run()
		t.Fatal("the image of seed 661506075 mounted: has the kernel learnt to replay its log? (then this test has nothing left to show)")
	}
	if !strings.Contains(replay, "rescue=nologreplay") {
		t.Errorf("MountCut of the image of seed 661506075: replay %q, err %v; want a failed log replay", replay, err)
	}

	good := filepath.Join(dir, "good.img")
	if err := os.WriteFile(good, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(good, 256<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.btrfs", "-q", "-f", good).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.btrfs: %v: %s", err, out)
	}
	if replay, err := powercut.MountCut(btrfs, good, mnt); err != nil || replay != "" {
		t.Fatalf("MountCut of a new btrfs: %q, %v", replay, err)
	}
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v: %s", err, out)
	}

	empty := filepath.Join(dir, "empty.img")
	if err := os.WriteFile(empty, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if replay, err := powercut.MountCut(btrfs, empty, mnt); err == nil || replay != "" {
		exec.Command("umount", mnt).Run()
		t.Errorf("MountCut of an image of zeros: %q, %v; want a plain failure", replay, err)
	}
}
