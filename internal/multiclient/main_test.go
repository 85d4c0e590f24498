package multiclient

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/glustertest"
	"github.com/leasetool/lease/internal/testenv"
)

var (
	leaseBin   string // plain lease
	leaseMPI   string // lease built with -tags mpi, "" when Open MPI is missing
	mpiMissing string // why leaseMPI is ""
	cluster    *glustertest.Cluster
	clusterErr error
	tableSeq   atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lease-multiclient-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "LEASE_") && k != testenv.RequireEnv && !strings.HasPrefix(k, "LEASE_GLUSTER_") {
			os.Unsetenv(k)
		}
	}
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	leaseBin = filepath.Join(dir, "lease")
	if out, err := exec.Command("go", "build", "-o", leaseBin, "github.com/leasetool/lease").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	if err := exec.Command("pkg-config", "--exists", "ompi").Run(); err != nil {
		mpiMissing = "Open MPI is not installed (pkg-config --exists ompi failed: apt-get install openmpi-bin libopenmpi-dev pkg-config)"
	} else if _, err := exec.LookPath("mpirun"); err != nil {
		mpiMissing = "mpirun not found"
	} else {
		bin := filepath.Join(dir, "lease-mpi")
		if out, err := exec.Command("go", "build", "-tags", "mpi", "-o", bin, "github.com/leasetool/lease").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build -tags mpi: %v\n%s", err, out)
			return 1
		}
		leaseMPI = bin
	}
	t0 := time.Now()
	cluster, clusterErr = glustertest.Up()
	if cluster != nil {
		fmt.Fprintf(os.Stderr, "multiclient: GlusterFS up in %.1fs: %s (%s, %s) and %s (%s, %s)\n", time.Since(t0).Seconds(),
			cluster.Default.Name, cluster.Default.A, cluster.Default.B, cluster.Safe.Name, cluster.Safe.A, cluster.Safe.B)
	}
	code := m.Run()
	if cluster != nil {
		if err := cluster.Down(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}

// need returns the cluster, or skips t (fails it under LEASE_TEST_REQUIRE).
func need(t *testing.T) *glustertest.Cluster {
	t.Helper()
	glustertest.Need(t, cluster, clusterErr)
	return cluster
}

// table is a fresh table directory on vol, as its two mounts name it; the
// table is created through mount A with 16 work shards (on the volume with
// the default options with --force: lease init refuses it otherwise).
func table(t *testing.T, vol glustertest.Volume) (a, b string) {
	t.Helper()
	name := fmt.Sprintf("%s-%d", strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()), tableSeq.Add(1))
	a, b = filepath.Join(vol.A, name), filepath.Join(vol.B, name)
	args := []string{"init", "--root", a, "--shards", "16"}
	if !vol.Safe {
		args = append(args, "--force")
	}
	if r := lease(t, "", args...); r.code != 0 {
		t.Fatalf("init: %s", r)
	}
	return a, b
}

// result is one finished lease process.
type result struct {
	args      []string
	code      int
	out, errs string
}

func (r result) String() string {
	return fmt.Sprintf("lease %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code, clip(r.out), clip(r.errs))
}

func (r result) lines() []string {
	var out []string
	for _, l := range strings.Split(r.out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func clip(s string) string {
	if len(s) > 3000 {
		return s[:1500] + "\n...\n" + s[len(s)-1500:]
	}
	return s
}

// bound is how long one lease process may run before it counts as hung:
// far beyond any lock timeout the tests give, so only a hang reaches it.
const bound = 3 * time.Minute

// start starts lease ARGS with stdin; wait collects it. A process still
// running after bound is killed and fails t (a hang: the GlusterFS client
// deadlock of an interrupted lock request looks like this).
func start(t *testing.T, stdin string, args ...string) func() result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	cmd := exec.CommandContext(ctx, leaseBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return func() result {
		defer cancel()
		var err error
		select {
		case err = <-done:
		case <-time.After(bound + 15*time.Second):
			// Killed at bound, and still not gone: stuck in the kernel in
			// a FUSE request of a deadlocked client. Down kills the
			// client, which ends it.
			r := result{args: args, code: -1}
			t.Errorf("hung: still in the kernel %v after SIGKILL (a deadlocked FUSE client): lease %s", 15*time.Second, strings.Join(args, " "))
			return r
		}
		r := result{args: args, out: out.String(), errs: errs.String()}
		if ctx.Err() != nil {
			t.Errorf("hung, killed after %v: %s", bound, r)
			r.code = -1
			return r
		}
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// lease runs lease ARGS with stdin and waits for it.
func lease(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return start(t, stdin, args...)()
}
