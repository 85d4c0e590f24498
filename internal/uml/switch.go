//go:build linux

package uml

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// SwitchBinary is the virtual switch of Debian's uml-utilities.
const SwitchBinary = "/usr/bin/uml_switch"

// Switch is a running uml_switch: a network of the kernels booted with its
// Socket as Config.Switch and of nothing else (it is reached only through
// a Unix socket; nothing is bridged to this machine's network).
type Switch struct {
	// Socket is the switch's control socket, for Config.Switch.
	Socket string
	dir    string
	session
}

// StartSwitch starts a uml_switch in a session of its own, its socket in a
// working directory under Dir, and waits until the socket is there. Close
// ends it.
func StartSwitch(ctx context.Context, name string) (*Switch, error) {
	if _, err := os.Stat(SwitchBinary); err != nil {
		return nil, fmt.Errorf("%s is missing: apt-get install uml-utilities", SwitchBinary)
	}
	if !nameOK(name) {
		return nil, fmt.Errorf("uml: switch name %q: letters, digits, - and _ only (at most 40)", name)
	}
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return nil, err
	}
	removeDeadDirs()
	dir, err := os.MkdirTemp(Dir, fmt.Sprintf("k-%s-%d-", name, os.Getpid()))
	if err != nil {
		return nil, err
	}
	s := &Switch{Socket: filepath.Join(dir, "switch.ctl"), dir: dir}
	s.session = session{name: "switch " + name, exited: make(chan struct{})}
	log, err := os.Create(filepath.Join(dir, "switch.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer log.Close()
	s.cmd = exec.Command(SwitchBinary, "-unix", s.Socket)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.Dir = dir
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("uml: start %s: %w", SwitchBinary, err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(time.Minute)
	for {
		if fi, err := os.Stat(s.Socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return s, nil
		}
		var why error
		select {
		case <-ctx.Done():
			why = ctx.Err()
		case <-s.exited:
			b, _ := os.ReadFile(filepath.Join(dir, "switch.log"))
			why = fmt.Errorf("uml: %s ended: %s", SwitchBinary, b)
		case <-time.After(20 * time.Millisecond):
			if time.Now().After(deadline) {
				why = fmt.Errorf("uml: %s made no socket within a minute", SwitchBinary)
			}
		}
		if why != nil {
			s.Close()
			return nil, why
		}
	}
}

// Close ends every process of the switch's session and removes its working
// directory; again, it does nothing.
func (s *Switch) Close() error {
	err := s.kill()
	if rerr := os.RemoveAll(s.dir); err == nil {
		err = rerr
	}
	return err
}
