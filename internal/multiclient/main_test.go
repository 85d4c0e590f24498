package multiclient

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/cephtest"
	"github.com/leasetool/lease/internal/glustertest"
	"github.com/leasetool/lease/internal/testenv"
)

var (
	leaseBin   string // plain lease
	leaseMPI   string // lease built with -tags mpi, "" when Open MPI is missing
	mpiMissing string // why leaseMPI is ""
	gluster    *glustertest.Cluster
	glusterErr error
	ceph       *cephtest.Cluster
	cephErr    error
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
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "LEASE_") && k != testenv.RequireEnv && !strings.HasPrefix(k, "LEASE_GLUSTER_") && !strings.HasPrefix(k, "LEASE_CEPH_") && k != "LEASE_MULTICLIENT_FS" {
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
	// GlusterFS and CephFS come up side by side: each has a lock of its
	// own (another test binary may hold one of them for its whole run).
	// LEASE_MULTICLIENT_FS=cephfs (or gluster) brings up only that one,
	// for a quicker run by hand; the other one's subtests then skip.
	only := os.Getenv("LEASE_MULTICLIENT_FS")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if only != "" && only != "gluster" {
			glusterErr = fmt.Errorf("left out by LEASE_MULTICLIENT_FS=%s", only)
			return
		}
		t0 := time.Now()
		gluster, glusterErr = glustertest.Up()
		if gluster != nil {
			fmt.Fprintf(os.Stderr, "multiclient: GlusterFS up in %.1fs: %s (%s, %s) and %s (%s, %s)\n", time.Since(t0).Seconds(),
				gluster.Default.Name, gluster.Default.A, gluster.Default.B, gluster.Safe.Name, gluster.Safe.A, gluster.Safe.B)
		}
	}()
	go func() {
		defer wg.Done()
		if only != "" && only != "cephfs" {
			cephErr = fmt.Errorf("left out by LEASE_MULTICLIENT_FS=%s", only)
			return
		}
		t0 := time.Now()
		ceph, cephErr = cephtest.Up("")
		if ceph != nil {
			fmt.Fprintf(os.Stderr, "multiclient: CephFS up in %.1fs: client.a %s, client.b %s\n", time.Since(t0).Seconds(), ceph.A, ceph.B)
		}
	}()
	wg.Wait()
	code := m.Run()
	if gluster != nil {
		if err := gluster.Down(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if ceph != nil {
		if err := ceph.Down(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}

// mounts is one multi-client filesystem the tests run on, as its two
// client mounts (two nodes) name it.
type mounts struct {
	Name string // the subtest's name
	A, B string
	// Safe: lease qualify accepts it (no client cache serves a record
	// another client replaced).
	Safe bool
	// Volume is the GlusterFS volume; "" on CephFS.
	Volume string
	kind   string // the prerequisite kind (testenv) when it is not up
	why    error  // why it is not up
}

func (m mounts) up() bool { return m.A != "" }

func glusterMounts(v glustertest.Volume) mounts {
	return mounts{Name: "gluster-" + map[bool]string{true: "safe", false: "default"}[v.Safe], A: v.A, B: v.B, Safe: v.Safe, Volume: v.Name}
}

// glusterSafe, glusterDefault and cephfs are the filesystems of the tests;
// one that is not up has no mount points and says why.
func glusterSafe() mounts {
	if gluster == nil {
		return mounts{Name: "gluster-safe", kind: "gluster", why: glusterErr}
	}
	return glusterMounts(gluster.Safe)
}

func glusterDefault() mounts {
	if gluster == nil {
		return mounts{Name: "gluster-default", kind: "gluster", why: glusterErr}
	}
	return glusterMounts(gluster.Default)
}

func cephfs() mounts {
	if ceph == nil {
		return mounts{Name: "cephfs", kind: "ceph", why: cephErr}
	}
	return mounts{Name: "cephfs", A: ceph.A, B: ceph.B, Safe: true}
}

// safeFilesystems are the filesystems that must behave as one shared
// table: GlusterFS with the safe options and CephFS with its defaults.
func safeFilesystems() []mounts { return []mounts{glusterSafe(), cephfs()} }

// each runs f as a subtest on every filesystem of fss; the subtest of one
// that is not up skips (fails under LEASE_TEST_REQUIRE).
func each(t *testing.T, fss []mounts, f func(t *testing.T, m mounts)) {
	t.Helper()
	for _, m := range fss {
		t.Run(m.Name, func(t *testing.T) {
			need(t, m)
			f(t, m)
		})
	}
}

// need skips t (fails it under LEASE_TEST_REQUIRE) unless m is up.
func need(t *testing.T, m mounts) {
	t.Helper()
	if m.up() {
		return
	}
	switch m.kind {
	case "ceph":
		cephtest.Need(t, nil, m.why)
	default:
		glustertest.Need(t, nil, m.why)
	}
}

// table is a fresh table directory on vol, as its two mounts name it; the
// table is created through mount A with 16 work shards (on a mount that
// qualify fails, with --force: lease init refuses it otherwise).
func table(t *testing.T, vol mounts) (a, b string) {
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
