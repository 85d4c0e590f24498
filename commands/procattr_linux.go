package commands

import "syscall"

// childProcAttr is how lease run starts CMD: in its own process group, so
// that signals reach CMD's children too and a terminal's ^C reaches CMD
// once (through lease run), not twice; and with a parent-death signal, so
// that CMD is told when lease run itself is killed, as its lease will
// lapse.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
