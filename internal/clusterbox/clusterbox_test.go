package clusterbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
)

// The box's paths, as scripts/clusterbox-up.sh makes them (its defaults).
const (
	box    = "/run/lease-box"
	shared = box + "/shared" // the filesystem, as every node names it
	subnet = "10.77.0.0/24"
)

// filesystems are those the box runs on (LEASE_BOX_FS), each with the
// path of the host's own client of it (the table, looked at from outside).
var filesystems = []struct{ name, host string }{
	{"gluster", "/tmp/lease-box-gluster/host"},
	{"cephfs", "/tmp/lease-box-ceph/host"},
}

var nodes = []string{"nodeA", "nodeB"}

var (
	leaseMPI string // lease built with -tags mpi
	boxErr   string // why the box cannot come up, "" when it can
	boxKind  string // the prerequisite kind boxErr is about
	boxFS    string // the filesystem the box is up on, "" when it is down
	boxMine  bool   // this test binary brought it up (so takes it down)
	tableSeq atomic.Int64
)

func scripts() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts")
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "LEASE_") && k != testenv.RequireEnv {
			os.Unsetenv(k)
		}
	}
	os.Setenv("PATH", os.Getenv("PATH")+":/usr/sbin:/sbin")
	// The binary must be visible inside the nodes: their mount namespaces
	// are copies of the host's taken at bring-up, so it has to live on a
	// filesystem that was mounted then (the root's /tmp, not a new mount).
	dir, err := os.MkdirTemp("/tmp", "lease-clusterbox-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	boxKind, boxErr = prerequisites()
	if boxErr == "" {
		leaseMPI = filepath.Join(dir, "lease")
		if out, err := exec.Command("go", "build", "-tags", "mpi", "-o", leaseMPI, "github.com/leasetool/lease").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build -tags mpi: %v\n%s", err, out)
			return 1
		}
	}
	if boxErr == "" {
		if _, err := os.Stat(filepath.Join(box, "nodes")); err == nil {
			b, _ := os.ReadFile(filepath.Join(box, "fs"))
			boxFS = strings.TrimSpace(string(b))
			if boxFS == "" {
				boxFS = "gluster" // a box from before LEASE_BOX_FS
			}
			if staleOwner() {
				// Brought up by a test binary that is gone (killed by go
				// test -timeout, say): it holds its filesystem's lock for
				// nobody.
				out, err := script(3*time.Minute, "clusterbox-down.sh", "--purge")
				fmt.Fprintf(os.Stderr, "clusterbox: took down the box a dead test run left up (%v)\n", err)
				if err != nil {
					fmt.Fprint(os.Stderr, tail(out))
				}
				boxFS = ""
			}
		}
	}
	code := m.Run()
	switch {
	case boxFS != "" && !boxMine:
		fmt.Fprintf(os.Stderr, "clusterbox: left up on %s, as it was before the tests (scripts/clusterbox-down.sh takes it down)\n", boxFS)
	case boxMine:
		if out, err := script(3*time.Minute, "clusterbox-down.sh", "--purge"); err != nil {
			fmt.Fprintf(os.Stderr, "clusterbox-down.sh: %v\n%s", err, tail(out))
			code = 1
		}
	}
	return code
}

// up puts the box on filesystem fs for t: brings it up (taking down the
// box on the other filesystem this binary brought up), or skips t (fails
// it under LEASE_TEST_REQUIRE) when it cannot, or when a box that was up
// before the tests is on the other one (it is left as it is).
func up(t *testing.T, fs string) {
	t.Helper()
	need(t)
	if boxFS == fs {
		return
	}
	if boxFS != "" && !boxMine {
		testenv.Missing(t, "clusterbox", fmt.Sprintf("the box was up on %s before the tests; left as it is, so nothing runs on %s (scripts/clusterbox-down.sh)", boxFS, fs))
	}
	if kind, why := fsPrerequisites(fs); why != "" {
		testenv.Missing(t, kind, why)
	}
	if boxFS != "" {
		if out, err := script(3*time.Minute, "clusterbox-down.sh", "--purge"); err != nil {
			t.Fatalf("clusterbox-down.sh (the box on %s): %v\n%s", boxFS, err, tail(out))
		}
		boxFS, boxMine = "", false
	}
	t0 := time.Now()
	// The box waits for its filesystem's lock: under go test ./...,
	// internal/multiclient may hold it for its whole run.
	os.Setenv("LEASE_BOX_LOCK_WAIT", fmt.Sprint(int(lockWait.Seconds())))
	os.Setenv("LEASE_BOX_FS", fs)
	out, err := script(lockWait+5*time.Minute, "clusterbox-up.sh")
	os.Unsetenv("LEASE_BOX_FS")
	if err != nil {
		// The half-made box is ours to take down.
		boxFS, boxMine = fs, true
		testenv.Missing(t, "clusterbox", fmt.Sprintf("scripts/clusterbox-up.sh on %s failed (%v):\n%s", fs, err, tail(out)))
	}
	boxFS, boxMine = fs, true
	os.WriteFile(ownerFile, []byte(fmt.Sprint(os.Getpid())), 0o644)
	t.Logf("the box up on %s in %.1fs", fs, time.Since(t0).Seconds())
}

// lockWait is how long the bring-up waits for its filesystem's lock.
const lockWait = 30 * time.Minute

// ownerFile names the test binary that brought the box up, while it runs.
const ownerFile = box + "/owner.test"

// staleOwner reports whether the box was brought up by a test binary that
// no longer runs.
func staleOwner() bool {
	b, err := os.ReadFile(ownerFile)
	if err != nil {
		return false
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	return pid <= 0 || syscall.Kill(pid, 0) != nil
}

// prerequisites returns the kind and reason of the first missing
// prerequisite of the box, or "", "".
func prerequisites() (kind, why string) {
	if os.Geteuid() != 0 {
		return "root", "the cluster in a box needs root (network namespaces, a bridge, GlusterFS or Ceph)"
	}
	for _, tool := range []string{"ip", "nsenter", "unshare", "flock", "setsid", "mountpoint", "bc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool, tool + " is not installed (apt-get install -y iproute2 util-linux bc)"
		}
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return "fuse", "/dev/fuse missing: the nodes' clients cannot mount"
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		return "mpi", "mpirun is not installed (apt-get install -y openmpi-bin libopenmpi-dev pkg-config)"
	}
	if err := exec.Command("pkg-config", "--exists", "ompi").Run(); err != nil {
		return "mpi", "Open MPI's development files are missing (pkg-config --exists ompi failed: apt-get install -y libopenmpi-dev pkg-config)"
	}
	return "", ""
}

// fsPrerequisites returns the kind and reason of the first missing
// prerequisite of the box on fs, or "", "".
func fsPrerequisites(fs string) (kind, why string) {
	tools := []string{"glusterd", "gluster", "glusterfs"}
	install := "apt-get install -y glusterfs-server glusterfs-client"
	kind = "gluster"
	if fs == "cephfs" {
		tools = []string{"ceph-mon", "ceph-mgr", "ceph-osd", "ceph-mds", "ceph-fuse", "ceph", "monmaptool"}
		install = "apt-get install -y --no-install-recommends ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common"
		kind = "ceph"
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return kind, tool + " is not installed (" + install + ")"
		}
	}
	return "", ""
}

func script(limit time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(scripts(), name)}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.String(), err
}

// need skips t (fails it under LEASE_TEST_REQUIRE) unless the box is up.
func need(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "the cluster in a box")
	testenv.NeedTools(t, "ip", "nsenter", "unshare", "mpirun")
	if boxErr != "" {
		testenv.Missing(t, boxKind, boxErr)
	}
}

// table makes a fresh table through the host's client of the box's
// filesystem (host) and returns its name (the same below shared, in every
// node, and below host).
func table(t *testing.T, host string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "-"), os.Getpid(), tableSeq.Add(1))
	if r := lease(t, "", "init", "--root", filepath.Join(host, name), "--shards", "16"); r.code != 0 {
		t.Fatalf("init: %s", r)
	}
	return name
}

// bound is how long one lease process or mpirun job may run before it
// counts as hung.
const bound = 3 * time.Minute

type result struct {
	args      []string
	code      int
	out, errs string
	took      time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("%s: exit %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code, clip(r.out), clip(r.errs))
}

func clip(s string) string {
	if len(s) > 3000 {
		return s[:1500] + "\n...\n" + s[len(s)-1500:]
	}
	return s
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}

func runCmd(t *testing.T, env []string, stdin string, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	cmd.WaitDelay = 15 * time.Second
	t0 := time.Now()
	err := cmd.Run()
	r := result{args: append([]string{name}, args...), out: out.String(), errs: errs.String(), took: time.Since(t0)}
	if ctx.Err() != nil {
		t.Fatalf("hung, killed after %v: %s", bound, r)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// lease runs lease ARGS on the host (through the host's client).
func lease(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runCmd(t, nil, stdin, leaseMPI, args...)
}

// mpirun runs lease ARGS as one program of perNode ranks on each node,
// started by mpirun through the box's agent: lease is the program mpirun
// starts, so each is a rank by the launch detection (OMPI_COMMAND).
func mpirun(t *testing.T, perNode int, args ...string) result {
	t.Helper()
	var hosts []string
	for _, n := range nodes {
		hosts = append(hosts, fmt.Sprintf("%s:%d", n, perNode))
	}
	mpi := []string{
		"--mca", "plm_rsh_agent", filepath.Join(scripts(), "clusterbox-agent"),
		"--mca", "plm_rsh_no_tree_spawn", "1",
		"--mca", "oob_tcp_if_include", subnet,
		"--mca", "btl_tcp_if_include", subnet,
		"--host", strings.Join(hosts, ","), "--oversubscribe", "--stdin", "none",
		leaseMPI,
	}
	return runCmd(t, []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}, "", "mpirun", append(mpi, args...)...)
}

type proof struct {
	Members []struct {
		Rank int    `json:"rank"`
		Host string `json:"host"`
	} `json:"members"`
	Verified   bool    `json:"verified"`
	Rounds     int     `json:"rounds"`
	Contention int     `json:"contention"`
	Release    int     `json:"release"`
	Identity   int     `json:"identity"`
	MaxSkew    float64 `json:"max_clock_skew_s"`
	Checks     []struct {
		Name string `json:"name"`
		Rank int    `json:"rank"`
		Pass bool   `json:"pass"`
	} `json:"checks"`
	Error string `json:"error"`
}

// TestBox runs the box's tests on each filesystem in turn: the box on
// GlusterFS (the safe volume), then on CephFS.
func TestBox(t *testing.T) {
	for _, fs := range filesystems {
		t.Run(fs.name, func(t *testing.T) {
			up(t, fs.name)
			t.Run("QualifyAcrossNodes", func(t *testing.T) { qualifyAcrossNodes(t, fs.host) })
			t.Run("RenewBatchAcrossNodes", func(t *testing.T) { renewBatchAcrossNodes(t, fs.host) })
		})
	}
}

// qualifyAcrossNodes: mpirun --host nodeA:2,nodeB:2 lease qualify on
// the shared filesystem. Rank 0 alone prints the proof (so stdout is one JSON
// document); it is verified, with 4 members on the 2 hosts, contention and
// identity in every round from every other rank, release in every round,
// every check passed on every rank.
func qualifyAcrossNodes(t *testing.T, host string) {
	const rounds, np = 8, 4
	name := table(t, host)
	r := mpirun(t, np/len(nodes), "qualify", "--json", "--root", filepath.Join(shared, name), "--rounds", fmt.Sprint(rounds))
	var p proof
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.out)), &p); err != nil {
		t.Fatalf("the proof is not one JSON document (%v): %s", err, r)
	}
	if r.code != 0 || !p.Verified {
		t.Fatalf("exit %d, verified %v, want exit 0, verified: %s", r.code, p.Verified, r)
	}
	hosts := map[string][]int{}
	for _, mb := range p.Members {
		hosts[mb.Host] = append(hosts[mb.Host], mb.Rank)
	}
	var names []string
	for h := range hosts {
		names = append(names, h)
	}
	sort.Strings(names)
	if len(p.Members) != np || strings.Join(names, ",") != strings.Join(nodes, ",") {
		t.Errorf("members %+v: want %d members on %v", p.Members, np, nodes)
	}
	want := rounds * (np - 1)
	if p.Rounds != rounds || p.Contention != want || p.Identity != want || p.Release != rounds {
		t.Errorf("rounds %d contention %d identity %d release %d, want %d %d %d %d", p.Rounds, p.Contention, p.Identity, p.Release, rounds, want, want, rounds)
	}
	ranks := map[int]bool{}
	for _, c := range p.Checks {
		ranks[c.Rank] = true
		if !c.Pass {
			t.Errorf("check %s failed on rank %d", c.Name, c.Rank)
		}
	}
	if len(ranks) != np {
		t.Errorf("checks from %d ranks, want %d", len(ranks), np)
	}
	t.Logf("mpirun qualify in %.2fs: verified, members %v, contention %d/%d identity %d/%d release %d/%d, max clock skew %.6fs",
		r.took.Seconds(), hosts, p.Contention, want, p.Identity, want, p.Release, rounds, p.MaxSkew)
}

// renewBatchAcrossNodes: renew-batch of a few hundred leases, a few of
// them with a stale token, as one program of 4 ranks across the two nodes
// prints byte for byte what one process prints for the same input (the
// lines still held, in input order) and exits alike (1: some lost).
func renewBatchAcrossNodes(t *testing.T, host string) {
	const n, stale = 300, 7
	name := table(t, host)
	hostRoot, nodeRoot := filepath.Join(host, name), filepath.Join(shared, name)
	var names strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&names, "item-%d\n", i)
	}
	ids := lease(t, names.String(), "id", "-")
	claim := lease(t, ids.out, "claim", "--root", hostRoot, "--owner", "box", "--ttl", "3600", "-")
	if claim.code != 0 || strings.Count(claim.out, "\n") != n {
		t.Fatalf("claim: %s", claim)
	}
	// A stale token on some lines: renewing them fails (stale-token) on
	// whichever rank holds their shard, and they drop out of stdout.
	lines := strings.Split(strings.TrimSpace(claim.out), "\n")
	for i := 0; i < stale; i++ {
		j := i * (n / stale)
		id, _, _ := strings.Cut(lines[j], " ")
		lines[j] = id + " 999"
	}
	held := filepath.Join(t.TempDir(), "held")
	if err := os.WriteFile(held, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--owner", "box", "--ttl", "3600", "-v", held}
	mpi := mpirun(t, 2, append([]string{"renew-batch", "--root", nodeRoot}, common...)...)
	one := lease(t, "", append([]string{"renew-batch", "--root", hostRoot}, common...)...)
	if !strings.Contains(mpi.errs, "ranks=4") {
		t.Errorf("mpirun renew-batch did not run as 4 ranks: %s", mpi)
	}
	if mpi.code != 1 || one.code != 1 {
		t.Errorf("exit %d under mpirun, %d as one process; want 1 (%d stale tokens) from both:\nmpirun %s\none %s", mpi.code, one.code, stale, mpi, one)
	}
	if got := strings.Count(one.out, "\n"); got != n-stale {
		t.Errorf("one process renewed %d, want %d: %s", got, n-stale, one)
	}
	if mpi.out != one.out {
		t.Errorf("stdout differs: mpirun %d bytes, one process %d bytes:\nmpirun %s\none %s", len(mpi.out), len(one.out), mpi, one)
	}
	if c := strings.Count(mpi.errs, "stale-token "); c != stale {
		t.Errorf("mpirun stderr has %d stale-token lines, want %d: %s", c, stale, mpi)
	}
	t.Logf("renew-batch of %d leases (%d stale): mpirun 4 ranks on %v %.2fs, one process %.2fs; stdout byte-identical (%d bytes)",
		n, stale, nodes, mpi.took.Seconds(), one.took.Seconds(), len(mpi.out))
}
