//go:build linux

package proctree

// The supervisor (see the package documentation): started as the
// holder's own executable with markerEnv set, it runs from this package's
// init, before the program's main, and exits there.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/internal/slack"
)

func init() {
	v, ok := os.LookupEnv(markerEnv)
	if !ok {
		return
	}
	os.Exit(supervise(v))
}

// The control pipe's read end and the status pipe's write end, as Start
// passes them (ExtraFiles).
const (
	ctlFD    = 3
	statusFD = 4
)

// killWait bounds how long the supervisor keeps killing a tree that will
// not go (a process in uninterruptible sleep on a dead NFS server dies
// when its I/O ends; the supervisor does not wait forever for it).
const killWait = 60 * time.Second

// poll is how often the supervisor sends SIGKILL again to a tree it is
// killing (and how often bury looks at what is left). While CMD runs, and
// while a tree it sent SIGTERM to has its grace, the supervisor does not
// poll: it sleeps until an event (SIGCHLD, a message of the holder, the
// end of the holder's channel, a signal to forward) or the grace's end.
const poll = 20 * time.Millisecond

// supervisor is the state of one supervisor process.
type supervisor struct {
	self    int
	cmdPid  int
	cmdDone bool
	cmdWS   syscall.WaitStatus
	grace   time.Duration
	// holderGone: the holder closed its end (or died).
	holderGone bool
	// pgid is the sentinel's process group, CMD's (0: CMD's own).
	pgid int
	// group is the holder's cgroup for this supervisor (nil: none), cg
	// the running CMD's, the n-th (cgroup_linux.go).
	group *group
	cg    *cmdGroup
	n     int
}

func supervise(v string) int {
	// One P, unless the user set GOMAXPROCS: a supervisor's (and a
	// sentinel's) work is a few system calls an event, and a P for every
	// CPU only adds threads spinning for work that is not there, a cost
	// of every item of every worker on the machine (commands/procs.go,
	// oneProc, has the numbers).
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if v == sentinelValue {
		return runSentinel()
	}
	// The main goroutine stays on the main thread (init runs there), and
	// CMD is forked from it: its PDEATHSIG is tied to that thread.
	runtime.LockOSThread()
	os.Unsetenv(markerEnv) // CMD, and a lease run it starts, are no supervisors
	spec, serving := strings.CutPrefix(v, servePrefix)
	n, err := strconv.ParseInt(spec, 10, 64)
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "lease-supervisor: bad %s=%q\n", markerEnv, v)
		return 125
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "lease-supervisor: PR_SET_CHILD_SUBREAPER: %v\n", err)
		return 125
	}
	s := &supervisor{self: os.Getpid(), grace: time.Duration(n), pgid: readGroup(), group: groupFromEnv()}
	sigc := make(chan os.Signal, 32)
	signal.Notify(sigc, syscall.SIGCHLD, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	if serving {
		return s.serve(sigc)
	}
	unix.CloseOnExec(ctlFD)
	unix.CloseOnExec(statusFD)
	ctl, status := os.NewFile(ctlFD, "control"), os.NewFile(statusFD, "status")
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "lease-supervisor: no command")
		return 125
	}
	if err := s.start(os.Args[1], os.Args[2:], os.Environ(), []*os.File{os.Stdin, os.Stdout, os.Stderr}); err != nil {
		errno := syscall.ENOEXEC
		errors.As(err, &errno)
		writeMsg(status, msgExecFailed, uint32(errno))
		return 126
	}
	writeMsg(status, msgStarted, 0)
	ops := make(chan ctlMsg, 16)
	go readOps(ctl, ops)
	s.follow(ops, sigc)
	if !s.cmdDone {
		return 125
	}
	s.cg.remove()
	writeMsg(status, msgExited, uint32(s.cmdWS))
	if s.cmdWS.Signaled() {
		return 128 + int(s.cmdWS.Signal())
	}
	return s.cmdWS.ExitStatus()
}

// startProcess starts CMD as os.StartProcess does, from the calling
// goroutine's thread, with the timer slack lease was started with (lease
// work runs with a coarser one of its own: internal/slack).
func startProcess(path string, argv []string, attr *os.ProcAttr) (p *os.Process, err error) {
	slack.Child(func() { p, err = os.StartProcess(path, argv, attr) })
	return p, err
}

// start starts CMD, in the sentinel's process group (or one of its own
// when there is no sentinel: signals forwarded reach it and its children),
// and in a cgroup of its own where there is one (see cgroup_linux.go),
// with files as its descriptors 0, 1, 2; if the supervisor itself is
// killed, CMD is too, and the sentinel kills CMD's group (and cgroup).
func (s *supervisor) start(path string, argv, env []string, files []*os.File) error {
	attr := &os.ProcAttr{Files: files, Env: env, Sys: &syscall.SysProcAttr{Setpgid: true, Pgid: s.pgid, Pdeathsig: syscall.SIGKILL}}
	s.n++
	s.cg = s.group.newCmdGroup(s.n)
	if s.cg != nil {
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, s.cg.fd
	}
	proc, err := startProcess(path, argv, attr)
	if err != nil && s.cg != nil {
		// The kernel would not start CMD there (no clone3, a cgroup with
		// controllers and processes, ...): without a cgroup, silently.
		s.cg.remove()
		s.cg = nil
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = false, 0
		if proc, err = startProcess(path, argv, attr); err == nil {
			s.group = nil // it was the cgroup: not for the next CMDs either
		}
	}
	if err != nil && s.pgid != 0 && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ESRCH)) {
		// The sentinel is gone (killed): CMD's group is its own.
		s.pgid = 0
		attr.Sys.Pgid = 0
		proc, err = startProcess(path, argv, attr)
	}
	if err != nil {
		s.cg.remove()
		s.cg = nil
		return err
	}
	s.cmdPid, s.cmdDone, s.cmdWS = proc.Pid, false, 0
	// The supervisor reaps CMD itself (wait4, reap), never through proc:
	// let go of the pidfd proc holds, or a Supervisor that runs one
	// command after another keeps one descriptor open for each until a
	// garbage collection, which its few allocations rarely bring (lease
	// work ran out of descriptors after 240 items at ulimit -n 256).
	proc.Release()
	return nil
}

// follow runs the supervision of one CMD (see the package documentation)
// until CMD has exited and nothing of its tree is left, or the tree would
// not die. ops closing means the holder is gone: the tree is stopped, and
// s.holderGone is set.
func (s *supervisor) follow(ops <-chan ctlMsg, sigc <-chan os.Signal) {
	var (
		stopping bool      // the tree got SIGTERM: SIGKILL at killAt
		killAt   time.Time // when what is left gets SIGKILL
		killing  bool      // SIGKILL until the tree is gone
		giveUpAt time.Time // killing stops waiting here
		// timer wakes the loop at the end of the grace and, while
		// killing, every poll; armed only then (timerC nil otherwise):
		// while CMD runs the supervisor sleeps until an event. Every
		// process of the tree is a descendant of a child of the
		// supervisor (a child subreaper), so its end (no child left) is
		// always announced by a SIGCHLD to the supervisor.
		timer  *time.Timer
		timerC <-chan time.Time
	)
	arm := func(d time.Duration) {
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d) // Go 1.23 timers: no stale tick to drain
		}
		timerC = timer.C
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	terminate := func() {
		s.signalTree(syscall.SIGTERM)
		s.signalTree(syscall.SIGCONT)
		if !stopping {
			stopping, killAt = true, time.Now().Add(s.grace)
		}
	}
	kill := func() {
		if !killing {
			killing, giveUpAt = true, time.Now().Add(killWait)
		}
		s.cg.kill() // even what is no longer below the supervisor
		s.signalTree(syscall.SIGKILL)
	}
	if s.holderGone {
		terminate()
	}
	for {
		// reaped: this event reaped (a SIGCHLD), and left is what reap
		// said: whether any child is left; not asked again below.
		reaped, left := false, false
		select {
		case sig := <-sigc:
			if sig == syscall.SIGCHLD {
				reaped, left = true, s.reap()
				break
			}
			s.forward(sig.(syscall.Signal))
		case m, ok := <-ops:
			switch {
			case !ok:
				// End of file: the holder is gone (or closed the pipe after
				// CMD exited). Nothing may outlive it.
				ops = nil
				if !s.holderGone && !s.cmdDone {
					terminate()
				}
				s.holderGone = true
			case m.op == opTerminate:
				terminate()
			case m.op == opKill:
				kill()
			case m.op == opSignal:
				s.forward(m.sig)
			case m.run != nil:
				m.run.close() // one command at a time: the holder waits for the last
			}
		case <-timerC:
			timerC = nil
			reaped, left = true, s.reap()
		}
		if !reaped && s.cmdDone {
			left = s.live()
		}
		live := s.cmdDone && left // no child left: the whole tree is gone (see reap)
		if live && !stopping {
			terminate() // what CMD left running goes with it
		}
		if stopping && !killing && time.Now().After(killAt) {
			kill()
		}
		if killing {
			kill()
		}
		if s.cmdDone && !live {
			return // reap found no child at all: nothing left to collect
		}
		if killing && time.Now().After(giveUpAt) {
			fmt.Fprintf(os.Stderr, "lease-supervisor: processes of the tree did not die within %s of SIGKILL (uninterruptible sleep?)\n", killWait)
			return
		}
		switch {
		case killing:
			arm(poll) // SIGKILL again: what forked meanwhile
		case stopping:
			arm(max(time.Until(killAt), 0))
		case timerC != nil:
			timer.Stop()
			timerC = nil
		}
	}
}

// ctlMsg is one command of the holder: an op (with its signal), or a
// command to run (serve).
type ctlMsg struct {
	op  byte
	sig syscall.Signal
	run *runReq
}

// readOps turns the control pipe of a supervisor of one command into
// messages; the channel closes at end of file.
func readOps(ctl *os.File, ops chan<- ctlMsg) {
	defer close(ops)
	buf := make([]byte, 64)
	pendingSignal := false
	for {
		n, err := ctl.Read(buf)
		for _, b := range buf[:n] {
			switch {
			case pendingSignal:
				pendingSignal = false
				if b > 0 && b <= 64 {
					ops <- ctlMsg{op: opSignal, sig: syscall.Signal(b)}
				}
			case b == opSignal:
				pendingSignal = true
			default:
				ops <- ctlMsg{op: b}
			}
		}
		if err != nil {
			return
		}
	}
}

func writeMsg(f *os.File, kind, val uint32) {
	var b [8]byte
	binary.LittleEndian.PutUint32(b[:4], kind)
	binary.LittleEndian.PutUint32(b[4:], val)
	f.Write(b[:])
}

// reap collects every child that exited: CMD, and the orphans reparented
// to the supervisor.
//
// It reports whether any child is left, exited or not. Every process of
// the tree is a descendant of a child of the supervisor (an orphan is
// reparented to it, the child subreaper), so none left means the tree is
// gone: no scan of /proc needed.
func (s *supervisor) reap() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return false // ECHILD: no child at all
		}
		if pid == 0 {
			return true // children, none of them exited
		}
		if pid == s.cmdPid && !s.cmdDone && (ws.Exited() || ws.Signaled()) {
			s.cmdDone, s.cmdWS = true, ws
		}
	}
}

// forward sends sig to CMD's process group while CMD runs (the group is
// CMD's own), else to every process left of the tree.
func (s *supervisor) forward(sig syscall.Signal) {
	if !s.cmdDone {
		pg := s.cmdPid
		if s.pgid != 0 {
			pg = s.pgid // the sentinel's group: it ignores what it gets
		}
		syscall.Kill(-pg, sig)
		return
	}
	s.signalTree(sig)
}

// live reports whether any process of the tree is still running (zombies
// do not count: they are dead, waiting for their parent): whether the
// supervisor has a child left once it reaped those that exited (see reap).
func (s *supervisor) live() bool { return s.reap() }

// signalTree sends sig to every process below the supervisor.
func (s *supervisor) signalTree(sig syscall.Signal) { signalBelow(s.self, sig, 0) }
