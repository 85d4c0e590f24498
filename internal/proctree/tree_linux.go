//go:build linux

package proctree

// The tree below a process, read from /proc, and signals that reach the
// process that was read, never one that recycled its ID.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/leasefmt"
)

// CheckProc reports an error when /proc is not a proc filesystem of the
// calling process's PID namespace: one mounted before a PID namespace was
// entered (unshare --pid --fork without --mount-proc, bwrap --unshare-pid
// with the host's /proc bound). Its process IDs are another namespace's,
// so the tree read there is not CMD's (the tree of the process that has
// this process's ID out there: every process of the machine below PID 1,
// every kernel thread below PID 2), and signals sent by those IDs here
// reach whatever process has them in this namespace, a bystander or
// another worker's CMD. Every command that supervises a CMD refuses to
// start there (lease work exit 2, lease run 125), before anything is
// claimed.
func CheckProc() error {
	self, err := os.Readlink("/proc/self")
	if err != nil {
		return fmt.Errorf("/proc/self: %w: lease needs a proc filesystem of its PID namespace at /proc to find CMD's processes", err)
	}
	if pid := os.Getpid(); self != strconv.Itoa(pid) {
		if _, err := strconv.Atoi(self); err != nil {
			self = leasefmt.Quote(self)
		}
		return fmt.Errorf("/proc is not this PID namespace's (its /proc/self is %s, this process is %d): CMD's processes "+
			"cannot be found there, and ending CMD's tree would signal processes that are not CMD's; mount a proc for "+
			"the namespace (unshare --pid --fork --mount-proc, bwrap --proc /proc)", self, pid)
	}
	return nil
}

// proc is one process of a tree.
type proc struct {
	pid, ppid int
	state     byte // R, S, D, Z, T, ... (proc(5))
}

// readStat reads pid's parent and state from /proc/PID/stat. It reads
// with bare system calls (open, read, close): a scan reads every
// process's file, and an *os.File costs several more calls each (the
// poller's registration, its flags), which on a busy host made the scans
// after each command of lease work most of its cost.
func readStat(pid int) (proc, bool) {
	var buf [512]byte
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return proc{}, false
	}
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	if err != nil || n <= 0 {
		return proc{}, false
	}
	data := buf[:n]
	// "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses,
	// so the fields are read after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return proc{}, false
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return proc{}, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, state: f[0][0]}, true
}

// descendants lists every process below root, read from /proc: children
// first found by their parent, then theirs.
func descendants(root int) []proc {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil
	}
	kids := map[int][]proc{}
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		if p, ok := readStat(pid); ok {
			kids[p.ppid] = append(kids[p.ppid], p)
		}
	}
	var out []proc
	queue := []int{root}
	seen := map[int]bool{root: true}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, k := range kids[pid] {
			if !seen[k.pid] {
				seen[k.pid] = true
				out = append(out, k)
				queue = append(queue, k.pid)
			}
		}
	}
	return out
}

// Descendants lists the process IDs below pid (for tests and reports).
func Descendants(pid int) []int {
	var out []int
	for _, p := range descendants(pid) {
		if p.state != 'Z' {
			out = append(out, p.pid)
		}
	}
	return out
}

// signalBelow sends sig to every live process below root but except (0:
// none), each through signalProc.
func signalBelow(root int, sig syscall.Signal, except int) {
	procs := descendants(root)
	tree := map[int]bool{root: true}
	for _, p := range procs {
		tree[p.pid] = true
	}
	for _, p := range procs {
		if p.state != 'Z' && p.pid != except {
			signalProc(p.pid, sig, tree)
		}
	}
}

// signalProc sends sig to pid if it is still a process of the tree: a
// pidfd is opened first, then its parent is read again and must be one
// of tree (an ID recycled since the tree was read has another parent),
// and the signal goes through the pidfd, which names that process only.
func signalProc(pid int, sig syscall.Signal, tree map[int]bool) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ENOSYS) {
		if p, ok := readStat(pid); ok && tree[p.ppid] {
			syscall.Kill(pid, sig)
		}
		return
	}
	if err != nil {
		return // gone
	}
	defer unix.Close(fd)
	if p, ok := readStat(pid); !ok || !tree[p.ppid] {
		return
	}
	unix.PidfdSendSignal(fd, sig, nil, 0)
}
