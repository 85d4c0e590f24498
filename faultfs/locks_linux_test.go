//go:build linux

package faultfs_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/faultfs"
	"github.com/leasetool/lease/faultfs/faultfstest"
	"github.com/leasetool/lease/internal/testenv"
)

// The test binary re-executes itself as a helper process (testenv.Role,
// like Go's lockedfile tests) so that lock owners are really different
// processes: "lock hold" takes a write lock and holds it until killed (or
// its stdin closes), "lock probe" tries one and exits probeAcquired or
// probeBusy. Their arguments: PATH KIND (ofd or posix) OFFSET.
func init() {
	testenv.Role("lock hold", func(a []string) int { return helperMain("hold", a) })
	testenv.Role("lock probe", func(a []string) int { return helperMain("probe", a) })
}

const (
	probeAcquired = 0
	probeBusy     = 3
)

// lockByte is the byte lease would lock: a large offset, length 1.
const lockByte = 0x0123456789abcde

func helperMain(mode string, a []string) int {
	if len(a) != 3 {
		fmt.Fprintf(os.Stderr, "lock %s: bad arguments %q\n", mode, a)
		return 2
	}
	path, kind := a[0], a[1]
	off, _ := strconv.ParseInt(a[2], 10, 64)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	err = setlk(f, kind, syscall.F_WRLCK, off, false)
	switch mode {
	case "hold":
		if err != nil {
			fmt.Fprintln(os.Stderr, "lock:", err)
			return 2
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin) // hold until killed (or stdin closes)
		return 0
	case "probe":
		switch err {
		case nil:
			return probeAcquired
		case syscall.EAGAIN, syscall.EACCES:
			return probeBusy
		}
		fmt.Fprintln(os.Stderr, "lock:", err)
		return 2
	}
	return 2
}

// setlk takes (typ = F_WRLCK/F_RDLCK) or releases (F_UNLCK) a lock of one
// byte at off, as an OFD lock or a classic POSIX lock.
func setlk(f *os.File, kind string, typ int16, off int64, wait bool) error {
	lk := syscall.Flock_t{Type: typ, Whence: io.SeekStart, Start: off, Len: 1}
	var cmd int
	switch {
	case kind == "posix" && wait:
		cmd = syscall.F_SETLKW
	case kind == "posix":
		cmd = syscall.F_SETLK
	case wait:
		cmd = unix.F_OFD_SETLKW
	default:
		cmd = unix.F_OFD_SETLK
	}
	return syscall.FcntlFlock(f.Fd(), cmd, &lk)
}

func getlk(t *testing.T, f *os.File, off int64) int16 {
	t.Helper()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: off, Len: 1}
	if err := syscall.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		t.Fatalf("F_OFD_GETLK: %v", err)
	}
	return lk.Type
}

func isBusy(err error) bool { return err == syscall.EAGAIN || err == syscall.EACCES }

func helperCmd(mode, path, kind string, off int64) *exec.Cmd {
	return testenv.RoleCmd(context.Background(), "lock "+mode, path, kind, strconv.FormatInt(off, 10))
}

// holdLock starts a child process that holds a write lock on byte off of
// path. The returned func kills it and waits for it to exit.
func holdLock(t *testing.T, path, kind string, off int64) (kill func()) {
	t.Helper()
	cmd := helperCmd("hold", path, kind, off)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	kill = func() {
		if done {
			return
		}
		done = true
		cmd.Process.Kill()
		cmd.Wait()
		stdin.Close()
	}
	t.Cleanup(kill)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "locked\n" {
		kill()
		t.Fatalf("lock holder did not lock %s: %q, %v", path, line, err)
	}
	return kill
}

// probe runs a child process that tries once to write-lock byte off of path
// (OFD lock) and reports whether it got it.
func probe(t *testing.T, path string, off int64) (acquired bool) {
	t.Helper()
	err := helperCmd("probe", path, "ofd", off).Run()
	if err == nil {
		return true
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == probeBusy {
		return false
	}
	t.Fatalf("probe %s: %v", path, err)
	return false
}

// eventually retries f until it returns nil or 5 s pass: the kernel
// releases a dead process's FUSE files asynchronously.
func eventually(f func() error) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newLockFile(t *testing.T, dir string) (path string, f *os.File) {
	t.Helper()
	path = filepath.Join(dir, ".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return path, f
}

// TestLocksExclude: a child process holds a write lock on a byte of a file in
// the mount; the parent cannot take it (OFD or POSIX) until the child dies.
func TestLocksExclude(t *testing.T) {
	faultfstest.Require(t)
	for _, mode := range []faultfs.LockMode{faultfs.LocksForward, faultfs.LocksKernel} {
		for _, child := range []string{"ofd", "posix"} {
			for _, parent := range []string{"ofd", "posix"} {
				t.Run(fmt.Sprintf("%v/child-%s/parent-%s", mode, child, parent), func(t *testing.T) {
					m := faultfstest.Mount(t, faultfs.Options{Locks: mode})
					path, f := newLockFile(t, m.Dir)
					kill := holdLock(t, path, child, lockByte)

					if err := setlk(f, parent, syscall.F_WRLCK, lockByte, false); !isBusy(err) {
						t.Fatalf("parent %s lock while child holds it: %v, want EAGAIN", parent, err)
					}
					if typ := getlk(t, f, lockByte); typ != syscall.F_WRLCK {
						t.Errorf("F_OFD_GETLK while child holds the byte: type %d, want F_WRLCK", typ)
					}
					// The neighbouring bytes are free.
					for _, off := range []int64{lockByte - 1, lockByte + 1} {
						if err := setlk(f, parent, syscall.F_WRLCK, off, false); err != nil {
							t.Errorf("lock of byte %#x next to the child's: %v", off, err)
						}
						setlk(f, parent, syscall.F_UNLCK, off, false)
					}
					kill()
					if err := eventually(func() error { return setlk(f, parent, syscall.F_WRLCK, lockByte, false) }); err != nil {
						t.Fatalf("parent lock after the child died: %v", err)
					}
					if typ := getlk(t, f, lockByte); parent == "posix" && typ != syscall.F_WRLCK {
						// Our own POSIX lock conflicts with an OFD probe from the same process.
						t.Errorf("F_OFD_GETLK against own POSIX lock: type %d, want F_WRLCK", typ)
					}
					if probe(t, path, lockByte) {
						t.Error("another process got the byte the parent holds")
					}
				})
			}
		}
	}
}

// TestLocksBroken: with LocksBroken nobody is excluded.
func TestLocksBroken(t *testing.T) {
	m := faultfstest.Mount(t, faultfs.Options{Locks: faultfs.LocksBroken})
	path, f := newLockFile(t, m.Dir)
	holdLock(t, path, "posix", lockByte)
	for _, kind := range []string{"ofd", "posix"} {
		if err := setlk(f, kind, syscall.F_WRLCK, lockByte, false); err != nil {
			t.Errorf("broken locks: parent %s lock = %v, want success", kind, err)
		}
	}
	if typ := getlk(t, f, lockByte); typ != syscall.F_UNLCK {
		t.Errorf("broken locks: F_OFD_GETLK type %d, want F_UNLCK", typ)
	}
	if !probe(t, path, lockByte) {
		t.Error("broken locks: third process was excluded")
	}
	// Bounded, so that a regression fails instead of hanging; the
	// waiting goroutine ends when cleanup kills the holder.
	res := make(chan error, 1)
	go func() { res <- setlk(f, "ofd", syscall.F_WRLCK, lockByte, true) }()
	select {
	case err := <-res:
		if err != nil {
			t.Errorf("broken locks: F_OFD_SETLKW = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("broken locks: F_OFD_SETLKW blocked")
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("broken locks: flock = %v", err)
	}

	// Switching back makes locks real again.
	if err := m.SetLockMode(faultfs.LocksForward); err != nil {
		t.Fatal(err)
	}
	if err := setlk(f, "ofd", syscall.F_WRLCK, lockByte+5, false); err != nil {
		t.Fatal(err)
	}
	if probe(t, path, lockByte+5) {
		t.Error("after SetLockMode(LocksForward) the lock did not exclude")
	}
	if err := m.SetLockMode(faultfs.LocksKernel); err == nil {
		t.Error("SetLockMode(LocksKernel) on a forwarding mount succeeded")
	}
}

// TestLocksBacking: in LocksForward mode locks through the mount and locks
// taken directly on the backing file exclude each other.
func TestLocksBacking(t *testing.T) {
	m := faultfstest.Mount(t, faultfs.Options{})
	path, f := newLockFile(t, m.Dir)
	backingPath := filepath.Join(m.Backing, ".lock")

	kill := holdLock(t, backingPath, "posix", lockByte)
	if err := setlk(f, "ofd", syscall.F_WRLCK, lockByte, false); !isBusy(err) {
		t.Errorf("lock through mount while a process holds it on the backing file: %v, want EAGAIN", err)
	}
	kill()
	if err := eventually(func() error { return setlk(f, "ofd", syscall.F_WRLCK, lockByte, false) }); err != nil {
		t.Fatal(err)
	}
	if probe(t, backingPath, lockByte) {
		t.Error("a process locked the backing file while the byte is held through the mount")
	}
	if !probe(t, path, lockByte+1) {
		t.Error("probe of a free byte failed")
	}
}

// TestLocksPOSIXSemantics checks the classic POSIX rules through the mount,
// against a plain directory as reference: one process may lock a byte
// through two descriptors, and closing either drops its locks on the file.
func TestLocksPOSIXSemantics(t *testing.T) {
	faultfstest.Require(t)
	dirs := map[string]func(t *testing.T) string{
		"plain":   func(t *testing.T) string { return t.TempDir() },
		"forward": func(t *testing.T) string { return faultfstest.Mount(t, faultfs.Options{}).Dir },
		"kernel": func(t *testing.T) string {
			return faultfstest.Mount(t, faultfs.Options{Locks: faultfs.LocksKernel}).Dir
		},
	}
	for _, name := range []string{"plain", "forward", "kernel"} {
		t.Run(name, func(t *testing.T) {
			path, f1 := newLockFile(t, dirs[name](t))
			if err := setlk(f1, "posix", syscall.F_WRLCK, lockByte, false); err != nil {
				t.Fatal(err)
			}
			f2, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := setlk(f2, "posix", syscall.F_WRLCK, lockByte, false); err != nil {
				t.Errorf("same process, second descriptor: %v, want success", err)
			}
			if probe(t, path, lockByte) {
				t.Error("another process got the byte")
			}
			// An OFD lock of this same process is another owner.
			if err := setlk(f2, "ofd", syscall.F_WRLCK, lockByte, false); !isBusy(err) {
				t.Errorf("OFD lock against own POSIX lock: %v, want EAGAIN", err)
			}
			f2.Close()
			if err := eventually(func() error {
				if probe(t, path, lockByte) {
					return nil
				}
				return fmt.Errorf("byte still locked after closing a descriptor")
			}); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestSetlkwWaits: a blocking lock through the mount waits while another
// process holds the byte and is granted when it dies.
func TestSetlkwWaits(t *testing.T) {
	m := faultfstest.Mount(t, faultfs.Options{})
	path, f := newLockFile(t, m.Dir)
	kill := holdLock(t, path, "ofd", lockByte)
	res := make(chan error, 1)
	go func() { res <- setlk(f, "posix", syscall.F_WRLCK, lockByte, true) }()
	select {
	case err := <-res:
		t.Fatalf("F_SETLKW returned %v while another process holds the byte", err)
	case <-time.After(200 * time.Millisecond):
	}
	kill()
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("F_SETLKW after the holder died: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("F_SETLKW still waiting 10s after the holder died")
	}
}
