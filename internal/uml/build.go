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
	built   = map[string]string{} // tags -> binary
)

// BuildLease builds the lease binary of this checkout (with the given
// build tags) once per test process, into a directory
// Dir/bin-PID-* that the guests can read (the go build cache and the test's
// temporary directories are under the host's /tmp, which a guest does not
// see). Directories left by processes that are gone are removed first; one
// of a live process never is.
func BuildLease(tags ...string) (string, error) {
	key := strings.Join(tags, ",")
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := built[key]; ok {
		return b, nil
	}
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return "", err
	}
	removeDeadDirs()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("uml: cannot locate the module's source")
	}
	mod := filepath.Join(filepath.Dir(file), "..", "..")
	dir, err := os.MkdirTemp(Dir, fmt.Sprintf("bin-%d-", os.Getpid()))
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "lease")
	args := []string{"build", "-o", bin}
	if key != "" {
		args = append(args, "-tags", key)
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = mod
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("uml: go build %s: %v: %s", key, err, out)
	}
	built[key] = bin
	return bin, nil
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
