//go:build linux

package proctree

// cgroup v2, where the machine lets us use it: each CMD in a cgroup of
// its own, so that ending CMD's tree reaches every process of it, even
// one that left CMD's process group and session and whose parents are
// gone (setsid, then fork and exit), through cgroup.kill (Linux 5.14).
//
// The holder makes one group for its supervisor, a fresh directory
// lease-PID-RANDOM in its own cgroup (found from /proc/self/cgroup and the
// cgroup2 mount in /proc/self/mountinfo); a name that exists is never
// used. The supervisor makes a child of it for a CMD, cmd-N, starts CMD
// in it (clone3 with CLONE_INTO_CGROUP, so that CMD is in it before it
// runs a single instruction), and once the tree is gone from it (its
// cgroup.events says "populated 0") keeps it for the next CMD, which
// finds it as empty as a new one: a worker makes one cgroup, not one an
// item (a mkdir and an rmdir of a cgroup cost 51 us on a 2-vCPU VM, 3% of
// lease work's CPU an item; docs/performance.md#cgroup-reuse). A cgroup
// a tree is still in when its CMD is done with it, one that got
// cgroup.kill, or one CMD made a cgroup below is removed instead (done),
// and the next CMD gets a new one.
// The group itself is removed by the holder (Close, Wait), or by the
// sentinel when the supervisor died (it writes cgroup.kill first); one
// left by a holder killed with its sentinel is removed, once empty, by the
// next holder that makes a group in the same cgroup (sweepStale). The
// holder keeps its group's directory open with an flock(2) on it for as
// long as it lives, and the sweep removes only a group it can lock: a PID
// in the name says nothing to a holder in another PID namespace sharing
// the cgroup (unshare --pid, a container runtime's), where that PID may be
// free while the group's holder runs, between two CMDs with its group
// empty.
//
// Where there is no cgroup2 mount, our cgroup is not writable (a user
// without a delegated subtree), the kernel has no cgroup.kill, or the
// kernel refuses to start CMD in the child (the "no internal processes"
// rule of a cgroup with controllers enabled, a threaded cgroup), nothing
// of this is used and the tree is what the child subreapers and the
// sentinel reach (see the package documentation), silently.

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupEnv passes the group's directory to the supervisor and the
// sentinel (removed from the environment CMD gets).
const cgroupEnv = "LEASE_PROCTREE_CGROUP"

// group is a cgroup directory this process made (nil: none).
type group struct {
	dir string
	// lock is the directory, open with an flock on it while its holder
	// lives (see sweepStale); nil in a group passed on (groupFromEnv).
	lock *os.File
	// spare is the empty cgroup of a CMD that ended, for the next CMD
	// (done, newCmdGroup).
	mu    sync.Mutex
	spare *cmdGroup
}

// ownCgroup is the directory of the calling process's cgroup v2, or "".
func ownCgroup() string {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	var rel string
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel, found = p, true
		}
	}
	if !found || !strings.HasPrefix(rel, "/") || strings.Contains(rel, "/..") || strings.HasSuffix(rel, " (deleted)") {
		return ""
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	best := ""
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPEROPTIONS
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		fields := strings.Fields(pre)
		if len(fields) < 5 || strings.Contains(fields[4], `\`) || strings.Contains(fields[3], `\`) {
			continue // an escaped name: not ours to guess
		}
		root, mnt := fields[3], fields[4]
		r := rel
		if root != "/" {
			var ok bool
			if r, ok = strings.CutPrefix(rel, root); !ok || (r != "" && r[0] != '/') {
				continue
			}
		}
		dir := filepath.Join(mnt, r)
		if best == "" || mnt == "/sys/fs/cgroup" {
			best = dir
		}
	}
	return best
}

// newGroup makes a fresh group below the calling process's cgroup, or
// returns nil where cgroups cannot serve (see above).
func newGroup() *group {
	base := ownCgroup()
	if base == "" || unix.Access(base, unix.W_OK) != nil {
		return nil
	}
	sweepStale(base)
	for i := 0; i < 8; i++ {
		var b [6]byte
		rand.Read(b[:])
		dir := filepath.Join(base, "lease-"+strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(b[:]))
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, os.ErrExist) {
			continue // never one we did not make
		}
		if err != nil {
			return nil
		}
		lock, ok := lockGroup(dir)
		if !ok {
			// A sweep in another PID namespace took it between the
			// mkdir and the lock (it removes it; so may we), or it
			// cannot be opened: never used, a fresh name instead.
			syscall.Rmdir(dir)
			continue
		}
		g := &group{dir: dir, lock: lock}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
			g.remove() // a kernel before 5.14
			return nil
		}
		return g
	}
	return nil
}

// sweepStale removes the groups of holders that died with their sentinels
// (both killed by SIGKILL at once, or by the OOM killer), left in base: a
// name lease-PID-RANDOM as newGroup makes them, whose PID runs no process
// here and whose directory no holder keeps locked, with nothing left in it
// (rmdir refuses a group with a process, and its cmd-N groups first). A
// group whose holder runs, in this PID namespace or another, or that
// anything is still in, is left alone; so is every other name. Without it
// each such death would leave two empty groups behind for good, and a
// node's workers, restarted for days, would pile them up against
// cgroup.max.descendants. The sweep holds the group's lock while it
// removes it, so a holder that made the group a moment ago and locks it
// now either has it first (and the sweep leaves it) or finds it gone
// (lockGroup).
func sweepStale(base string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, ok := staleHolder(e.Name())
		if !ok || !e.IsDir() || pid == os.Getpid() || unix.Kill(pid, 0) != unix.ESRCH {
			continue
		}
		dir := filepath.Join(base, e.Name())
		lock, ok := lockGroup(dir)
		if !ok {
			continue // its holder lives, in another PID namespace
		}
		(&group{dir: dir}).remove()
		lock.Close()
	}
}

// lockGroup opens dir and takes its flock without waiting, and reports
// whether dir is still there once locked (a sweep removes a group under its
// lock: one removed between the caller's mkdir and this lock is gone).
func lockGroup(dir string) (*os.File, bool) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, false
	}
	var held, named unix.Stat_t
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil ||
		unix.Fstat(int(f.Fd()), &held) != nil || unix.Lstat(dir, &named) != nil ||
		held.Dev != named.Dev || held.Ino != named.Ino {
		f.Close()
		return nil, false
	}
	return f, true
}

// staleHolder parses a name newGroup makes, lease-PID-RANDOM (RANDOM 12
// lowercase hex digits), and returns its PID.
func staleHolder(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "lease-")
	if !ok {
		return 0, false
	}
	p, r, ok := strings.Cut(rest, "-")
	if !ok || len(r) != 12 || strings.Trim(r, "0123456789abcdef") != "" || p == "" || p[0] == '0' {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// groupFromEnv is the group the holder passed (nil: none), taken out of
// the environment.
func groupFromEnv() *group {
	v, ok := os.LookupEnv(cgroupEnv)
	os.Unsetenv(cgroupEnv)
	if !ok || !filepath.IsAbs(v) {
		return nil
	}
	return &group{dir: filepath.Clean(v)}
}

// env is the environment entry that passes g on.
func (g *group) env() []string {
	if g == nil {
		return nil
	}
	return []string{cgroupEnv + "=" + g.dir}
}

// kill sends SIGKILL to every process in g and the groups below it; the
// spare one below it is not reused after that (cmdGroup.killed).
func (g *group) kill() {
	if g != nil {
		g.mu.Lock()
		if g.spare != nil {
			g.spare.killed = true
		}
		g.mu.Unlock()
		writeKill(g.dir)
	}
}

func writeKill(dir string) {
	fd, err := unix.Open(filepath.Join(dir, "cgroup.kill"), unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	unix.Write(fd, []byte("1"))
	unix.Close(fd)
}

// populated reports whether a process is left in dir or below.
// One open, one read, one close: it runs after every CMD (os.ReadFile
// would put the file in the runtime's poller and take it out again).
func populated(dir string) bool {
	fd, err := unix.Open(filepath.Join(dir, "cgroup.events"), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var b [512]byte
	n, err := unix.Read(fd, b[:])
	if err != nil || n <= 0 {
		return false
	}
	return !strings.Contains(string(b[:n]), "populated 0")
}

// remove removes g's child groups (cmd-N) and g, once they are empty
// (rmdir fails on a group with processes, which is then left).
func (g *group) remove() {
	if g == nil {
		return
	}
	g.mu.Lock()
	if g.spare != nil {
		unix.Close(g.spare.fd) // its directory goes with the others below
		g.spare = nil
	}
	g.mu.Unlock()
	if names, err := os.ReadDir(g.dir); err == nil {
		for _, e := range names {
			if e.IsDir() && strings.HasPrefix(e.Name(), "cmd-") {
				rmCgroup(filepath.Join(g.dir, e.Name()), 0)
			}
		}
	}
	syscall.Rmdir(g.dir)
	if g.lock != nil {
		g.lock.Close() // after the rmdir: a sweep never meets it unlocked
	}
}

// killAndRemove kills what is in g, waits (bounded) until it is empty and
// removes it: for a holder or sentinel whose supervisor died.
func (g *group) killAndRemove() {
	if g == nil {
		return
	}
	g.kill()
	deadline := time.Now().Add(killWait)
	for populated(g.dir) && time.Now().Before(deadline) {
		time.Sleep(poll)
		g.kill()
	}
	g.remove()
}

// cmdGroup is the cgroup of one CMD, made by the supervisor in its group.
type cmdGroup struct {
	dir string
	fd  int
	// killed: cgroup.kill was written. Such a group is never reused: on
	// Linux 6.18 a process cloned into it (CLONE_INTO_CGROUP) was killed
	// at once, as if the kill were still going on.
	killed bool
}

// newCmdGroup is a CMD's group in g (nil: none): the one the CMD before
// it left empty (done), else a new one, named for the n-th CMD.
func (g *group) newCmdGroup(n int) *cmdGroup {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	c := g.spare
	g.spare = nil
	g.mu.Unlock()
	if c != nil {
		return c
	}
	dir := filepath.Join(g.dir, "cmd-"+strconv.Itoa(n))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil // one that exists is not ours to reuse
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		syscall.Rmdir(dir)
		return nil
	}
	return &cmdGroup{dir: dir, fd: fd}
}

// done takes back c, a CMD's group its tree is gone from, for the next
// CMD; a group a process is still in, one that got cgroup.kill, one with
// a cgroup below it (CMD, as root, made one: it may have enabled
// controllers, and the kernel would then refuse the next CMD there), or
// one with no g to keep it is removed, or left where it cannot be.
func (g *group) done(c *cmdGroup) {
	if c == nil {
		return
	}
	var st unix.Stat_t
	// A cgroup directory's link count is 2 and one for each cgroup below.
	if g == nil || c.killed || unix.Fstat(c.fd, &st) != nil || st.Nlink != 2 || populated(c.dir) {
		c.remove()
		return
	}
	g.mu.Lock()
	old := g.spare
	g.spare = c
	g.mu.Unlock()
	old.remove()
}

// kill sends SIGKILL to every process of c.
func (c *cmdGroup) kill() {
	if c != nil {
		c.killed = true
		writeKill(c.dir)
	}
}

// remove removes c, which must be empty by then.
func (c *cmdGroup) remove() {
	if c == nil {
		return
	}
	unix.Close(c.fd)
	rmCgroup(c.dir, 0)
}

// rmCgroup removes the cgroup dir and, first, the cgroups CMD made below
// it (as root it may), deepest first: an rmdir of a cgroup with one below
// fails, and the group would stay for good. Each must be empty (rmdir
// fails on a cgroup with a process, which is then left); a cgroup
// filesystem has no symbolic links; depth is bounded.
func rmCgroup(dir string, depth int) {
	if syscall.Rmdir(dir) == nil || depth >= 32 {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() {
			rmCgroup(filepath.Join(dir, e.Name()), depth+1)
		}
	}
	syscall.Rmdir(dir)
}

// Cgroups reports whether commands run here each in a cgroup of its own
// (a cgroup2 mount, our cgroup writable, cgroup.kill): for tests and
// reports. The kernel may still refuse to start CMD in it (see above).
func Cgroups() bool {
	g := newGroup()
	g.remove()
	return g != nil
}
