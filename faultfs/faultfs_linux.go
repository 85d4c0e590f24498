//go:build linux

package faultfs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Options configure a mount.
type Options struct {
	// Rules are the faults installed at mount time; see Rule and
	// FS.SetRules.
	Rules []Rule
	// Locks selects how file locks behave on the mount (default
	// LocksForward, locks that exclude). LocksKernel cannot be changed
	// after mounting; LocksForward and LocksBroken can be switched with
	// FS.SetLockMode.
	Locks LockMode
	// Debug logs every FUSE request and reply (go-fuse's debug log) to
	// the standard logger.
	Debug bool
}

// FS is a mounted faultfs. Its methods are safe for concurrent use.
type FS struct {
	mountpoint string
	backing    string
	server     *fuse.Server

	kernelLocks bool
	lockMode    atomic.Int32

	rulesMu sync.Mutex
	rules   []*ruleState

	counts   [numOps]atomic.Int64
	injected [numOps]atomic.Int64

	locks lockTable

	closing   chan struct{}
	closeOnce sync.Once

	unmountMu sync.Mutex
	unmounted bool
	detached  bool
	served    chan struct{} // closed when the serve loop has exited
}

type ruleState struct {
	Rule
	seen  int
	fired int
}

// Available returns nil when this process can mount faultfs here, or an error
// saying why it cannot: not Linux, not root, no CAP_SYS_ADMIN, or /dev/fuse
// missing or not openable.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("faultfs: mounting needs root (euid is %d): mount(2) is called directly, fusermount is not used", os.Geteuid())
	}
	if ok, err := hasCapSysAdmin(); err == nil && !ok {
		return errors.New("faultfs: mounting needs CAP_SYS_ADMIN, which this process does not have (unprivileged container?)")
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("faultfs: /dev/fuse is not usable: %v", err)
	}
	f.Close()
	return nil
}

// hasCapSysAdmin reads the effective capability set of this process.
func hasCapSysAdmin() (bool, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return false, err
		}
		const capSysAdmin = 21
		return caps&(1<<capSysAdmin) != 0, nil
	}
	return false, errors.New("no CapEff in /proc/self/status")
}

// Mount mounts a faultfs mirroring the directory backing on the directory
// mountpoint and returns once the mount serves requests. Call Unmount when
// done.
func Mount(mountpoint, backing string, opts Options) (*FS, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	for _, r := range opts.Rules {
		if err := r.Validate(); err != nil {
			return nil, err
		}
	}
	switch opts.Locks {
	case LocksForward, LocksKernel, LocksBroken:
	default:
		return nil, fmt.Errorf("faultfs: unknown lock mode %v", opts.Locks)
	}
	var err error
	if mountpoint, err = filepath.Abs(mountpoint); err != nil {
		return nil, err
	}
	if backing, err = filepath.Abs(backing); err != nil {
		return nil, err
	}
	for _, d := range []string{mountpoint, backing} {
		st, err := os.Stat(d)
		if err != nil {
			return nil, fmt.Errorf("faultfs: %v", err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("faultfs: %s is not a directory", d)
		}
	}

	f := &FS{
		mountpoint:  mountpoint,
		backing:     backing,
		kernelLocks: opts.Locks == LocksKernel,
		closing:     make(chan struct{}),
		served:      make(chan struct{}),
	}
	f.lockMode.Store(int32(opts.Locks))
	f.locks.init()
	f.installRules(opts.Rules)

	lroot, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("faultfs: %v", err)
	}
	lb := lroot.(*fs.LoopbackNode)
	root := &node{LoopbackNode: lb, fsys: f}
	lb.RootData.RootNode = root

	zero := time.Duration(0)
	fsOpts := &fs.Options{
		MountOptions: fuse.MountOptions{
			// No fusermount on the machines this is for: mount(2)
			// directly, and do not fall back.
			DirectMountStrict: true,
			FsName:            backing,
			Name:              "faultfs",
			// With passthrough the kernel would do reads and
			// writes on the backing file itself, bypassing us.
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
			// Forward lock requests unless the kernel is to keep
			// them locally.
			EnableLocks: !f.kernelLocks,
			Debug:       opts.Debug,
		},
		// Do not let the kernel cache names or attributes: the
		// backing directory may be changed behind the mount's back.
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
	}
	raw := &rawFS{RawFileSystem: fs.NewNodeFS(root, fsOpts), fsys: f}
	server, err := fuse.NewServer(raw, mountpoint, &fsOpts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("faultfs: mount %s on %s: %v", backing, mountpoint, err)
	}
	f.server = server
	go func() {
		server.Serve()
		close(f.served)
	}()
	if err := server.WaitMount(); err != nil {
		f.Unmount()
		return nil, fmt.Errorf("faultfs: mount %s on %s: %v", backing, mountpoint, err)
	}
	return f, nil
}

// Mountpoint returns the absolute path of the mount.
func (f *FS) Mountpoint() string { return f.mountpoint }

// Backing returns the absolute path of the mirrored directory.
func (f *FS) Backing() string { return f.backing }

func (f *FS) installRules(rules []Rule) {
	states := make([]*ruleState, len(rules))
	for i, r := range rules {
		states[i] = &ruleState{Rule: r}
	}
	f.rulesMu.Lock()
	f.rules = states
	f.rulesMu.Unlock()
}

// SetRules replaces the rules. Every new rule starts counting its matching
// calls from zero. Calls already being delayed keep their delay. It returns
// an error, and changes nothing, if a rule is not valid.
func (f *FS) SetRules(rules []Rule) error {
	for _, r := range rules {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	f.installRules(rules)
	return nil
}

// Rules returns the installed rules.
func (f *FS) Rules() []Rule {
	f.rulesMu.Lock()
	defer f.rulesMu.Unlock()
	out := make([]Rule, len(f.rules))
	for i, s := range f.rules {
		out[i] = s.Rule
	}
	return out
}

// Counts returns how many calls of each Op the mount has seen since it was
// mounted or since ResetCounts, including calls that rules delayed or
// failed. Every Op is present in the map.
func (f *FS) Counts() map[Op]int64 {
	out := make(map[Op]int64, numOps)
	for i, o := range allOps {
		out[o] = f.counts[i].Load()
	}
	return out
}

// Injected returns, per Op, how many calls a rule made fail since mount or
// ResetCounts. Every Op is present in the map.
func (f *FS) Injected() map[Op]int64 {
	out := make(map[Op]int64, numOps)
	for i, o := range allOps {
		out[o] = f.injected[i].Load()
	}
	return out
}

// ResetCounts sets the call and injected-failure counts to zero. It does not
// reset the rules' own counts of matching calls (SetRules does).
func (f *FS) ResetCounts() {
	for i := range allOps {
		f.counts[i].Store(0)
		f.injected[i].Store(0)
	}
}

// LockMode returns the current lock mode.
func (f *FS) LockMode() LockMode { return LockMode(f.lockMode.Load()) }

// SetLockMode switches between LocksForward and LocksBroken while mounted.
// Locks that are really held stay held until released. A mount made with
// LocksKernel cannot switch, and no mount can switch to LocksKernel: whether
// the kernel forwards locks is fixed when mounting.
func (f *FS) SetLockMode(m LockMode) error {
	if f.kernelLocks || m == LocksKernel {
		if m == f.LockMode() {
			return nil
		}
		return errors.New("faultfs: lock mode kernel is fixed at mount time")
	}
	if m != LocksForward && m != LocksBroken {
		return fmt.Errorf("faultfs: unknown lock mode %v", m)
	}
	f.lockMode.Store(int32(m))
	return nil
}

// hook counts a call of op on paths, applies the rules and returns the
// injected error, or 0 to let the call proceed.
func (f *FS) hook(op Op, paths ...string) syscall.Errno {
	i := op.index()
	f.counts[i].Add(1)
	var delay time.Duration
	var errno syscall.Errno
	f.rulesMu.Lock()
	for _, r := range f.rules {
		if r.Op != op || !r.matches(paths) {
			continue
		}
		n := r.seen
		r.seen++
		if n < r.After || (r.Times > 0 && r.fired >= r.Times) {
			continue
		}
		r.fired++
		delay += r.Delay
		if errno == 0 {
			errno = r.Errno
		}
	}
	f.rulesMu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-f.closing:
			t.Stop()
		}
	}
	if errno != 0 {
		f.injected[i].Add(1)
	}
	return errno
}

// Wait blocks until the filesystem stops serving: after Unmount, or after
// someone else unmounted it (umount(8)).
func (f *FS) Wait() { <-f.served }

// Unmount unmounts the filesystem and waits until it stops serving. If the
// mount is busy (open files, a process's working directory) it retries for a
// moment, then detaches it lazily (like umount -l) and returns an error
// saying so; the mountpoint is then free, and the filesystem goes away once
// the last user lets go. Unmount may be called again after an error, and
// after success it does nothing.
func (f *FS) Unmount() error {
	f.unmountMu.Lock()
	defer f.unmountMu.Unlock()
	if f.unmounted {
		return nil
	}
	f.closeOnce.Do(func() { close(f.closing) })
	if f.server == nil {
		f.unmounted = true
		return nil
	}
	if f.isServed() { // unmounted by someone else
		f.finish()
		return nil
	}
	var err error
	if !f.detached {
		if err = f.server.Unmount(); err == nil {
			f.finish()
			return nil
		}
		if derr := syscall.Unmount(f.mountpoint, syscall.MNT_DETACH); derr != nil {
			if f.isServed() {
				f.finish()
				return nil
			}
			return fmt.Errorf("faultfs: unmount %s: %v; lazy unmount: %v", f.mountpoint, err, derr)
		}
		f.detached = true
	}
	select {
	case <-f.served:
		f.finish()
		return nil
	case <-time.After(3 * time.Second):
	}
	if err == nil {
		err = errors.New("still busy")
	}
	return fmt.Errorf("faultfs: unmount %s: %v; detached lazily (umount -l), the filesystem is still in use", f.mountpoint, err)
}

func (f *FS) isServed() bool {
	select {
	case <-f.served:
		return true
	default:
		return false
	}
}

func (f *FS) finish() {
	f.unmounted = true
	f.locks.closeAll()
}

// rawFS wraps go-fuse's node bridge to see what the node API hides: the lock
// owner of a FLUSH request, which is how POSIX "close drops the process's
// locks" reaches a FUSE server.
type rawFS struct {
	fuse.RawFileSystem
	fsys *FS
}

// lkFlagFlushOwner marks the internal GETLK request by which rawFS.Flush
// tells the file handle that a lock owner closed a descriptor of the file.
const lkFlagFlushOwner = 1 << 31

func (r *rawFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	st := r.RawFileSystem.Flush(cancel, in)
	if !r.fsys.kernelLocks && in.LockOwner != 0 {
		lk := fuse.LkIn{InHeader: in.InHeader, Fh: in.Fh, Owner: in.LockOwner, LkFlags: lkFlagFlushOwner}
		var out fuse.LkOut
		r.RawFileSystem.GetLk(cancel, &lk, &out)
	}
	return st
}
