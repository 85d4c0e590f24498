//go:build linux

package proctree

// A Supervisor with no supervisor process: the holder (lease work)
// supervises each CMD itself. Only where the holder adopts orphans (the
// lease binary: AdoptOrphans) and CMD can run in a cgroup of its own, for
// then the kernel, not a second process, keeps every guarantee of the
// package documentation:
//
//	lease work (child subreaper) ── CMD ── sh ── fuzzer ...
//	           └─ sentinel (leads CMD's process group; keeper of the cgroup)
//
//   - CMD exits: the holder, a child subreaper, sees what CMD left
//     running in CMD's cgroup (cgroup.events), sends it SIGTERM, then
//     SIGKILL after the grace (cgroup.kill); orphans that exited are
//     reaped here;
//   - the holder is told to stop the tree: Terminate, Kill, as before;
//   - the holder dies (even by SIGKILL): CMD gets its parent-death signal
//     (SIGKILL; CMD is forked from a thread that lives as long as the
//     holder: see start), and the sentinel, whose pipe's only
//     writer was the holder, reads end of file and writes cgroup.kill of
//     every CMD's cgroup: what left CMD's process group and session dies
//     too.
//
// What it saves is a second Go runtime per worker, woken for every item
// (docs/performance.md, "lease work against the floor"). Where CMD cannot
// run in a cgroup (none delegated, an older kernel), a Supervisor has its
// process, as the package documentation describes: without a cgroup only
// a supervisor that outlives a killed holder can find a process that left
// CMD's process group. ModeEnv=process asks for the process everywhere.

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inline is the state of a Supervisor without a supervisor process.
type inline struct {
	self  int
	sent  *sentinel // its pipe's write end is held here, for the holder's life
	pgid  int       // the sentinel's process group: CMD's
	group *group
	// startMu serialises starts (n, pgid).
	startMu sync.Mutex
	n       int
	// cur is the command that runs (nil: none), for Close.
	cur *Cmd
	// noCgroup: a CMD ran without a cgroup (the kernel refused it, or
	// the group could not be made): the next command gets another
	// Supervisor (Gone).
	noCgroup atomic.Bool
}

// degraded reports whether the Supervisor can no longer keep its
// guarantees: its sentinel is gone, or a CMD ran without a cgroup.
func (in *inline) degraded() bool {
	select {
	case <-in.sent.exited:
		return true
	default:
		return in.noCgroup.Load()
	}
}

// spawnReq is one CMD to start.
type spawnReq struct {
	path      string
	argv, env []string
	files     []*os.File
	proc      *os.Process
	cg        *cmdGroup
	err       error
}

// inlineState is one command's supervision by its holder.
type inlineState struct {
	proc     *os.Process
	pid      int
	cg       *cmdGroup
	exited   bool
	stopping bool
	killing  bool
	timer    *time.Timer
	finished chan struct{} // closed when Wait has collected the tree
}

// startInline returns a Supervisor that supervises its commands in this
// process, or nil where it cannot keep the guarantees (no orphans
// adopted, no cgroup).
func startInline(grace time.Duration) *Supervisor {
	if !adopting.Load() {
		return nil
	}
	g := newGroup()
	if g == nil {
		return nil
	}
	sent, err := startSentinel(g)
	if err != nil {
		g.remove()
		return nil
	}
	in := &inline{self: os.Getpid(), sent: sent, pgid: sent.cmd.Process.Pid, group: g}
	return &Supervisor{in: in, grace: grace, exited: make(chan struct{}), sentinel: in.pgid, group: g}
}

// start starts one CMD (see supervisor.start, which this follows), forked
// from whatever thread runs the caller. A parent-death signal is the death
// of the thread that forked, not of the process (prctl(2),
// PR_SET_PDEATHSIG), so that thread must live as long as the holder. The
// Go runtime ends a thread only when a goroutine locked to it
// (runtime.LockOSThread) ends without unlocking (runtime.goexit0; the main
// thread is parked, never ended), and no goroutine of the lease binary
// does: each lock is undone in the function that took it (commit/seam's
// lock calls on FUSE), the supervisor process keeps its main goroutine on
// the main thread, and the runtime's own locked goroutine (the signal
// mask thread) never ends. TestNoGoroutineEndsLocked holds the module and
// its dependencies to that. Before, every CMD was forked by one goroutine
// locked to its thread for the Supervisor's life; handing each start to
// that thread and back was 3.7% of the worker's CPU samples
// (docs/performance.md, "lease work against the floor").
func (in *inline) start(r *spawnReq) {
	in.startMu.Lock()
	defer in.startMu.Unlock()
	attr := &os.ProcAttr{Files: r.files, Env: r.env, Sys: &syscall.SysProcAttr{Setpgid: true, Pgid: in.pgid, Pdeathsig: syscall.SIGKILL}}
	in.n++
	r.cg = in.group.newCmdGroup(in.n)
	var proc *os.Process
	err := errors.New("no cgroup")
	if r.cg != nil {
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, r.cg.fd
		proc, err = startProcess(r.path, r.argv, attr)
	}
	if err != nil {
		// No cgroup for CMD (the kernel would not start it there, or the
		// group could not be made): this CMD runs without one, found
		// through the subreaper alone, and the next gets a Supervisor
		// with a process (Gone).
		r.cg.remove()
		r.cg = nil
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = false, 0
		if proc, err = startProcess(r.path, r.argv, attr); err == nil {
			in.noCgroup.Store(true)
		}
	}
	if err != nil && in.pgid != 0 && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ESRCH)) {
		in.pgid = 0 // the sentinel is gone (killed): CMD's group is its own
		attr.Sys.Pgid = 0
		proc, err = startProcess(r.path, r.argv, attr)
	}
	if err != nil {
		r.err = err
		return
	}
	r.proc = proc
}

func (c *Cmd) startInline(files []*os.File, env []string) error {
	in := c.via.in
	r := &spawnReq{path: c.Path, argv: c.Args, env: env, files: files}
	in.start(r)
	if r.err != nil {
		return r.err
	}
	c.via.mu.Lock()
	c.inl = &inlineState{proc: r.proc, pid: r.proc.Pid, cg: r.cg, finished: make(chan struct{})}
	in.cur = c
	c.via.mu.Unlock()
	return nil
}

// opInline carries out one op of Cmd (Signal, Terminate, Kill).
func (c *Cmd) opInline(b []byte) error {
	s := c.via
	s.mu.Lock()
	defer s.mu.Unlock()
	st := c.inl
	if c.stopped || st == nil {
		return os.ErrProcessDone
	}
	switch b[0] {
	case opSignal:
		sig := syscall.Signal(b[1])
		if !st.exited {
			pg := st.pid
			if s.in.pgid != 0 {
				pg = s.in.pgid // the sentinel's group: it ignores what it gets
			}
			syscall.Kill(-pg, sig)
		} else {
			s.in.signalTree(sig)
		}
	case opTerminate:
		c.terminateLocked()
	case opKill:
		c.killLocked()
	}
	return nil
}

func (c *Cmd) terminateLocked() {
	st, in := c.inl, c.via.in
	in.signalTree(syscall.SIGTERM)
	in.signalTree(syscall.SIGCONT)
	if st.stopping {
		return
	}
	grace := c.Grace
	if grace <= 0 {
		grace = c.via.grace
	}
	st.stopping = true
	st.timer = time.AfterFunc(grace, func() {
		c.via.mu.Lock()
		defer c.via.mu.Unlock()
		if !c.stopped {
			c.killLocked()
		}
	})
}

func (c *Cmd) killLocked() {
	c.inl.killing = true
	c.inl.cg.kill()
	c.via.in.signalTree(syscall.SIGKILL)
}

// signalTree sends sig to every process below the holder but the
// sentinel: CMD's tree (the holder is a child subreaper, and its only
// other child is the sentinel).
func (in *inline) signalTree(sig syscall.Signal) { signalBelow(in.self, sig, in.sent.cmd.Process.Pid) }

// waitInline waits for CMD, then for the rest of its tree: what CMD left
// running gets SIGTERM, then SIGKILL after the grace.
func (c *Cmd) waitInline() error {
	s, st := c.via, c.inl
	awaitExit(st.pid)
	ps, err := st.proc.Wait()
	s.mu.Lock()
	st.exited = true
	if err == nil {
		c.ws = ps.Sys().(syscall.WaitStatus)
	} else {
		c.ws = syscall.WaitStatus(syscall.SIGKILL)
	}
	c.haveWS = true
	s.mu.Unlock()
	var treeErr error
	giveUpAt := time.Time{}
	for {
		s.in.reapOrphans(st.pid)
		if !s.in.left(st.cg) {
			break
		}
		s.mu.Lock()
		if !st.stopping {
			c.terminateLocked() // what CMD left running goes with it
		}
		if st.killing {
			c.killLocked() // SIGKILL again: what forked meanwhile
			if giveUpAt.IsZero() {
				giveUpAt = time.Now().Add(killWait)
			}
		}
		s.mu.Unlock()
		if !giveUpAt.IsZero() && time.Now().After(giveUpAt) {
			treeErr = fmt.Errorf("proctree: processes of the tree did not die within %s of SIGKILL (uninterruptible sleep?)", killWait)
			break
		}
		time.Sleep(poll)
	}
	s.mu.Lock()
	c.stopped = true
	if st.timer != nil {
		st.timer.Stop()
	}
	s.in.cur = nil
	s.mu.Unlock()
	if treeErr == nil {
		s.in.group.done(st.cg)
	} else {
		fmt.Fprintln(os.Stderr, "lease:", treeErr)
	}
	close(st.finished)
	if c.WaitDelay > 0 {
		done := make(chan struct{})
		go func() { c.served.copies.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(c.WaitDelay):
		}
	} else {
		c.served.copies.Wait()
	}
	if c.served.stdinW != nil {
		c.served.stdinW.Close()
	}
	c.release()
	if c.ws.Exited() && c.ws.ExitStatus() == 0 {
		return nil
	}
	return &StatusError{Status: c.ws}
}

// left reports whether a process of CMD's tree still runs, CMD having
// exited: one in its cgroup, or, without one, one below the holder but
// the sentinel (a child subreaper: every orphan of the tree is below it).
func (in *inline) left(cg *cmdGroup) bool {
	if cg != nil {
		return populated(cg.dir)
	}
	for _, p := range descendants(in.self) {
		if p.state != 'Z' && p.pid != in.sent.cmd.Process.Pid {
			return true
		}
	}
	return false
}

// awaitExit returns once the child pid (not reaped yet) has exited,
// having waited in the runtime's poller (its pidfd is readable then), not
// in a thread blocked in waitid: the process sleeps whole while CMD runs.
// Where a pidfd cannot be polled it returns at once, and the caller's
// blocking wait does the waiting.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Read(func(fd uintptr) bool {
		var info siginfo
		_, _, e := unix.Syscall6(unix.SYS_WAITID, unix.P_PIDFD, fd, uintptr(unsafe.Pointer(&info)), unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, 0, 0)
		return e != 0 && e != unix.EINTR || info.pid != 0
	})
}

// siginfo is the start of the kernel's siginfo_t for a child (waitid).
type siginfo struct {
	signo, errno, code, _ int32
	pid                   int32
	_                     [108]byte
}

// reapOrphans reaps the children of the holder that exited, orphans of
// CMD's tree reparented to it, without reaping another's: it looks
// (WNOWAIT) before it reaps, and stops at the sentinel, whose waiter is
// its exec.Cmd, and at cmd (its os.Process).
func (in *inline) reapOrphans(cmd int) {
	for {
		var info siginfo
		_, _, e := unix.Syscall6(unix.SYS_WAITID, unix.P_ALL, 0, uintptr(unsafe.Pointer(&info)), unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, 0, 0)
		if e == unix.EINTR {
			continue
		}
		pid := int(info.pid)
		if e != 0 || pid <= 0 || pid == in.sent.cmd.Process.Pid || pid == cmd {
			return
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err != nil && err != syscall.EINTR {
			return
		}
	}
}

// closeInline ends an inline Supervisor: a command still running is
// stopped first (SIGTERM, SIGKILL after the grace) and collected by its
// Wait; then the sentinel, at the end of its pipe, removes the cgroup.
func (s *Supervisor) closeInline() {
	s.mu.Lock()
	c := s.in.cur
	if c != nil && !c.stopped {
		c.terminateLocked()
	}
	s.mu.Unlock()
	if c != nil {
		<-c.inl.finished
	}
	s.in.sent.writer.Close()
	s.group.remove()
	close(s.exited)
}
