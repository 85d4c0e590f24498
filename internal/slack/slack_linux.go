//go:build linux

package slack

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// orig is the slack children get, read from Env at start; 0: this
// process has not been raised (its children inherit its own slack).
var orig = func() uint64 {
	n, err := strconv.ParseUint(os.Getenv(Env), 10, 64)
	if err != nil || n == 0 {
		return 0
	}
	return n
}()

// Raise gives the process the slack Worker by executing it again with it,
// and does not return when that works. It returns (and the process runs
// on with the slack it has) when the process is raised already (Env is
// set), its slack is Worker or more already (a user's choice: nothing
// changes), or it cannot be executed again; its caller must not have
// started anything a new execution would repeat or lose.
func Raise() {
	if _, ok := os.LookupEnv(Env); ok {
		return
	}
	cur, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil || cur <= 0 || uint64(cur) >= uint64(Worker) {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(Worker), 0, 0, 0) != nil {
		return
	}
	if path, ok := self(); ok {
		env := append(os.Environ(), Env+"="+strconv.Itoa(cur))
		_ = syscall.Exec(path, os.Args, env)
	}
	// Still here: no /proc, or the kernel refused. Run on as started.
	unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(cur), 0, 0, 0)
}

// self is a path of the running executable, for executing it again: one
// that holds the same file as /proc/self/exe (none: it was replaced on
// disk since it started) and, where one does, ends in the process's name.
// The kernel names a process after the base name of the path it executed,
// which ps, top and pgrep show: /proc/self/exe itself would rename it
// "exe", and the link's target (os.Executable) the target's name where
// lease was started through a symbolic link. So the path it was started
// by comes first: argv[0], looked up in PATH as the shell did.
func self() (string, bool) {
	var run unix.Stat_t
	if unix.Stat("/proc/self/exe", &run) != nil {
		return "", false
	}
	var paths []string
	if len(os.Args) > 0 && os.Args[0] != "" {
		if strings.Contains(os.Args[0], "/") {
			paths = append(paths, os.Args[0])
		} else if p, err := exec.LookPath(os.Args[0]); err == nil {
			paths = append(paths, p)
		}
	}
	if p, err := os.Executable(); err == nil {
		paths = append(paths, p)
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	name := strings.TrimSuffix(string(comm), "\n")
	found := ""
	for _, p := range paths {
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil || st.Dev != run.Dev || st.Ino != run.Ino {
			continue
		}
		base := filepath.Base(p)
		if len(base) > 15 {
			base = base[:15] // TASK_COMM_LEN - 1
		}
		if base == name {
			return p, true
		}
		if found == "" {
			found = p
		}
	}
	return found, found != ""
}

// Child runs start, which starts a child process from the calling
// goroutine's thread (os.StartProcess), with the thread's slack set to the
// slack the child is to get: in a raised process, the one lease was
// started with.
func Child(start func()) { child(orig, start) }

func child(orig uint64, start func()) {
	if orig == 0 {
		start()
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cur, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil || cur <= 0 || uint64(cur) == orig ||
		unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(orig), 0, 0, 0) != nil {
		start()
		return
	}
	defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(cur), 0, 0, 0)
	start()
}
