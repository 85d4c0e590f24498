//go:build linux

package proctree

// Supervisor: one supervisor process for many commands, one after another
// (lease work runs one per worker), so that a command costs its own fork
// and exec and not a supervisor's too. Each command is supervised exactly
// as under a supervisor of its own: its tree stopped when it exits, on
// Terminate and Kill, and when the holder dies (the end of the control
// socket).

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Supervisor is a supervisor process that runs commands one after
// another. Its methods may be called from several goroutines, but it runs
// one command at a time.
type Supervisor struct {
	sup    *exec.Cmd
	fd     int // the holder's end of the control socket
	grace  time.Duration
	exited chan struct{} // closed when the supervisor process has exited
	// sentinel is the pid of the sentinel that leads CMD's process group.
	sentinel int
	// group is the cgroup of its commands (nil: none; cgroup_linux.go).
	group *group

	mu     sync.Mutex // sends
	busy   bool
	closed bool

	// in is set when there is no supervisor process: the holder
	// supervises its commands itself (inline_linux.go).
	in *inline
}

// StartSupervisor starts a Supervisor whose commands get grace between
// SIGTERM and SIGKILL when it stops their trees on its own (0:
// DefaultGrace). Its messages go to the holder's stderr.
func StartSupervisor(grace time.Duration) (*Supervisor, error) {
	if grace <= 0 {
		grace = DefaultGrace
	}
	Subreaper() // a dead supervisor's orphans come here (Bury); without it, the sentinel still kills CMD's group
	if err := CheckMode(); err != nil {
		return nil, err
	}
	if os.Getenv(ModeEnv) != "process" {
		if s := startInline(grace); s != nil {
			return s, nil
		}
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("proctree: control socket: %w", err)
	}
	child := os.NewFile(uintptr(fds[1]), "supervisor-control")

	g := newGroup()
	sent, err := startSentinel(g)
	if err != nil {
		child.Close()
		unix.Close(fds[0])
		g.remove()
		return nil, err
	}
	sup := exec.Command("/proc/self/exe")
	sup.Path = "/proc/self/exe"
	sup.Args[0] = "lease-supervisor"
	sup.Env = append(append(os.Environ(), markerEnv+"="+servePrefix+strconv.FormatInt(int64(grace), 10), sent.env(4)), g.env()...)
	sup.Stderr = os.Stderr
	sup.ExtraFiles = []*os.File{child, sent.writer} // descriptors 3 and 4
	sup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = sup.Start()
	child.Close()
	sent.writer.Close() // the supervisor's alone now: its end is the sentinel's signal
	if err != nil {
		unix.Close(fds[0])
		g.remove()
		return nil, fmt.Errorf("proctree: start the supervisor: %w", err)
	}
	s := &Supervisor{sup: sup, fd: fds[0], grace: grace, exited: make(chan struct{}), sentinel: sent.cmd.Process.Pid, group: g}
	go func() {
		sup.Wait()
		close(s.exited)
	}()
	return s, nil
}

// Bury, once the supervisor died (killed), sends SIGKILL to every
// process left of its tree (orphans reparented to the holder, a child
// subreaper: see Subreaper) and returns when none is left. The holder's
// only other children must be its supervisor and sentinel.
func (s *Supervisor) Bury() error {
	if s.in != nil {
		return nil // there is no supervisor to die
	}
	<-s.exited
	s.group.kill() // what left CMD's process group and the holder's tree too
	err := bury(map[int]bool{s.sup.Process.Pid: true, s.sentinel: true})
	s.group.remove()
	return err
}

// Gone reports whether the supervisor process has exited; for a
// Supervisor without one, whether it can no longer keep its guarantees
// (its sentinel is gone, or a CMD could not run in a cgroup): start
// another.
func (s *Supervisor) Gone() bool {
	if s.in != nil && s.in.degraded() {
		return true
	}
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// Pid is the supervisor's process ID.
func (s *Supervisor) Pid() int {
	if s.in != nil {
		return s.in.self
	}
	return s.sup.Process.Pid
}

// Close ends the supervisor: with no command running it exits at once;
// with one, that command's tree is stopped first (SIGTERM, SIGKILL after
// the grace). Close waits for it to exit.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.exited
		return nil
	}
	s.closed = true
	if s.in != nil {
		s.mu.Unlock()
		s.closeInline()
		return nil
	}
	unix.Close(s.fd)
	s.mu.Unlock()
	<-s.exited
	s.group.remove()
	return nil
}

// Command returns the Cmd that runs path with argv under s.
func (s *Supervisor) Command(path string, argv ...string) *Cmd {
	c := Command(path, argv...)
	c.via = s
	return c
}

// served is the state of a command run by a Supervisor.
type served struct {
	closeAfter []*os.File // the child's ends of our pipes, closed once sent
	copies     sync.WaitGroup
	stdinW     *os.File // the write end of a stdin pipe, closed when done
}

// startServed starts c under its Supervisor.
func (c *Cmd) startServed() error {
	s := c.via
	s.mu.Lock()
	switch {
	case s.closed || s.Gone():
		s.mu.Unlock()
		return ErrSupervisorGone
	case s.busy:
		s.mu.Unlock()
		return errors.New("proctree: the supervisor runs a command already")
	}
	s.busy = true
	s.mu.Unlock()
	sv := &served{}
	c.served = sv
	files, err := c.plumb(sv)
	if err != nil {
		c.release()
		return err
	}
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	grace := c.Grace
	if grace <= 0 {
		grace = s.grace
	}
	if s.in != nil {
		err := c.startInline(files, env)
		sv.closeChildEnds()
		if err != nil {
			c.closePlumbing()
			c.release()
		}
		return err
	}
	data, err := json.Marshal(runReq{Path: c.Path, Args: c.Args, Env: env, Grace: int64(grace)})
	if err == nil && len(data)+1 > maxRunMsg {
		err = fmt.Errorf("proctree: the command's arguments and environment are %d bytes, more than %d", len(data), maxRunMsg)
	}
	if err != nil {
		c.closePlumbing()
		c.release()
		return err
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	s.mu.Lock()
	err = unix.Sendmsg(s.fd, append([]byte{opRun}, data...), unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL)
	s.mu.Unlock()
	sv.closeChildEnds()
	if err != nil {
		c.closePlumbing()
		c.release()
		return fmt.Errorf("%w: %v", ErrSupervisorGone, err)
	}
	kind, val, err := readServed(s.fd)
	switch {
	case err != nil:
		c.closePlumbing()
		c.release()
		return err
	case kind == msgExecFailed:
		c.closePlumbing()
		c.release()
		return &os.PathError{Op: "fork/exec", Path: c.Path, Err: syscall.Errno(val)}
	}
	return nil
}

// readServed reads one status message of a Supervisor; the end of the
// socket is ErrSupervisorGone.
func readServed(fd int) (kind, val uint32, err error) {
	var b [8]byte
	for {
		n, err := unix.Read(fd, b[:])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || n != len(b) {
			return 0, 0, ErrSupervisorGone
		}
		return binary.LittleEndian.Uint32(b[:4]), binary.LittleEndian.Uint32(b[4:]), nil
	}
}

// plumb makes CMD's standard descriptors: an *os.File is passed as it is,
// nil is /dev/null, any other reader or writer gets a pipe and a copier
// (as exec.Cmd does).
func (c *Cmd) plumb(sv *served) ([]*os.File, error) {
	files := make([]*os.File, 3)
	var err error
	open := func(flag int) (*os.File, error) {
		f, err := os.OpenFile(os.DevNull, flag, 0)
		if err == nil {
			sv.closeAfter = append(sv.closeAfter, f)
		}
		return f, err
	}
	switch in := c.Stdin.(type) {
	case nil:
		files[0], err = open(os.O_RDONLY)
	case *os.File:
		files[0] = in
	default:
		r, w, perr := os.Pipe()
		if perr != nil {
			return nil, perr
		}
		files[0], sv.stdinW = r, w
		sv.closeAfter = append(sv.closeAfter, r)
		go func() {
			io.Copy(w, in)
			w.Close()
		}()
	}
	if err != nil {
		return nil, err
	}
	for i, wr := range []io.Writer{c.Stdout, c.Stderr} {
		switch out := wr.(type) {
		case nil:
			files[i+1], err = open(os.O_WRONLY)
		case *os.File:
			files[i+1] = out
		default:
			r, w, perr := os.Pipe()
			if perr != nil {
				return nil, perr
			}
			files[i+1] = w
			sv.closeAfter = append(sv.closeAfter, w)
			sv.copies.Add(1)
			go func() {
				defer sv.copies.Done()
				copyPipe(out, r)
				r.Close()
			}()
		}
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// copyBufs keeps the copiers' buffers between commands. A worker runs a
// command an item, and io.Copy from a pipe (os.File's WriteTo) made a new
// 32 KiB buffer for each, about 1% of lease work's CPU with its zeroing
// and the collections it brought on (perf, docs/performance.md#worker-floor).
var copyBufs = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// copyPipe copies CMD's output pipe r to out with a pooled buffer until
// EOF or an error, as io.Copy does.
func copyPipe(out io.Writer, r *os.File) {
	b := copyBufs.Get().(*[32 << 10]byte)
	defer copyBufs.Put(b)
	// Only r's Read: os.File's WriteTo would make its own buffer.
	io.CopyBuffer(out, struct{ io.Reader }{r}, b[:])
}

// closeChildEnds closes the child's ends of our pipes (and /dev/null),
// once CMD has its copies or will not start.
func (sv *served) closeChildEnds() {
	for _, f := range sv.closeAfter {
		f.Close()
	}
	sv.closeAfter = nil
}

// closePlumbing closes what plumb made for a command that did not start.
func (c *Cmd) closePlumbing() {
	c.served.closeChildEnds()
	c.served.copies.Wait()
}

// release lets the Supervisor run its next command.
func (c *Cmd) release() {
	c.via.mu.Lock()
	c.via.busy = false
	c.via.mu.Unlock()
}

func (c *Cmd) sendServed(b []byte) error {
	s := c.via
	if s.in != nil {
		return c.opInline(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.stopped || s.closed {
		return os.ErrProcessDone
	}
	return unix.Sendmsg(s.fd, b, nil, nil, unix.MSG_NOSIGNAL)
}

// waitServed waits for CMD's end under its Supervisor (its tree gone, its
// output copied); a Supervisor that died meanwhile counts as CMD killed
// by SIGKILL.
func (c *Cmd) waitServed() error {
	if c.via.in != nil {
		return c.waitInline()
	}
	kind, val, err := readServed(c.via.fd)
	c.via.mu.Lock()
	c.stopped = true
	c.via.mu.Unlock()
	if err == nil && kind == msgExited {
		c.ws = syscall.WaitStatus(val)
	} else {
		c.ws = syscall.WaitStatus(syscall.SIGKILL)
	}
	c.haveWS = true
	done := make(chan struct{})
	go func() { c.served.copies.Wait(); close(done) }()
	delay := c.WaitDelay
	if err != nil && (delay <= 0 || delay > time.Second) {
		// The supervisor died (killed): CMD's own children are no longer
		// below a subreaper and may hold its output open; what they write
		// is not waited for.
		delay = time.Second
	}
	if delay > 0 {
		select {
		case <-done:
		case <-time.After(delay):
		}
	} else {
		<-done
	}
	if c.served.stdinW != nil {
		c.served.stdinW.Close()
	}
	c.release()
	if err != nil {
		return err
	}
	if c.ws.Exited() && c.ws.ExitStatus() == 0 {
		return nil
	}
	return &StatusError{Status: c.ws}
}
