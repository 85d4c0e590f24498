// Package hostile is the harness of the hostile-member tests (issue 38):
// a table shared by a group, used by several real accounts at once, some
// of them hostile. Its tests run as root and drop to other uids for every
// process they start (syscall.Credential): accounts A and B are members of
// one group, C is outside it. Nothing needs the accounts to exist in
// /etc/passwd; the ids are numeric.
//
// Canaries are files outside the table, owned by an account, that no
// `lease` of anyone may change: every test asserts, when it ends, that
// each keeps its content, mode, owner and link count.
//
// A test of this package (or of any package using it) starts its
// TestMain with hostile.Main, which builds the lease binary once and lets
// the test binary run the hostile steps registered with Register as a
// child process of another uid.
package hostile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
)

// The accounts: A and B in Group (their primary groups are their own, as
// with user private groups), C outside it.
const (
	Group = 47200
	A     = 47201
	B     = 47202
	C     = 47203
)

// helperEnv names the hostile step a re-executed test binary runs.
const helperEnv = "LEASE_HOSTILE_HELPER"

var (
	binDir string // world-searchable: the lease binary and a copy of the test binary
	steps  = map[string]func(args []string) int{}
)

// Register names a hostile step (a loop swapping links, a lock held, ...)
// that Env.Step runs in a child process as another uid. Call it from init
// or from TestMain before Main.
func Register(name string, step func(args []string) int) { steps[name] = step }

// Main runs the tests of m, or, in a child started by Env.Step, the step
// it names; it builds the lease binary first (once per test binary) when
// running as root, and removes it afterwards.
func Main(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		step, ok := steps[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "hostile: no step %q\n", name)
			os.Exit(2)
		}
		os.Exit(step(os.Args[1:]))
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
)

// build puts the lease binary and a copy of the test binary in binDir,
// where every account can run them.
func build() error {
	dir, err := os.MkdirTemp("", "lease-hostile-bin-")
	if err != nil {
		return err
	}
	binDir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "lease"), "github.com/leasetool/lease").CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	return copyFile(self, filepath.Join(dir, "hostile.test"), 0o755)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Env is one test's world: a directory every account can reach, a
// campaign directory of Group (setgid) for the table, and the canaries.
type Env struct {
	t        testing.TB
	Dir      string // the test's directory, searchable by everyone
	Campaign string // Dir/campaign: owned by root, group Group, mode 2775
	Umask    string // of every process run as an account; "022" unless set
	canaries []canary
}

// New makes the world of t, or skips t (fails it under
// LEASE_TEST_REQUIRE=all) when not run as root. When t ends every canary
// is checked.
func New(t testing.TB) *Env {
	t.Helper()
	testenv.NeedRoot(t, "the hostile-member tests (running lease as several accounts)")
	if buildOnce.Do(func() { buildErr = build() }); buildErr != nil {
		t.Fatalf("building lease: %v", buildErr)
	}
	dir := t.TempDir()
	// t.TempDir's directories are 0700: open the way for the accounts.
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e := &Env{t: t, Dir: dir, Campaign: filepath.Join(dir, "campaign"), Umask: "022"}
	if err := os.Mkdir(e.Campaign, 0o775); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(e.Campaign, 0, Group); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(e.Campaign, 0o2775); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.CheckCanaries)
	return e
}

// Table makes a table shared by Group as A (lease init --shared group,
// then any extra init flags) in the campaign directory and returns its
// root.
func (e *Env) Table(extra ...string) string {
	e.t.Helper()
	root := filepath.Join(e.Campaign, "table")
	if err := os.Mkdir(root, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chown(root, A, Group); err != nil {
		e.t.Fatal(err)
	}
	e.Must(0, A, "", append([]string{"init", "--root", root, "--shared", "group", "--shards", "4"}, extra...)...)
	return root
}

// Result is what a process did.
type Result struct {
	Code        int
	Out, ErrOut string
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.ErrOut)
}

// credential of uid: its own primary group, and Group for A and B; 0 is
// root itself.
func credential(uid int) *syscall.SysProcAttr {
	if uid == 0 {
		return nil
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
	if uid != C {
		cred.Groups = []uint32{Group}
	}
	return &syscall.SysProcAttr{Credential: cred}
}

// Command is the lease binary with args as uid (0: root), under e.Umask,
// in e.Dir, with a clean environment (no configuration file); extra env
// entries are appended by the caller to cmd.Env.
func (e *Env) Command(uid int, args ...string) *exec.Cmd {
	return e.command(context.Background(), uid, filepath.Join(binDir, "lease"), args...)
}

func (e *Env) command(ctx context.Context, uid int, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", "umask " + e.Umask + `; exec "$0" "$@"`, bin}, args...)...)
	cmd.Dir = e.Dir
	home := filepath.Join(e.Dir, "home-"+strconv.Itoa(uid))
	cmd.Env = []string{"PATH=" + binDir + ":/usr/bin:/bin", "USER=u" + strconv.Itoa(uid), "HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, "no-config")}
	cmd.SysProcAttr = credential(uid)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// Run runs lease as uid with stdin and returns what it did.
func (e *Env) Run(uid int, stdin string, args ...string) Result {
	e.t.Helper()
	return e.run(e.Command(uid, args...), stdin)
}

func (e *Env) run(cmd *exec.Cmd, stdin string) Result {
	e.t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("%s: %v", cmd, err)
	}
	return Result{code, out.String(), errb.String()}
}

// Must is Run, failing the test unless lease exits with want.
func (e *Env) Must(want, uid int, stdin string, args ...string) Result {
	e.t.Helper()
	r := e.Run(uid, stdin, args...)
	if r.Code != want {
		e.t.Fatalf("as uid %d: lease %s: %s, want exit %d", uid, strings.Join(args, " "), r, want)
	}
	return r
}

// Step is the hostile step name (see Register) with args, as uid, in a
// child process of the test binary that ctx kills; the caller starts and
// waits for it.
func (e *Env) Step(ctx context.Context, uid int, name string, args ...string) *exec.Cmd {
	cmd := e.command(ctx, uid, filepath.Join(binDir, "hostile.test"), args...)
	cmd.Env = append(cmd.Env, helperEnv+"="+name)
	return cmd
}

// Home is a private directory of uid outside the table (mode 0700, owned
// by uid), made on first use.
func (e *Env) Home(uid int) string {
	e.t.Helper()
	home := filepath.Join(e.Dir, "home-"+strconv.Itoa(uid))
	if err := os.Mkdir(home, 0o700); err == nil {
		if err := os.Chown(home, uid, uid); err != nil {
			e.t.Fatal(err)
		}
	} else if !os.IsExist(err) {
		e.t.Fatal(err)
	}
	return home
}

// canary is a file outside the table and what it must stay.
type canary struct {
	path  string
	state string
}

// Canary makes a file named name in the home of owner (see Home), owned
// by owner and its own group, with mode (exactly, whatever the umask) and
// a content of its own, and returns its path. When the test ends it must
// be unchanged: content, mode, owner, group and link count.
func (e *Env) Canary(owner int, name string, mode os.FileMode) string {
	e.t.Helper()
	path := filepath.Join(e.Home(owner), name)
	if err := os.WriteFile(path, []byte("canary "+path+" of uid "+strconv.Itoa(owner)+"\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chown(path, owner, owner); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		e.t.Fatal(err)
	}
	e.canaries = append(e.canaries, canary{path, stateOf(path)})
	return path
}

// stateOf is what a canary must keep.
func stateOf(path string) string {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return "lstat: " + err.Error()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "read: " + err.Error()
	}
	return fmt.Sprintf("mode %#o owner %d:%d links %d size %d sha256 %x",
		st.Mode, st.Uid, st.Gid, st.Nlink, st.Size, sha256.Sum256(data))
}

// CheckCanaries fails the test for each canary changed; New has it run
// when the test ends, and a test may call it earlier.
func (e *Env) CheckCanaries() {
	e.t.Helper()
	for _, c := range e.canaries {
		if now := stateOf(c.path); now != c.state {
			e.t.Errorf("canary %s changed:\nwas %s\nnow %s", c.path, c.state, now)
		}
	}
}
