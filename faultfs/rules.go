package faultfs

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Op names one kind of filesystem call that faultfs counts and can delay or
// fail. The string values are the names used in rule specs and in the JSON
// counts file of lease-faultfs.
type Op string

// The operations faultfs intercepts. Each constant counts exactly one kind of
// FUSE request, so a single system call can count more than once (a write(2)
// larger than the mount's max_write is split into several WRITE requests).
const (
	// OpFsync is fsync(2)/fdatasync(2) on a regular file (FUSE FSYNC).
	OpFsync Op = "fsync"
	// OpFsyncDir is fsync(2) on a directory descriptor (FUSE FSYNCDIR).
	OpFsyncDir Op = "fsyncdir"
	// OpRename is rename(2)/renameat2(2) (FUSE RENAME, RENAME2).
	OpRename Op = "rename"
	// OpWrite is one FUSE WRITE request, and one copy_file_range(2) into a
	// file of the mount.
	OpWrite Op = "write"
	// OpOpen is opening an existing regular file (FUSE OPEN). Directory
	// opens (OPENDIR) are neither counted nor subject to rules.
	OpOpen Op = "open"
	// OpCreate is creating and opening a new file (FUSE CREATE, that is
	// open(2) with O_CREAT of a name that does not exist yet, and O_TMPFILE).
	OpCreate Op = "create"
)

// allOps is the fixed order of Ops(), and the index of an op's counters.
var allOps = [...]Op{OpFsync, OpFsyncDir, OpRename, OpWrite, OpOpen, OpCreate}

const numOps = len(allOps)

// Ops returns every Op faultfs knows, in a fixed order.
func Ops() []Op {
	out := make([]Op, numOps)
	copy(out, allOps[:])
	return out
}

func (o Op) index() int {
	for i, x := range allOps {
		if x == o {
			return i
		}
	}
	return -1
}

// Valid reports whether o is one of the operations faultfs intercepts.
func (o Op) Valid() bool { return o.index() >= 0 }

// ParseOp converts an operation name ("fsync", "fsyncdir", "rename",
// "write", "open", "create"; case-insensitive) to an Op.
func ParseOp(s string) (Op, error) {
	o := Op(strings.ToLower(strings.TrimSpace(s)))
	if !o.Valid() {
		return "", fmt.Errorf("faultfs: unknown op %q (want one of %s)", s, opList())
	}
	return o, nil
}

func opList() string {
	names := make([]string, numOps)
	for i, o := range allOps {
		names[i] = string(o)
	}
	return strings.Join(names, ", ")
}

// Rule is one fault. A call of operation Op whose path matches PathGlob is a
// matching call of the rule. Every rule numbers its own matching calls
// 0, 1, 2, ... from the moment it was installed (Mount or SetRules). The rule
// fires on matching call number i when i >= After and it has fired fewer than
// Times times (Times == 0: no limit). When it fires, the call is first delayed
// by Delay and then, if Errno is not 0, fails with Errno without reaching the
// backing directory (a failed rename renames nothing, a failed fsync syncs
// nothing, a failed write writes nothing).
//
// Several rules may match one call: each counts it, the delays of all rules
// that fire add up, and the first firing rule (in order) with a non-zero Errno
// decides the error.
type Rule struct {
	// Op is the operation the rule applies to. Required.
	Op Op
	// PathGlob, if not empty, restricts the rule to calls whose path
	// matches it with path.Match: paths are slash-separated and relative to
	// the mount root ("." is the root itself), "*" does not match "/". The
	// path of fsync, write and open is the file's, of create the new
	// file's, of fsyncdir the directory's; a rename matches when either
	// its source or its destination path matches. For O_TMPFILE files the
	// path is the directory's.
	PathGlob string
	// Delay is added before the call is carried out (or failed). Delays
	// are not interruptible by signals, like a slow disk; Unmount cuts
	// them short (the call then goes on). A delayed call does not hold up
	// other calls.
	Delay time.Duration
	// Errno, if not 0, is the error the call fails with when the rule
	// fires. ENOSYS is refused: the kernel would remember it and stop
	// sending the operation for the life of the mount.
	Errno syscall.Errno
	// After is how many matching calls pass untouched before the rule
	// first fires: After == 3 lets calls 0, 1, 2 through and fires on the
	// fourth matching call (number 3).
	After int
	// Times limits how often the rule fires; 0 means every matching call
	// from number After on.
	Times int
}

// Validate reports whether r can be installed.
func (r Rule) Validate() error {
	if !r.Op.Valid() {
		return fmt.Errorf("faultfs: rule %v: unknown op %q (want one of %s)", r, r.Op, opList())
	}
	if r.PathGlob != "" {
		if _, err := path.Match(r.PathGlob, ""); err != nil {
			return fmt.Errorf("faultfs: rule %v: bad glob %q: %v", r, r.PathGlob, err)
		}
	}
	if r.Delay < 0 {
		return fmt.Errorf("faultfs: rule %v: negative delay", r)
	}
	if r.Errno < 0 || r.Errno >= 512 {
		return fmt.Errorf("faultfs: rule %v: errno %d out of range 1..511", r, int(r.Errno))
	}
	if r.Errno == syscall.ENOSYS {
		return fmt.Errorf("faultfs: rule %v: ENOSYS is refused: the kernel would stop sending %s for the rest of the mount's life", r, r.Op)
	}
	if r.After < 0 || r.Times < 0 {
		return fmt.Errorf("faultfs: rule %v: after and times must be >= 0", r)
	}
	return nil
}

// matches reports whether any of paths matches the rule's glob.
func (r Rule) matches(paths []string) bool {
	if r.PathGlob == "" {
		return true
	}
	for _, p := range paths {
		if ok, _ := path.Match(r.PathGlob, p); ok {
			return true
		}
	}
	return false
}

// String formats r in the syntax ParseRule reads.
func (r Rule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "op=%s", string(r.Op))
	if r.PathGlob != "" {
		fmt.Fprintf(&b, ",glob=%s", r.PathGlob)
	}
	if r.Delay != 0 {
		fmt.Fprintf(&b, ",delay=%s", r.Delay)
	}
	if r.Errno != 0 {
		fmt.Fprintf(&b, ",errno=%s", ErrnoName(r.Errno))
	}
	if r.After != 0 {
		fmt.Fprintf(&b, ",after=%d", r.After)
	}
	if r.Times != 0 {
		fmt.Fprintf(&b, ",times=%d", r.Times)
	}
	return b.String()
}

// ParseRule reads a rule written as comma-separated key=value pairs, for
// example "op=fsyncdir,glob=work/*,errno=EIO,after=3,times=1" or
// "op=fsync,delay=2ms". Keys: op (required), glob (alias path), delay (a Go
// duration such as 500us or 2ms), errno (alias fail; a name such as EIO or a
// number), after, times. A glob cannot contain a comma.
func ParseRule(spec string) (Rule, error) {
	var r Rule
	seen := map[string]bool{}
	for _, kv := range strings.Split(spec, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Rule{}, fmt.Errorf("faultfs: rule %q: %q is not key=value", spec, kv)
		}
		k = strings.ToLower(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		switch k {
		case "path":
			k = "glob"
		case "fail":
			k = "errno"
		}
		if seen[k] {
			return Rule{}, fmt.Errorf("faultfs: rule %q: key %q given twice", spec, k)
		}
		seen[k] = true
		var err error
		switch k {
		case "op":
			r.Op, err = ParseOp(v)
		case "glob":
			r.PathGlob = v
		case "delay":
			r.Delay, err = time.ParseDuration(v)
		case "errno":
			r.Errno, err = ParseErrno(v)
		case "after":
			r.After, err = strconv.Atoi(v)
		case "times":
			r.Times, err = strconv.Atoi(v)
		default:
			err = fmt.Errorf("unknown key %q (want op, glob, delay, errno, after, times)", k)
		}
		if err != nil {
			return Rule{}, fmt.Errorf("faultfs: rule %q: %v", spec, err)
		}
	}
	if !seen["op"] {
		return Rule{}, fmt.Errorf("faultfs: rule %q: op is required", spec)
	}
	if err := r.Validate(); err != nil {
		return Rule{}, err
	}
	return r, nil
}

var errnoAliases = map[string]syscall.Errno{
	"EWOULDBLOCK": syscall.EAGAIN,
	"ENOTSUP":     syscall.EOPNOTSUPP,
	"EDEADLOCK":   syscall.EDEADLK,
}

// ParseErrno converts an errno name ("EIO", "einval", "ENOSPC", ...) or a
// decimal number to a syscall.Errno.
func ParseErrno(s string) (syscall.Errno, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 || n >= 512 {
			return 0, fmt.Errorf("errno %d out of range 1..511", n)
		}
		return syscall.Errno(n), nil
	}
	name := strings.ToUpper(s)
	if e, ok := errnoAliases[name]; ok {
		return e, nil
	}
	for n := 1; n < 512; n++ {
		if unix.ErrnoName(syscall.Errno(n)) == name {
			return syscall.Errno(n), nil
		}
	}
	return 0, fmt.Errorf("unknown errno %q", s)
}

// ErrnoName returns the symbolic name of e ("EIO"), or its number when it has
// none.
func ErrnoName(e syscall.Errno) string {
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return strconv.Itoa(int(e))
}

// LockMode says how byte-range (fcntl) and flock(2) locks taken on files of
// the mount behave.
type LockMode int

const (
	// LocksForward (the default) has the kernel forward lock requests to
	// faultfs, which takes them as OFD locks on descriptors of the backing
	// files, one descriptor per lock owner (per process for POSIX locks,
	// per open file description for OFD locks). Locks exclude between
	// processes using the mount, between different mounts of the same
	// backing directory, and against processes locking the backing files
	// directly. POSIX "closing any descriptor of the file drops the
	// process's locks on it" is honoured. F_SETLKW waits by polling and
	// is interrupted by signals like on a local filesystem. F_GETLK
	// reports the conflicting range and type but not the holder's pid.
	LocksForward LockMode = iota
	// LocksKernel keeps lock requests in the kernel: the VFS enforces
	// them on the FUSE inodes with exact Linux semantics, but only among
	// users of this one mount; they do not exclude processes working on
	// the backing directory directly or through another mount.
	LocksKernel
	// LocksBroken simulates a filesystem whose locks do not exclude:
	// every F_SETLK, F_SETLKW, F_OFD_SETLK(W) and flock(2) succeeds at
	// once, and F_GETLK always reports the range unlocked.
	LocksBroken
)

// String returns "forward", "kernel" or "broken".
func (m LockMode) String() string {
	switch m {
	case LocksForward:
		return "forward"
	case LocksKernel:
		return "kernel"
	case LocksBroken:
		return "broken"
	}
	return fmt.Sprintf("LockMode(%d)", int(m))
}

// ParseLockMode converts "forward", "kernel" or "broken" to a LockMode.
func ParseLockMode(s string) (LockMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "forward", "":
		return LocksForward, nil
	case "kernel", "local":
		return LocksKernel, nil
	case "broken":
		return LocksBroken, nil
	}
	return 0, errors.New("faultfs: unknown lock mode " + strconv.Quote(s) + " (want forward, kernel or broken)")
}
