//go:build linux

// Package uml runs a User-Mode Linux kernel (Debian's linux.uml) as
// processes of this machine: a real Linux kernel whose root is the host's
// root, read-only (hostfs), with files of this machine as its disks
// (ubdN=IMAGE). Boot starts one; Run runs a shell script in it and returns
// its output and exit status; Kill cuts it as a power cut does (SIGKILL to
// every process of its session at once: its I/O helpers are processes of
// their own, and killing only the main one would let them finish writes
// after the "cut"); Close never leaves a process behind.
//
// The guest's init is guest/init of this package, read by the guest from
// the checkout through hostfs (not from /tmp: every guest mounts a /tmp of
// its own). Commands reach it through a spool directory under Dir, which
// the guest mounts read-write. A kernel has no network device unless
// Config.Switch names a uml_switch (StartSwitch): then its eth0 is on that
// switch, reached through a Unix socket, and on nothing else.
//
// Every kernel runs with the preload internal/uml/xstate/xstate.c (built
// with cc once per test process): Debian's linux.uml 6.1 sets its guests'
// floating-point state from a buffer smaller than the XSAVE area of a host
// with AMX (Intel Xeon since Sapphire Rapids), which the host refuses, and
// without the preload no guest process starts there.
package uml

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Binary is the UML kernel Debian's user-mode-linux package installs.
const Binary = "/usr/bin/linux.uml"

// Dir holds every kernel's working directory (its spool, console log and
// UML's own umid directory) and the lease binaries Build makes: under
// /var/tmp, which the guests see through their hostfs root (their /tmp is
// their own).
const Dir = "/var/tmp/lease-uml"

// Available says why no kernel can be booted here, or nil.
func Available() error {
	if _, err := os.Stat(Binary); err != nil {
		return fmt.Errorf("%s is missing: apt-get install user-mode-linux", Binary)
	}
	if _, err := os.Stat("/usr/lib/uml/modules"); err != nil {
		return fmt.Errorf("the UML kernel's modules (/usr/lib/uml/modules) are missing: apt-get install user-mode-linux")
	}
	return nil
}

// Config says what kernel to boot.
type Config struct {
	// Name names the kernel (its umid and working directory); letters,
	// digits, '-' and '_'.
	Name string
	// Mem is the guest's memory, as the kernel's mem= takes it (default
	// 256M).
	Mem string
	// Disks are image files, the guest's /dev/ubda, /dev/ubdb, ...
	Disks []string
	// Modules are loaded (modprobe) before the guest takes commands, e.g.
	// "ext4", "xfs", "btrfs".
	Modules []string
	// Args are more kernel command line arguments.
	Args []string
	// BootTimeout bounds the wait for the guest to take commands (default
	// 2 minutes: a loaded machine boots slowly).
	BootTimeout time.Duration
	// Switch, when set, is the Unix socket of a uml_switch (StartSwitch):
	// the guest gets an eth0 on it, a network that exists only on that
	// switch (nothing reaches this machine's network). The guest configures
	// its address itself (Setup).
	Switch string
	// Setup, when set, is a host path of a shell script the guest's init
	// sources (with its path in UML_SETUP) after the modules and
	// before it takes commands: the guest's role, e.g. an NFS server or
	// client (scripts/nfs-guest). A setup that returns non-zero powers the
	// guest off, so Boot fails with its console. What it exports is in
	// every command's environment.
	Setup string
}

// Kernel is a running UML kernel.
type Kernel struct {
	Name    string
	dir     string // working directory under Dir
	spool   string
	console string
	session
	seq atomic.Int64
}

// session is a process started in a session of its own (setsid) and
// everything it started there.
type session struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	gone   atomic.Bool // kill saw every process of the session end
}

var nameOK = func(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// guestInit is the path of guest/init in the checkout this package was
// built from.
func guestInit() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("uml: cannot locate the package's source (guest/init)")
	}
	p := filepath.Join(filepath.Dir(file), "guest", "init")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("uml: the guest init: %w", err)
	}
	return p, nil
}

// Boot starts a kernel and waits until its guest takes commands. On error
// nothing of it is left running.
func Boot(ctx context.Context, cfg Config) (*Kernel, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if !nameOK(cfg.Name) {
		return nil, fmt.Errorf("uml: kernel name %q: letters, digits, - and _ only (at most 40)", cfg.Name)
	}
	init, err := guestInit()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return nil, err
	}
	removeDeadDirs()
	dir, err := os.MkdirTemp(Dir, fmt.Sprintf("k-%s-%d-", cfg.Name, os.Getpid()))
	if err != nil {
		return nil, err
	}
	k := &Kernel{Name: cfg.Name, dir: dir, spool: filepath.Join(dir, "spool"), console: filepath.Join(dir, "console.log")}
	k.session = session{name: "kernel " + cfg.Name, exited: make(chan struct{})}
	if err := os.Mkdir(k.spool, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	mem := cfg.Mem
	if mem == "" {
		mem = "256M"
	}
	umid := strings.TrimPrefix(filepath.Base(dir), "k-")
	args := []string{"umid=" + umid, "uml_dir=" + dir, "mem=" + mem,
		"root=/dev/root", "rootfstype=hostfs", "rootflags=/", "ro",
		"con=null", "con0=fd:0,fd:1", "ssl=null",
		"init=" + init, "uml.spool=" + k.spool}
	if cfg.Switch != "" {
		args = append(args, "eth0=daemon,,unix,"+cfg.Switch)
	}
	if cfg.Setup != "" {
		args = append(args, "uml.setup="+cfg.Setup)
	}
	if len(cfg.Modules) > 0 {
		args = append(args, "uml.modules="+strings.Join(cfg.Modules, ","))
	}
	for i, d := range cfg.Disks {
		args = append(args, fmt.Sprintf("ubd%d=%s", i, d))
	}
	// Two of the kernel's initcalls took most of its boot (initcall_debug,
	// a loaded machine: 18.7 of 23 s): pty_init registering 256 legacy
	// BSD ptys, nothing here uses, and zswap's pool.
	args = append(args, "pty.legacy_count=0", "zswap.enabled=0")
	args = append(args, cfg.Args...)
	preload, err := xstatePreload()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	log, err := os.Create(k.console)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer log.Close()
	k.cmd = exec.Command(Binary, args...)
	k.cmd.Stdin = nil
	k.cmd.Stdout = log
	k.cmd.Stderr = log
	k.cmd.Dir = dir
	// UML backs the guest's memory with a file it makes (and unlinks) in
	// TMPDIR: on tmpfs, so that the guest's memory is not written back to
	// this machine's disk.
	// LD_PRELOAD: the floating-point state of its guests' processes on a
	// host with a larger XSAVE area than it was built for (xstatePreload).
	k.cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR=" + memDir(dir), "LD_PRELOAD=" + preload}
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("uml: start %s: %w", Binary, err)
	}
	go func() { k.cmd.Wait(); close(k.exited) }()
	timeout := cfg.BootTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if _, err := os.Stat(filepath.Join(k.spool, "ready")); err == nil {
			return k, nil
		}
		select {
		case <-ctx.Done():
			k.Close()
			return nil, ctx.Err()
		case <-deadline.C:
			tail := k.consoleTail()
			k.Close()
			return nil, fmt.Errorf("uml: kernel %s did not take commands within %v; console: %s", cfg.Name, timeout, tail)
		case <-k.exited:
			tail := k.consoleTail()
			k.Close()
			return nil, fmt.Errorf("uml: kernel %s ended while booting; console: %s", cfg.Name, tail)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// memDir is /dev/shm when it is a tmpfs, else dir.
func memDir(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Type == 0x01021994 { // TMPFS_MAGIC
		return "/dev/shm"
	}
	return dir
}

func (k *Kernel) consoleTail() string {
	b, _ := os.ReadFile(k.console)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Console is what the kernel wrote on its console so far: the kernel's
// messages and whatever the guest wrote to /dev/console. A write to the
// console reaches this machine's file when it returns in the guest, so a
// cut cannot take it back.
func (k *Kernel) Console() ([]byte, error) { return os.ReadFile(k.console) }

// Dir is the kernel's working directory on this machine (the guest sees it
// at the same path, read-only, through its hostfs root).
func (k *Kernel) Dir() string { return k.dir }

// submit drops script into the spool as NAME.ext, atomically.
func (k *Kernel) submit(script, ext string) (string, error) {
	n := fmt.Sprintf("c%06d", k.seq.Add(1))
	tmp := filepath.Join(k.spool, n+".tmp")
	if err := os.WriteFile(tmp, []byte(script), 0o644); err != nil {
		return "", err
	}
	return n, os.Rename(tmp, filepath.Join(k.spool, n+"."+ext))
}

// ErrDown is returned by Run when the kernel is no longer running.
var ErrDown = errors.New("uml: the kernel is not running")

// Run runs script with sh in the guest and returns its output (stdout and
// stderr together) and exit status once it ended; err is for the kernel
// or ctx, not for the script.
func (k *Kernel) Run(ctx context.Context, script string) (out string, code int, err error) {
	n, err := k.submit(script, "cmd")
	if err != nil {
		return "", -1, err
	}
	rc := filepath.Join(k.spool, n+".rc")
	for {
		if b, err := os.ReadFile(rc); err == nil {
			code, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				return "", -1, fmt.Errorf("uml: exit status %q: %v", b, err)
			}
			o, _ := os.ReadFile(filepath.Join(k.spool, n+".out"))
			return string(o), code, nil
		}
		select {
		case <-ctx.Done():
			return "", -1, ctx.Err()
		case <-k.exited:
			return "", -1, ErrDown
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Start starts script with sh in the background in the guest and returns
// without waiting for it (its output goes nowhere the host waits for;
// write to /dev/console to be seen).
func (k *Kernel) Start(script string) error {
	select {
	case <-k.exited:
		return ErrDown
	default:
	}
	_, err := k.submit(script, "bg")
	return err
}

// Kill cuts the kernel: SIGKILL to every process of its session at once,
// again until none is left, then waits for the main process. The session
// is the kernel's own (Boot starts it with setsid), so nothing else is
// touched.
func (k *Kernel) Kill() error { return k.kill() }

// kill sends SIGKILL to every process of the session, again until none is
// left, then waits for the main process.
func (k *session) kill() error {
	if k.gone.Load() {
		// Not again: the session's number may be another's by now.
		return nil
	}
	sid := k.cmd.Process.Pid
	deadline := time.Now().Add(time.Minute)
	for {
		pids := sessionProcs(sid)
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("uml: processes %v of %s outlived SIGKILL for a minute", pids, k.name)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-k.exited:
		k.gone.Store(true)
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("uml: the main process of %s was not reaped", k.name)
	}
}

// CPUTime is the processor time (user and system) the kernel's processes
// still running have used so far: a measure of its work that the machine's
// load does not stretch as it stretches the wall clock. Call it before
// Kill.
func (k *Kernel) CPUTime() time.Duration {
	if k.gone.Load() {
		return 0
	}
	var ticks int64
	for _, pid := range sessionProcs(k.cmd.Process.Pid) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 {
			// After comm: state ppid pgrp session tty_nr tpgid flags
			// minflt cminflt majflt cmajflt utime stime.
			if f := strings.Fields(string(b[i+1:])); len(f) > 12 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				s, _ := strconv.ParseInt(f[12], 10, 64)
				ticks += u + s
			}
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// sessionProcs lists the processes (and threads' processes) of session
// sid, zombies left out.
func sessionProcs(sid int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...: comm may hold spaces.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 4 || f[0] == "Z" {
			continue
		}
		if s, _ := strconv.Atoi(f[3]); s == sid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Close kills the kernel (if it still runs) and removes its working
// directory.
func (k *Kernel) Close() error {
	err := k.Kill()
	if rerr := os.RemoveAll(k.dir); err == nil {
		err = rerr
	}
	return err
}
