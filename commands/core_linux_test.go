package commands_test

import (
	"testing"

	"golang.org/x/sys/unix"
)

// coreImmutable makes dir immutable (chattr +i) until the test ends, so
// that creating a file in it fails even for root: an I/O error on demand.
func coreImmutable(t *testing.T, dir string) {
	t.Helper()
	const immutable = 0x10 // FS_IMMUTABLE_FL
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, flags|immutable)
	}
	if err != nil {
		t.Fatalf("cannot make %s immutable to inject an I/O error (needs root on ext4, xfs or btrfs): %v", dir, err)
	}
	t.Cleanup(func() {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer unix.Close(fd)
		if err := unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, flags); err != nil {
			t.Error(err)
		}
	})
}
