//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/faultfs/faultfstest"
)

// The test binary doubles as lease-faultfs when this variable is set, so the
// tests run the real command as a separate process.
const asMainEnv = "LEASE_FAULTFS_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

type daemon struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	exited chan struct{} // closed when the process has exited
	err    error         // cmd.Wait's result, once exited
}

// start runs lease-faultfs with args and waits for "mounted".
func start(t *testing.T, mnt string, args ...string) *daemon {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, stderr: &stderr, exited: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		io.Copy(io.Discard, stdout)
		d.err = cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
			return
		default:
		}
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(10 * time.Second):
			d.cmd.Process.Kill()
			<-d.exited
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	select {
	case line := <-lines:
		if line != "mounted\n" {
			<-d.exited
			t.Fatalf("lease-faultfs printed %q, want \"mounted\"; stderr:\n%s", line, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("lease-faultfs did not print \"mounted\" within 10s; stderr:\n%s", stderr.String())
	}
	return d
}

// stop sends sig and returns the exit code.
func (d *daemon) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	d.cmd.Process.Signal(sig)
	select {
	case <-d.exited:
		var ee *exec.ExitError
		if errors.As(d.err, &ee) {
			return ee.ExitCode()
		} else if d.err != nil {
			t.Fatal(d.err)
		}
		return 0
	case <-time.After(10 * time.Second):
		t.Fatalf("lease-faultfs did not exit within 10s of %v", sig)
		return -1
	}
}

func readCounts(t *testing.T, path string) map[string]int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]int64
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("counts file %q: %v", data, err)
	}
	return c
}

func isMounted(t *testing.T, dir string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

func fsyncDir(dir string) error {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return syscall.Fsync(fd)
}

func TestCommand(t *testing.T) {
	faultfstest.Require(t)
	backing, mnt, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	countsFile := filepath.Join(tmp, "counts.json")
	d := start(t, mnt, "--backing", backing, "--mount", mnt,
		"--delay", "fsync=20ms,rename=500us", "--fail", "fsyncdir=EINVAL",
		"--rule", "op=rename,glob=*.fail,errno=EIO,times=1",
		"--counts-file", countsFile)

	f, err := os.Create(filepath.Join(mnt, "a"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("hello")
	start := time.Now()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Errorf("fsync took %v, want >= 20ms", el)
	}
	f.Close()
	if err := fsyncDir(mnt); err != syscall.EINVAL {
		t.Errorf("directory fsync = %v, want EINVAL", err)
	}
	if err := os.Rename(filepath.Join(mnt, "a"), filepath.Join(mnt, "b.fail")); !errors.Is(err, syscall.EIO) {
		t.Errorf("first rename onto *.fail = %v, want EIO", err)
	}
	if err := os.Rename(filepath.Join(mnt, "a"), filepath.Join(mnt, "b.fail")); err != nil {
		t.Errorf("second rename onto *.fail (times=1) = %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(backing, "b.fail")); string(got) != "hello" {
		t.Errorf("backing b.fail = %q, %v", got, err)
	}

	// SIGUSR1 writes the counts without exiting.
	d.cmd.Process.Signal(syscall.SIGUSR1)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(countsFile); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c := readCounts(t, countsFile); c["rename"] != 2 || c["fsync"] != 1 {
		t.Errorf("counts after SIGUSR1 = %v", c)
	}
	if !isMounted(t, mnt) {
		t.Error("not mounted after SIGUSR1")
	}

	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d after SIGTERM; stderr:\n%s", code, d.stderr)
	}
	want := map[string]int64{"create": 1, "write": 1, "fsync": 1, "fsyncdir": 1, "rename": 2, "open": 0}
	got := readCounts(t, countsFile)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("counts[%s] = %d, want %d (counts %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("counts file has keys %v, want exactly %v", got, want)
	}
	if isMounted(t, mnt) {
		t.Errorf("%s still mounted after SIGTERM", mnt)
	}
}

func TestCommandLocks(t *testing.T) {
	faultfstest.Require(t)
	for _, tc := range []struct {
		args   []string
		broken bool
	}{
		{nil, false},
		{[]string{"--broken-locks"}, true},
		{[]string{"--locks", "broken"}, true},
		{[]string{"--locks", "kernel"}, false},
	} {
		t.Run(strings.Join(append([]string{"default"}, tc.args...), " "), func(t *testing.T) {
			backing, mnt := t.TempDir(), t.TempDir()
			d := start(t, mnt, append([]string{"--backing", backing, "--mount", mnt}, tc.args...)...)
			path := filepath.Join(mnt, ".lock")
			f1, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			f2, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			// Two open file descriptions are two OFD lock owners,
			// even in one process.
			lk := func(f *os.File) error {
				l := syscall.Flock_t{Type: syscall.F_WRLCK, Start: 77, Len: 1}
				return syscall.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &l)
			}
			if err := lk(f1); err != nil {
				t.Fatal(err)
			}
			err = lk(f2)
			if tc.broken && err != nil {
				t.Errorf("broken locks: second owner's lock = %v, want success", err)
			}
			if !tc.broken && err != syscall.EAGAIN {
				t.Errorf("second owner's lock = %v, want EAGAIN", err)
			}
			f1.Close()
			f2.Close()
			if code := d.stop(t, syscall.SIGINT); code != 0 {
				t.Errorf("exit code %d after SIGINT; stderr:\n%s", code, d.stderr)
			}
		})
	}
}

func TestCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--backing", "/tmp"},
		{"--backing", "/tmp", "--mount", "/mnt", "--delay", "fsync"},
		{"--backing", "/tmp", "--mount", "/mnt", "--delay", "unlink=2ms"},
		{"--backing", "/tmp", "--mount", "/mnt", "--fail", "fsync=EWHAT"},
		{"--backing", "/tmp", "--mount", "/mnt", "--fail", "fsyncdir=ENOSYS"},
		{"--backing", "/tmp", "--mount", "/mnt", "--rule", "glob=x"},
		{"--backing", "/tmp", "--mount", "/mnt", "--locks", "sometimes"},
		{"--backing", "/tmp", "--mount", "/mnt", "--locks", "kernel", "--broken-locks"},
		{"--backing", "/tmp", "--mount", "/mnt", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 || stdout.Len() != 0 || stderr.Len() == 0 {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want 2, nothing, a message", args, code, stdout.String(), stderr.String())
		}
	}
}
