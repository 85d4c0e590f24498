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
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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

// poll is how often the supervisor looks at the tree while it waits for
// it to exit.
const poll = 20 * time.Millisecond

// supervisor is the state of one supervisor process.
type supervisor struct {
	self    int
	cmdPid  int
	cmdDone bool
	cmdWS   syscall.WaitStatus
	grace   time.Duration
}

func supervise(v string) int {
	// The main goroutine stays on the main thread (init runs there), and
	// CMD is forked from it: its PDEATHSIG is tied to that thread.
	runtime.LockOSThread()
	os.Unsetenv(markerEnv) // CMD, and a lease run it starts, are no supervisors
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "lease-supervisor: bad %s=%q\n", markerEnv, v)
		return 125
	}
	unix.CloseOnExec(ctlFD)
	unix.CloseOnExec(statusFD)
	ctl, status := os.NewFile(ctlFD, "control"), os.NewFile(statusFD, "status")
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "lease-supervisor: PR_SET_CHILD_SUBREAPER: %v\n", err)
		return 125
	}
	s := &supervisor{self: os.Getpid(), grace: time.Duration(n)}
	sigc := make(chan os.Signal, 32)
	signal.Notify(sigc, syscall.SIGCHLD, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "lease-supervisor: no command")
		return 125
	}
	attr := &os.ProcAttr{Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}, Env: os.Environ(),
		// CMD leads a process group of its own (signals forwarded reach
		// it and its children); if the supervisor itself is killed, CMD
		// is too.
		Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}}
	proc, err := os.StartProcess(os.Args[1], os.Args[2:], attr)
	if err != nil {
		errno := syscall.ENOEXEC
		errors.As(err, &errno)
		writeMsg(status, msgExecFailed, uint32(errno))
		return 126
	}
	s.cmdPid = proc.Pid
	writeMsg(status, msgStarted, 0)

	ops := make(chan byte, 16)
	go readOps(ctl, ops)
	var (
		stopping  bool      // the tree got SIGTERM: SIGKILL at killAt
		killAt    time.Time // when what is left gets SIGKILL
		killing   bool      // SIGKILL until the tree is gone
		giveUpAt  time.Time // killing stops waiting here
		tick      = time.NewTicker(poll)
		holderHas = true
	)
	defer tick.Stop()
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
		s.signalTree(syscall.SIGKILL)
	}
	for {
		select {
		case sig := <-sigc:
			if sig == syscall.SIGCHLD {
				s.reap()
				break
			}
			s.forward(sig.(syscall.Signal))
		case op, ok := <-ops:
			switch {
			case !ok:
				// End of file: the holder is gone (or closed the pipe after
				// CMD exited). Nothing may outlive it.
				ops = nil
				if holderHas && !s.cmdDone {
					terminate()
				}
				holderHas = false
			case op == opTerminate:
				terminate()
			case op == opKill:
				kill()
			case op > opSignal:
				s.forward(syscall.Signal(op - opSignal))
			}
		case <-tick.C:
			s.reap()
		}
		if s.cmdDone && !stopping && s.live() {
			terminate() // what CMD left running goes with it
		}
		if stopping && !killing && time.Now().After(killAt) {
			kill()
		}
		if killing {
			kill()
		}
		if s.cmdDone && !s.live() {
			s.reap()
			break
		}
		if killing && time.Now().After(giveUpAt) {
			fmt.Fprintf(os.Stderr, "lease-supervisor: processes of the tree did not die within %s of SIGKILL (uninterruptible sleep?)\n", killWait)
			break
		}
	}
	if !s.cmdDone {
		return 125
	}
	writeMsg(status, msgExited, uint32(s.cmdWS))
	if s.cmdWS.Signaled() {
		return 128 + int(s.cmdWS.Signal())
	}
	return s.cmdWS.ExitStatus()
}

// readOps turns the control pipe into ops: a signal to forward is sent as
// opSignal+signal; the channel closes at end of file.
func readOps(ctl *os.File, ops chan<- byte) {
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
					ops <- opSignal + b
				}
			case b == opSignal:
				pendingSignal = true
			default:
				ops <- b
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
func (s *supervisor) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
		if pid == s.cmdPid && (ws.Exited() || ws.Signaled()) {
			s.cmdDone, s.cmdWS = true, ws
		}
	}
}

// forward sends sig to CMD's process group while CMD runs (the group is
// CMD's own), else to every process left of the tree.
func (s *supervisor) forward(sig syscall.Signal) {
	if !s.cmdDone {
		syscall.Kill(-s.cmdPid, sig)
		return
	}
	s.signalTree(sig)
}

// live reports whether any process of the tree is still running (zombies
// do not count: they are dead, waiting for their parent).
func (s *supervisor) live() bool {
	for _, p := range descendants(s.self) {
		if p.state != 'Z' {
			return true
		}
	}
	return false
}

// signalTree sends sig to every process below the supervisor.
func (s *supervisor) signalTree(sig syscall.Signal) {
	procs := descendants(s.self)
	in := map[int]bool{s.self: true}
	for _, p := range procs {
		in[p.pid] = true
	}
	for _, p := range procs {
		if p.state != 'Z' {
			signalProc(p.pid, sig, in)
		}
	}
}
