//go:build linux

package proctree

// The supervisor of a Supervisor: one process that runs one command after
// another for its holder (lease work), each exactly as a supervisor of one
// command runs it (follow). Its control channel is a SOCK_SEQPACKET socket
// (descriptor 3): the holder sends opRun messages (the command as JSON,
// its standard descriptors as SCM_RIGHTS) and the ops of Cmd; the
// supervisor answers with the status messages of one command, per
// command. End of file with a command running stops its tree, as the
// death of a holder of one command does; idle, it ends the supervisor.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// serveFD is the control socket of a Supervisor's supervisor.
const serveFD = 3

// maxRunMsg bounds one opRun message (the command's arguments and
// environment).
const maxRunMsg = 1 << 20

// runReq is one command for a Supervisor to run.
type runReq struct {
	Path  string   `json:"path"`
	Args  []string `json:"args"`
	Env   []string `json:"env"`
	Grace int64    `json:"grace_ns"`
	files []*os.File
}

func (r *runReq) close() {
	for _, f := range r.files {
		f.Close()
	}
}

// serve runs commands until the holder closes its end.
func (s *supervisor) serve(sigc <-chan os.Signal) int {
	unix.CloseOnExec(serveFD)
	ops := make(chan ctlMsg, 16)
	go readSocket(serveFD, ops)
	for {
		var m ctlMsg
		var ok bool
		select {
		case m, ok = <-ops:
		case sig := <-sigc:
			if sig == syscall.SIGCHLD {
				s.reap()
			}
			continue // nothing runs: nothing to forward to
		}
		if !ok {
			return 0
		}
		if m.run == nil {
			continue // an op for a command that has ended
		}
		r := m.run
		if r.Grace > 0 {
			s.grace = time.Duration(r.Grace)
		}
		err := s.start(r.Path, r.Args, r.Env, r.files)
		r.close() // CMD has its copies: a pipe's end of file comes when CMD's tree is gone
		if err != nil {
			errno := syscall.ENOEXEC
			errors.As(err, &errno)
			sendMsg(serveFD, msgExecFailed, uint32(errno))
			continue
		}
		sendMsg(serveFD, msgStarted, 0)
		s.follow(ops, sigc)
		if !s.cmdDone {
			return 125 // the tree would not die: the holder sees the end of the socket
		}
		s.group.done(s.cg) // empty: the next CMD's
		s.cg = nil
		sendMsg(serveFD, msgExited, uint32(s.cmdWS))
		if s.holderGone {
			return 0
		}
	}
}

// readSocket turns the messages of the control socket into ctlMsgs; the
// channel closes at end of file (or on an error of the socket).
func readSocket(fd int, ops chan<- ctlMsg) {
	defer close(ops)
	buf := make([]byte, maxRunMsg)
	oob := make([]byte, unix.CmsgSpace(3*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		var files []*os.File
		if oobn > 0 {
			if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for _, cm := range cms {
					if fds, err := unix.ParseUnixRights(&cm); err == nil {
						for _, f := range fds {
							unix.CloseOnExec(f)
							files = append(files, os.NewFile(uintptr(f), "cmd"))
						}
					}
				}
			}
		}
		switch op := buf[0]; {
		case op == opRun:
			r := &runReq{files: files}
			if err := json.Unmarshal(buf[1:n], r); err != nil || len(files) != 3 || r.Path == "" {
				fmt.Fprintf(os.Stderr, "lease-supervisor: a bad command to run (%d descriptors): %v\n", len(files), err)
				r.close()
				// Say so as a failed exec: the holder is waiting for an answer.
				sendMsg(fd, msgExecFailed, uint32(syscall.EINVAL))
				continue
			}
			ops <- ctlMsg{run: r}
		case op == opSignal && n >= 2:
			if sig := buf[1]; sig > 0 && sig <= 64 {
				ops <- ctlMsg{op: opSignal, sig: syscall.Signal(sig)}
			}
		default:
			for _, f := range files {
				f.Close()
			}
			ops <- ctlMsg{op: op}
		}
	}
}

func sendMsg(fd int, kind, val uint32) {
	var b [8]byte
	binary.LittleEndian.PutUint32(b[:4], kind)
	binary.LittleEndian.PutUint32(b[4:], val)
	for {
		if err := unix.Sendmsg(fd, b[:], nil, nil, unix.MSG_NOSIGNAL); !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}
