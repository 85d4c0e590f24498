//go:build !linux

package proctree

import (
	"errors"
	"os"
	"os/exec"
	"time"
)

// Supervisor runs one command after another, each supervised, on Linux;
// elsewhere StartSupervisor fails and a Cmd runs under a supervisor of
// its own.
type Supervisor struct{ sup *exec.Cmd }

type served struct{}

var errNoSupervisor = errors.New("proctree: a supervisor of several commands needs Linux (a child subreaper)")

// CheckProc has nothing to check here: commands are supervised without
// /proc.
func CheckProc() error { return nil }

// StartSupervisor fails on this system (see Supervisor).
func StartSupervisor(grace time.Duration) (*Supervisor, error) { return nil, errNoSupervisor }

// Gone reports true: no Supervisor runs here.
func (s *Supervisor) Gone() bool { return true }

// Pid is 0: no Supervisor runs here.
func (s *Supervisor) Pid() int { return 0 }

// Close does nothing here.
func (s *Supervisor) Close() error { return nil }

// Command returns a Cmd whose Start fails here.
func (s *Supervisor) Command(path string, argv ...string) *Cmd {
	return &Cmd{Path: path, Args: argv, via: s}
}

func (c *Cmd) startServed() error        { return errNoSupervisor }
func (c *Cmd) sendServed(b []byte) error { return errNoSupervisor }
func (c *Cmd) waitServed() error         { return errNoSupervisor }

// Bury does nothing here.
func (s *Supervisor) Bury() error { return nil }

// Subreaper does nothing here: only Linux has child subreapers.
func Subreaper() error { return nil }

// AdoptOrphans does nothing here (see Subreaper).
func AdoptOrphans() {}

type sentinel struct {
	cmd    *exec.Cmd
	writer *os.File
}

// startSentinel starts none here.
func startSentinel(g *group) (*sentinel, error) { return nil, nil }

// group: cgroups are Linux's.
type group struct{}

func newGroup() *group         { return nil }
func (g *group) env() []string { return nil }
func (g *group) kill()         {}
func (g *group) remove()       {}

func (s *sentinel) env(fd int) string { return "" }

func bury(keep map[int]bool) error { return nil }

// Cgroups reports false: cgroups are Linux's.
func Cgroups() bool { return false }

// ownCgroup is "": cgroups are Linux's.
func ownCgroup() string { return "" }

type inlineState struct{}
