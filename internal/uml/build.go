//go:build linux

package uml

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

var (
	buildMu sync.Mutex
	built   = map[string]string{} // package and tags -> binary
)

// BuildLease builds the lease binary of this checkout (with the given
// build tags) once per test process, into a directory
// Dir/bin-PID-* that the guests can read (the go build cache and the test's
// temporary directories are under the host's /tmp, which a guest does not
// see). Directories left by processes that are gone are removed first; one
// of a live process never is.
func BuildLease(tags ...string) (string, error) { return build(".", false, tags) }

// BuildGuest builds the program pkg of this checkout (a path relative to the
// module's root, e.g. "./internal/powercut/guest") as BuildLease builds
// lease, statically linked (CGO_ENABLED=0): a program meant to run only in
// a guest, where each shared library its loader opens costs system calls
// the kernel traces.
func BuildGuest(pkg string, tags ...string) (string, error) { return build(pkg, true, tags) }

func build(pkg string, static bool, tags []string) (string, error) {
	return once(pkg+" "+strings.Join(tags, ","), func(mod, dir string) (string, error) {
		name := "lease"
		if pkg != "." {
			name = filepath.Base(pkg)
		}
		bin := filepath.Join(dir, name)
		args := []string{"build", "-o", bin}
		if len(tags) > 0 {
			args = append(args, "-tags", strings.Join(tags, ","))
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Dir = mod
		if static {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("uml: go build %s %s: %v: %s", pkg, strings.Join(tags, ","), err, out)
		}
		return bin, nil
	})
}

// once builds what key names once per test process: mk writes it into
// dir, a new Dir/bin-PID-RANDOM (removed if mk fails), from the module's
// root mod, and returns its path.
func once(key string, mk func(mod, dir string) (string, error)) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := built[key]; ok {
		return b, nil
	}
	mod, dir, err := binDir()
	if err != nil {
		return "", err
	}
	b, err := mk(mod, dir)
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	built[key] = b
	return b, nil
}

// binDir makes a directory Dir/bin-PID-RANDOM for what this process
// builds, and returns it with the module's root (once holds buildMu).
func binDir() (mod, dir string, err error) {
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return "", "", err
	}
	removeDeadDirs()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", "", fmt.Errorf("uml: cannot locate the module's source")
	}
	mod = filepath.Join(filepath.Dir(file), "..", "..")
	dir, err = os.MkdirTemp(Dir, fmt.Sprintf("bin-%d-", os.Getpid()))
	if err != nil {
		return "", "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", "", err
	}
	return mod, dir, nil
}

// xstatePreload builds the kernels' preload, internal/uml/xstate/xstate.c
// (a host whose XSAVE area is larger than linux.uml's buffer for it, such
// as an Intel CPU with AMX, refuses the guests' floating-point state
// without it; see that file), once per test process, with cc.
func xstatePreload() (string, error) {
	return once("xstate preload", func(mod, dir string) (string, error) {
		so := filepath.Join(dir, "xstate.so")
		cmd := exec.Command("cc", "-shared", "-fPIC", "-O2", "-Wall", "-o", so, filepath.Join(mod, "internal", "uml", "xstate", "xstate.c"), "-ldl")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("uml: build the kernels' preload internal/uml/xstate/xstate.c (cc, apt-get install gcc): %v: %s", err, out)
		}
		return so, nil
	})
}

// removeDeadDirs removes the directories Dir/bin-PID-RANDOM (BuildLease's)
// and Dir/k-NAME-PID-RANDOM (the kernels' working directories) of test
// processes that are gone: a process killed before its cleanup ran leaves
// them. One of a live process is never touched.
func removeDeadDirs() {
	ents, _ := os.ReadDir(Dir)
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "bin-") && !strings.HasPrefix(name, "k-") {
			continue
		}
		f := strings.Split(name, "-")
		if len(f) < 3 {
			continue
		}
		pid, err := strconv.Atoi(f[len(f)-2])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			os.RemoveAll(filepath.Join(Dir, name))
		}
	}
}
