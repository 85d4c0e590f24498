package safety

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// leaseBinary builds the lease binary once per test run.
func leaseBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "lease-safety-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "lease")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/leasetool/lease").CombinedOutput()
		if err != nil {
			binErr = &buildError{err, string(out)}
		}
	})
	if binErr != nil {
		t.Fatalf("building lease: %v", binErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

func cleanupBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}
