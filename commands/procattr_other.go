//go:build !linux

package commands

import "syscall"

// childProcAttr is how lease run starts CMD: in its own process group (see
// the Linux one). This system has no parent-death signal; it cannot open a
// table anyway (seam.ErrUnsupported).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
