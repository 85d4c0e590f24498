//go:build linux

package faultfs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/faultfs"
	"github.com/leasetool/lease/faultfs/faultfstest"
)

func mustMkdirAll(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

// fsyncDir opens dir with O_DIRECTORY and fsyncs it, the way the lease
// durability protocol does.
func fsyncDir(t *testing.T, dir string) error {
	t.Helper()
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer syscall.Close(fd)
	return syscall.Fsync(fd)
}

func wantCounts(t *testing.T, fsys *faultfs.FS, want map[faultfs.Op]int64) {
	t.Helper()
	got := fsys.Counts()
	for _, op := range faultfs.Ops() {
		if got[op] != want[op] {
			t.Errorf("count of %s = %d, want %d (all counts %v)", op, got[op], want[op], got)
		}
	}
}

// TestCounts runs the lease durability protocol (create temp, write, fsync,
// rename, fsync directory) through the mount and checks every op is seen
// exactly once and the result is in the backing directory.
func TestCounts(t *testing.T) {
	m := faultfstest.Mount(t, faultfs.Options{})
	dir := filepath.Join(m.Dir, "work", "00")
	mustMkdirAll(t, dir)
	m.ResetCounts()

	tmp := filepath.Join(dir, ".rec.json.tmp.1")
	final := filepath.Join(dir, "rec.json")
	content := []byte(`{"schema":"lease.work/v1"}` + "\n")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, final); err != nil {
		t.Fatal(err)
	}
	if err := fsyncDir(t, dir); err != nil {
		t.Fatalf("fsync dir: %v", err)
	}
	wantCounts(t, m.FS, map[faultfs.Op]int64{
		faultfs.OpCreate: 1, faultfs.OpWrite: 1, faultfs.OpFsync: 1,
		faultfs.OpRename: 1, faultfs.OpFsyncDir: 1,
	})

	got, err := os.ReadFile(filepath.Join(m.Backing, "work", "00", "rec.json"))
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("backing rec.json = %q, %v; want %q", got, err, content)
	}
	if _, err := os.Stat(filepath.Join(m.Backing, "work", "00", ".rec.json.tmp.1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp file still in backing dir: %v", err)
	}

	// Reading an existing file is one open; directory opens are not
	// counted, nor are reads.
	m.ResetCounts()
	if got, err := os.ReadFile(final); err != nil || !bytes.Equal(got, content) {
		t.Errorf("read through mount = %q, %v", got, err)
	}
	if _, err := os.ReadDir(dir); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, m.FS, map[faultfs.Op]int64{faultfs.OpOpen: 1})

	// Changes made directly in the backing dir are visible at once.
	if err := os.WriteFile(filepath.Join(m.Backing, "direct"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(m.Dir, "direct")); err != nil || string(got) != "x" {
		t.Errorf("file written to backing dir, read through mount = %q, %v", got, err)
	}
}

func TestDelay(t *testing.T) {
	const d = 20 * time.Millisecond
	m := faultfstest.Mount(t, faultfs.Options{Rules: []faultfs.Rule{
		{Op: faultfs.OpFsync, Delay: d},
	}})
	f, err := os.Create(filepath.Join(m.Dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("data"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < d {
		t.Errorf("fsync took %v, want >= %v", el, d)
	}

	// Rules change at runtime; a glob restricts them.
	if err := m.SetRules([]faultfs.Rule{
		{Op: faultfs.OpRename, PathGlob: "slow/*", Delay: 30 * time.Millisecond},
		{Op: faultfs.OpFsyncDir, Delay: 25 * time.Millisecond},
	}); err != nil {
		t.Fatal(err)
	}
	mustMkdirAll(t, filepath.Join(m.Dir, "slow"))
	if err := os.WriteFile(filepath.Join(m.Dir, "slow", "a"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := os.Rename(filepath.Join(m.Dir, "slow", "a"), filepath.Join(m.Dir, "slow", "b")); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Errorf("rename in slow/ took %v, want >= 30ms", el)
	}
	start = time.Now()
	if err := fsyncDir(t, m.Dir); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 25*time.Millisecond {
		t.Errorf("directory fsync took %v, want >= 25ms", el)
	}
	if err := m.SetRules([]faultfs.Rule{{Op: "unlink"}}); err == nil {
		t.Error("SetRules accepted an unknown op")
	}
}

func TestFailures(t *testing.T) {
	m := faultfstest.Mount(t, faultfs.Options{})
	mustMkdirAll(t, filepath.Join(m.Dir, "work", "00"))
	if err := os.WriteFile(filepath.Join(m.Dir, "existing"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	set := func(rules ...faultfs.Rule) {
		t.Helper()
		if err := m.SetRules(rules); err != nil {
			t.Fatal(err)
		}
		m.ResetCounts()
	}

	for _, e := range []syscall.Errno{syscall.EIO, syscall.EINVAL} {
		set(faultfs.Rule{Op: faultfs.OpFsyncDir, Errno: e})
		if err := fsyncDir(t, m.Dir); err != e {
			t.Errorf("directory fsync with errno=%v rule: got %v", e, err)
		}
		if got := m.Injected()[faultfs.OpFsyncDir]; got != 1 {
			t.Errorf("injected fsyncdir failures = %d, want 1", got)
		}
	}

	// after=2,times=1: calls 0 and 1 pass, call 2 fails, later calls pass.
	set(faultfs.Rule{Op: faultfs.OpFsyncDir, Errno: syscall.EIO, After: 2, Times: 1})
	for i, want := range []error{nil, nil, syscall.EIO, nil, nil} {
		if err := fsyncDir(t, m.Dir); err != want {
			t.Errorf("after=2,times=1: directory fsync #%d = %v, want %v", i, err, want)
		}
	}
	// after=1, times=0: every call from the second on fails.
	set(faultfs.Rule{Op: faultfs.OpFsyncDir, Errno: syscall.EINVAL, After: 1})
	for i, want := range []error{nil, syscall.EINVAL, syscall.EINVAL, syscall.EINVAL} {
		if err := fsyncDir(t, m.Dir); err != want {
			t.Errorf("after=1: directory fsync #%d = %v, want %v", i, err, want)
		}
	}
	if c := m.Counts()[faultfs.OpFsyncDir]; c != 4 {
		t.Errorf("fsyncdir count = %d, want 4", c)
	}
	// A glob selects the directory.
	set(faultfs.Rule{Op: faultfs.OpFsyncDir, PathGlob: "work/*", Errno: syscall.EIO})
	if err := fsyncDir(t, filepath.Join(m.Dir, "work", "00")); err != syscall.EIO {
		t.Errorf("fsync of work/00 = %v, want EIO", err)
	}
	for _, d := range []string{m.Dir, filepath.Join(m.Dir, "work")} {
		if err := fsyncDir(t, d); err != nil {
			t.Errorf("fsync of %s = %v, want success", d, err)
		}
	}

	// File fsync.
	set(faultfs.Rule{Op: faultfs.OpFsync, Errno: syscall.EIO})
	f, err := os.OpenFile(filepath.Join(m.Dir, "existing"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("fsync = %v, want EIO", err)
	}
	// Write: nothing reaches the backing file.
	set(faultfs.Rule{Op: faultfs.OpWrite, Errno: syscall.ENOSPC})
	if _, err := f.WriteAt([]byte("new"), 0); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write = %v, want ENOSPC", err)
	}
	f.Close()
	if got, _ := os.ReadFile(filepath.Join(m.Backing, "existing")); string(got) != "old" {
		t.Errorf("backing file after failed write = %q, want %q", got, "old")
	}
	// Rename: nothing renamed.
	set(faultfs.Rule{Op: faultfs.OpRename, PathGlob: "*.json", Errno: syscall.EIO})
	if err := os.Rename(filepath.Join(m.Dir, "existing"), filepath.Join(m.Dir, "x.json")); !errors.Is(err, syscall.EIO) {
		t.Errorf("rename onto x.json = %v, want EIO (glob matches the destination)", err)
	}
	if _, err := os.Stat(filepath.Join(m.Backing, "existing")); err != nil {
		t.Errorf("source gone after failed rename: %v", err)
	}
	if err := os.Rename(filepath.Join(m.Dir, "existing"), filepath.Join(m.Dir, "renamed")); err != nil {
		t.Errorf("rename not matching the glob = %v", err)
	}
	// Open of an existing file, and create of a new one.
	set(faultfs.Rule{Op: faultfs.OpOpen, Errno: syscall.EACCES})
	if _, err := os.Open(filepath.Join(m.Dir, "renamed")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("open = %v, want EACCES", err)
	}
	set(faultfs.Rule{Op: faultfs.OpCreate, Errno: syscall.EDQUOT})
	if _, err := os.Create(filepath.Join(m.Dir, "new")); !errors.Is(err, syscall.EDQUOT) {
		t.Errorf("create = %v, want EDQUOT", err)
	}
	if _, err := os.Stat(filepath.Join(m.Backing, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file exists after failed create: %v", err)
	}
	// Delay and failure together, from two rules.
	set(faultfs.Rule{Op: faultfs.OpFsyncDir, Delay: 10 * time.Millisecond},
		faultfs.Rule{Op: faultfs.OpFsyncDir, Delay: 10 * time.Millisecond, Errno: syscall.EIO})
	start := time.Now()
	if err := fsyncDir(t, m.Dir); err != syscall.EIO {
		t.Errorf("delayed failing fsyncdir = %v, want EIO", err)
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Errorf("two 10ms delays took %v, want >= 20ms", el)
	}
	set()
	if err := fsyncDir(t, m.Dir); err != nil {
		t.Errorf("fsyncdir with no rules = %v", err)
	}
}

// TestUnmountBusy checks that a busy mount is detached lazily and that a
// second Unmount succeeds once it is no longer busy.
func TestUnmountBusy(t *testing.T) {
	faultfstest.Require(t)
	backing, dir := t.TempDir(), t.TempDir()
	fsys, err := faultfs.Mount(dir, backing, faultfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "open"))
	if err != nil {
		fsys.Unmount()
		t.Fatal(err)
	}
	if err := fsys.Unmount(); err == nil {
		t.Error("Unmount with an open file succeeded")
	} else {
		t.Logf("busy unmount: %v", err)
	}
	if isMountpoint(t, dir) {
		t.Errorf("%s still mounted after lazy unmount", dir)
	}
	f.Close()
	if err := fsys.Unmount(); err != nil {
		t.Errorf("second Unmount: %v", err)
	}
	if err := fsys.Unmount(); err != nil {
		t.Errorf("third Unmount: %v", err)
	}
}

func isMountpoint(t *testing.T, dir string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		fields := bytes.Fields(line)
		if len(fields) > 4 && string(fields[4]) == dir {
			return true
		}
	}
	return false
}

// TestNoXattrs: faultfs has no extended attributes, so the kernel answers
// getxattr itself (EOPNOTSUPP) once told, instead of asking before every
// write to a new file; the loopback it is built on would answer ENODATA.
func TestNoXattrs(t *testing.T) {
	m := faultfstest.Mount(t, faultfs.Options{})
	p := filepath.Join(m.Dir, "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		_, err := syscall.Getxattr(p, "security.capability", make([]byte, 64))
		if !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Fatalf("getxattr through the mount: %v, want EOPNOTSUPP", err)
		}
	}
}
