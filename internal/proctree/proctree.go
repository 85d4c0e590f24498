// Package proctree runs a command so that no process it starts outlives
// it, its holder's request, or its holder's death: the whole tree, not
// only the direct child. A small supervisor process sits between the
// holder (lease run) and the command (and where the machine lets us use
// cgroup v2, each command runs in a cgroup of its own too: cgroup_linux.go):
//
//	lease run ── supervisor (child subreaper) ── CMD ── sh ── fuzzer ...
//
// The supervisor is the holder's own executable, started again (as
// /proc/self/exe) with a marker in its environment that this package's
// init recognises before main runs. It makes itself a child subreaper
// (PR_SET_CHILD_SUBREAPER), so every process below it that loses its
// parent is reparented to it, even one that called setsid(2): the tree is
// always the supervisor's descendants, found in /proc. It starts CMD in a
// process group of its own and then obeys the holder over a pipe:
// forward a signal to CMD's process group, SIGTERM every process of the
// tree, SIGKILL every process of the tree. Whatever ends the run, the
// supervisor leaves nothing behind:
//
//   - CMD exits: what it left running gets SIGTERM, then SIGKILL after the
//     grace; then the supervisor reports CMD's wait status and exits;
//   - the holder dies (even by SIGKILL): the pipe's write end closes with
//     it, the supervisor reads end of file, and the whole tree gets
//     SIGTERM, then SIGKILL after the grace (a pipe, not PDEATHSIG, which
//     the kernel ties to the thread that forked);
//   - the holder asks (its lease was lost or revoked): Terminate, Kill;
//   - the supervisor itself dies (SIGKILL): CMD dies with it (its
//     parent-death signal), a sentinel that leads CMD's process group
//     kills that group (sentinel_linux.go), and the holder, a child
//     subreaper too (Subreaper), gets the orphans left and kills them
//     (Bury) before it finishes CMD's item; Wait says ErrSupervisorGone.
//
// Signals go through pidfds (pidfd_open, then the process's parent is
// checked again), so a recycled process ID is never signalled.
//
// A Supervisor is one such supervisor for many commands, one after
// another (lease work: one per worker), over a SOCK_SEQPACKET socket that
// carries each command and its standard descriptors: each command is
// supervised as above, and the end of the socket (the holder's death)
// stops the tree of the one running. Where the holder adopts orphans (the
// lease binary) and CMD can run in a cgroup of its own, a Supervisor has
// no process: the holder supervises each CMD itself, and the sentinel and
// the cgroup take the supervisor's part when the holder dies
// (inline_linux.go; ModeEnv).
package proctree

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/leasetool/lease/internal/slack"
	"github.com/leasetool/lease/leasefmt"
)

// markerEnv carries the supervisor's settings into the supervisor: its
// presence is what makes a started executable a supervisor. Its value is
// the grace in nanoseconds: of a supervisor of one command (Cmd), or, after
// servePrefix, of a Supervisor that runs one command after another.
const markerEnv = "LEASE_PROCTREE_SUPERVISE"

// servePrefix starts the value of markerEnv for a Supervisor.
const servePrefix = "serve:"

// The commands of the control pipe, one byte each (a signal to forward
// is followed by its number).
const (
	opSignal    = 's'
	opTerminate = 'T'
	opKill      = 'K'
	// opRun (Supervisor only) carries a command to run: JSON, with its
	// standard descriptors as SCM_RIGHTS.
	opRun = 'R'
)

// The messages of the status pipe: the start (started, or the errno of a
// failed exec), then CMD's wait status at the end.
const (
	msgStarted    = 0
	msgExecFailed = 1
	msgExited     = 2
)

// DefaultGrace is the time between SIGTERM and SIGKILL when the
// supervisor stops what is left of the tree on its own (CMD exited, the
// holder died).
const DefaultGrace = 10 * time.Second

// Cmd is a command run under a supervisor. Set Env, Stdin, Stdout, Stderr
// and Grace before Start; Args[0] is the name CMD sees as its argv[0].
type Cmd struct {
	// Path is CMD's executable, Args its argv (Args[0] what CMD sees).
	Path string
	Args []string
	// Env is CMD's environment (nil: the holder's).
	Env []string
	// Stdin, Stdout and Stderr are CMD's standard streams (nil: /dev/null).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Grace is the time between SIGTERM and SIGKILL for what the
	// supervisor stops on its own (0: DefaultGrace).
	Grace time.Duration
	// WaitDelay bounds the wait for CMD's output after the supervisor
	// exited (see exec.Cmd.WaitDelay; 0: one second).
	WaitDelay time.Duration

	sup     *exec.Cmd
	ctl     *os.File // control pipe, write end
	status  *os.File // status pipe, read end
	mu      sync.Mutex
	ws      syscall.WaitStatus
	haveWS  bool
	stopped bool

	sentinel int    // the sentinel's pid (0: none)
	group    *group // CMD's cgroup's parent (nil: none; cgroup_linux.go)
	supGone  bool

	// via is the Supervisor that runs this command (Supervisor.Command),
	// nil for a supervisor of its own; served is its state then.
	via    *Supervisor
	served *served
	inl    *inlineState // a Supervisor without a process (inline_linux.go)
}

// ModeEnv chooses how a Supervisor supervises: "auto" (or unset), in the
// holder where the machine gives CMD a cgroup (inline_linux.go), else
// with a supervisor process; "process", always with one.
const ModeEnv = "LEASE_SUPERVISOR"

// CheckMode reports a value of ModeEnv that is neither auto nor process.
func CheckMode() error {
	switch mode := os.Getenv(ModeEnv); mode {
	case "", "auto", "process":
		return nil
	default:
		return fmt.Errorf("%s=%s: want auto or process", ModeEnv, leasefmt.Quote(mode))
	}
}

// ErrSupervisorGone: the supervisor process is gone (killed) while it
// ran CMD, or a Supervisor was closed; start another. What is left of
// CMD's tree is Bury's.
var ErrSupervisorGone = errors.New("proctree: the supervisor is gone")

// StatusError is the error of Wait for a command a Supervisor ran that
// did not exit 0; Status is its wait status.
type StatusError struct{ Status syscall.WaitStatus }

func (e *StatusError) Error() string {
	if e.Status.Signaled() {
		return "signal: " + e.Status.Signal().String()
	}
	return "exit status " + strconv.Itoa(e.Status.ExitStatus())
}

// Command returns the Cmd that runs path with argv (argv[0] is the name
// CMD sees).
func Command(path string, argv ...string) *Cmd {
	return &Cmd{Path: path, Args: argv}
}

// Start starts the supervisor and, through it, CMD; it returns once CMD
// was started, or with the error of its exec (an *os.PathError whose Err
// is the errno: fs.ErrNotExist for a missing program).
func (c *Cmd) Start() error {
	if c.via != nil {
		return c.startServed()
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("proctree: control pipe: %w", err)
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return fmt.Errorf("proctree: status pipe: %w", err)
	}
	grace := c.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	Subreaper() // a dead supervisor's orphans come here (Bury)
	c.group = newGroup()
	sent, err := startSentinel(c.group)
	if err != nil {
		c.group.remove()
		ctlR.Close()
		ctlW.Close()
		stR.Close()
		stW.Close()
		return err
	}
	sup := exec.Command("/proc/self/exe", append([]string{c.Path}, c.Args...)...)
	sup.Path = "/proc/self/exe" // the running binary, even if self was replaced on disk
	sup.Args[0] = "lease-supervisor"
	sup.Env = append(append(append([]string(nil), env...), markerEnv+"="+strconv.FormatInt(int64(grace), 10)), c.group.env()...)
	sup.Stdin, sup.Stdout, sup.Stderr = c.Stdin, c.Stdout, c.Stderr
	sup.ExtraFiles = []*os.File{ctlR, stW} // fd 3: commands in; fd 4: status out
	if sent != nil {
		sup.ExtraFiles = append(sup.ExtraFiles, sent.writer) // fd 5: the sentinel's pipe
		sup.Env = append(sup.Env, sent.env(5))
		c.sentinel = sent.cmd.Process.Pid
	}
	// Its own process group: a terminal's signals reach the holder, which
	// forwards them, never the supervisor directly.
	sup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sup.WaitDelay = c.WaitDelay
	if sup.WaitDelay <= 0 {
		// The supervisor exits once nothing of the tree is left, so CMD's
		// output ends with it; unless it was killed: then what CMD left
		// running may hold the output open until Bury, after Wait.
		sup.WaitDelay = time.Second
	}
	// With CMD's environment (no slack.Env), so with CMD's timer slack too.
	slack.Child(func() { err = sup.Start() })
	if sent != nil {
		sent.writer.Close() // the supervisor's alone now
	}
	if err != nil {
		c.group.remove()
		ctlR.Close()
		ctlW.Close()
		stR.Close()
		stW.Close()
		return fmt.Errorf("proctree: start the supervisor: %w", err)
	}
	ctlR.Close()
	stW.Close()
	c.sup, c.ctl, c.status = sup, ctlW, stR
	var msg [8]byte
	if _, err := io.ReadFull(stR, msg[:]); err != nil {
		// The supervisor died before it could start CMD.
		c.ctl.Close()
		c.sup.Wait()
		c.status.Close()
		c.group.remove()
		return fmt.Errorf("proctree: the supervisor exited before starting %s: %v", c.Path, c.sup.ProcessState)
	}
	if binary.LittleEndian.Uint32(msg[:4]) == msgExecFailed {
		errno := syscall.Errno(binary.LittleEndian.Uint32(msg[4:]))
		c.ctl.Close()
		c.sup.Wait()
		c.status.Close()
		c.group.remove()
		return &os.PathError{Op: "fork/exec", Path: c.Path, Err: errno}
	}
	return nil
}

// Pid is the supervisor's process ID (CMD's parent).
func (c *Cmd) Pid() int {
	if c.via != nil {
		return c.via.Pid()
	}
	return c.sup.Process.Pid
}

func (c *Cmd) send(b ...byte) error {
	if c.via != nil {
		return c.sendServed(b)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return os.ErrProcessDone
	}
	_, err := c.ctl.Write(b)
	return err
}

// Signal sends sig to CMD's process group, as a terminal or a job
// control would.
func (c *Cmd) Signal(sig syscall.Signal) error {
	if sig <= 0 || sig > 64 {
		return fmt.Errorf("proctree: signal %d out of range", sig)
	}
	return c.send(opSignal, byte(sig))
}

// Terminate sends SIGTERM (and SIGCONT, so that a stopped process gets
// it) to every process of the tree, CMD included, whatever its process
// group or session.
func (c *Cmd) Terminate() error { return c.send(opTerminate) }

// Kill sends SIGKILL to every process of the tree until none is left.
func (c *Cmd) Kill() error { return c.send(opKill) }

// Wait waits for the supervisor, which exits once CMD exited and nothing
// of the tree is left; the error is that of exec.Cmd.Wait for CMD's wait
// status (an *exec.ExitError when CMD failed).
func (c *Cmd) Wait() error {
	if c.via != nil {
		return c.waitServed()
	}
	werr := c.sup.Wait()
	c.mu.Lock()
	c.stopped = true
	c.ctl.Close()
	c.mu.Unlock()
	var msg [8]byte
	_, err := io.ReadFull(c.status, msg[:])
	c.status.Close()
	if err == nil {
		c.group.remove() // the supervisor ended and its tree is gone: its cgroups are empty
	}
	if err == nil && binary.LittleEndian.Uint32(msg[:4]) == msgExited {
		c.ws, c.haveWS = syscall.WaitStatus(binary.LittleEndian.Uint32(msg[4:])), true
	} else if ws, ok := c.sup.ProcessState.Sys().(syscall.WaitStatus); ok {
		// The supervisor itself was killed: its own status is all there
		// is, and CMD's end is unknown.
		c.ws, c.haveWS, c.supGone = ws, true, true
	}
	if c.supGone {
		return fmt.Errorf("%w (%v)", ErrSupervisorGone, c.sup.ProcessState)
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return werr // an I/O copying error or WaitDelay
	}
	if c.ws.Exited() && c.ws.ExitStatus() == 0 {
		return nil
	}
	return &exec.ExitError{ProcessState: c.sup.ProcessState}
}

// Bury, once Wait returned ErrSupervisorGone (the supervisor was
// killed), sends SIGKILL to every process left of CMD's tree (orphans
// reparented to the holder, a child subreaper) and returns when none is
// left: see Supervisor.Bury.
func (c *Cmd) Bury() error {
	if c.via != nil {
		return c.via.Bury()
	}
	c.group.kill() // what left CMD's process group and the holder's tree too
	err := bury(map[int]bool{c.sup.Process.Pid: true, c.sentinel: true})
	c.group.remove()
	return err
}

// WaitStatus is CMD's wait status, once Wait returned.
func (c *Cmd) WaitStatus() syscall.WaitStatus { return c.ws }
