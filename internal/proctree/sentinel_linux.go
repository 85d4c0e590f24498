//go:build linux

package proctree

// The sentinel and the holder's own watch over a supervisor that dies.
//
// A supervisor killed with SIGKILL takes CMD with it (PDEATHSIG), but not
// CMD's children: they are reparented to the nearest child subreaper
// above, or to PID 1. Two things catch them:
//
//   - the holder makes itself a child subreaper (Subreaper), so that the
//     orphans of a dead supervisor come to it, and kills every one of them
//     (Bury) before it finishes the item: a CMD that left its process
//     group or called setsid(2) is caught too;
//   - a sentinel, a small process the holder starts beside the supervisor
//     (its child, not the supervisor's), leads the process group every
//     CMD of that supervisor runs in. It ignores every signal it can, and
//     reads a pipe whose only writer is the supervisor: at end of file
//     (the supervisor is gone, however) it sends SIGKILL to its process
//     group, CMD's, itself included. So CMD's group dies with the
//     supervisor even when the holder was killed at the same moment.
//
// Where CMD runs in a cgroup of its own (cgroup_linux.go), the sentinel
// writes cgroup.kill too, and no process of CMD's tree escapes unless
// the sentinel is killed with the supervisor. Without one, what still
// escapes is a process that left CMD's process group when the holder,
// the supervisor and (or) the sentinel are all killed at once.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sentinelValue is markerEnv's value for a sentinel.
const sentinelValue = "sentinel"

// groupEnv tells a supervisor the sentinel's process group and the
// descriptor of its pipe's write end: "PGID:FD".
const groupEnv = "LEASE_PROCTREE_GROUP"

// runSentinel is the sentinel's life: wait for the end of its pipe, then
// kill its process group.
func runSentinel() int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGVTALRM)
	g := groupFromEnv()
	var b [64]byte
	for {
		n, err := unix.Read(0, b[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			break // end of file: the supervisor is gone
		}
	}
	g.killAndRemove() // every process of every CMD's cgroup, even one out of the group
	syscall.Kill(-syscall.Getpgrp(), syscall.SIGKILL)
	return 0
}

// sentinel is a started sentinel, from the holder's side.
type sentinel struct {
	cmd    *exec.Cmd
	writer *os.File      // the pipe's write end, for the supervisor (closed here once passed)
	exited chan struct{} // closed when the sentinel has exited
}

// startSentinel starts a sentinel in a process group of its own, the
// keeper of cgroup g too (nil: none).
func startSentinel(g *group) (*sentinel, error) {
	if err := CheckProc(); err != nil {
		return nil, fmt.Errorf("proctree: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("proctree: sentinel pipe: %w", err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Path = "/proc/self/exe"
	cmd.Args[0] = "lease-sentinel"
	cmd.Env = append(append(os.Environ(), markerEnv+"="+sentinelValue), g.env()...)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("proctree: start the sentinel: %w", err)
	}
	r.Close()
	s := &sentinel{cmd: cmd, writer: w, exited: make(chan struct{})}
	go func() {
		awaitExit(cmd.Process.Pid) // in the poller, not a thread blocked for the holder's life
		cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

// env is the supervisor's groupEnv entry, its pipe's write end passed as
// descriptor fd.
func (s *sentinel) env(fd int) string {
	return groupEnv + "=" + strconv.Itoa(s.cmd.Process.Pid) + ":" + strconv.Itoa(fd)
}

// readGroup reads groupEnv in the supervisor: the sentinel's process
// group (0: none) and keeps its pipe's write end open, out of CMD's reach.
func readGroup() int {
	v, ok := os.LookupEnv(groupEnv)
	if !ok {
		return 0
	}
	os.Unsetenv(groupEnv)
	pg, fd, _ := strings.Cut(v, ":")
	pgid, err1 := strconv.Atoi(pg)
	n, err2 := strconv.Atoi(fd)
	if err1 != nil || err2 != nil || pgid <= 1 || n < 3 {
		return 0
	}
	unix.CloseOnExec(n) // held, never closed: its end is the sentinel's signal
	return pgid
}

// adopting: see AdoptOrphans.
var adopting atomic.Bool

// AdoptOrphans lets Subreaper make this process a child subreaper and
// Bury kill what it adopted. Only a process whose children are all its
// holders' (the lease binary: commands.Main) may: a program that runs
// lease's commands in-process beside children of its own (a Go test, a
// harness) must neither collect every orphan below it (zombies nobody
// reaps) nor have Bury kill its other children.
func AdoptOrphans() { adopting.Store(true) }

// Subreaper makes the calling process (the holder) a child subreaper:
// the orphans of a supervisor that dies are reparented to it, not to
// PID 1, so that Bury finds them. It does nothing unless AdoptOrphans was
// called.
func Subreaper() error {
	if !adopting.Load() {
		return nil
	}
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// bury sends SIGKILL to every process below the calling process but
// those of keep (the holder's own children that it waits for itself),
// reaps those that are its children, and returns once none is left, or
// with an error after killWait. It is for a holder whose only children are
// its supervisor and sentinel: a dead supervisor's orphans are the rest.
func bury(keep map[int]bool) error {
	if !adopting.Load() {
		return nil // nothing was adopted; the sentinel killed CMD's group
	}
	self := os.Getpid()
	deadline := time.Now().Add(killWait)
	for {
		procs := descendants(self)
		in := map[int]bool{self: true}
		for _, p := range procs {
			in[p.pid] = true
		}
		left := 0
		for _, p := range procs {
			if keep[p.pid] {
				continue
			}
			if p.state == 'Z' {
				if p.ppid == self {
					var ws syscall.WaitStatus
					syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
				}
				continue
			}
			left++
			signalProc(p.pid, syscall.SIGKILL, in)
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("proctree: %d processes of a dead supervisor's tree did not die within %s of SIGKILL", left, killWait)
		}
		time.Sleep(poll)
	}
}
