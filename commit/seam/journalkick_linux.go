//go:build linux

package seam

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A CephFS metadata server (MDS) answers most requests before their journal
// entry is written ("early reply") and writes its journal, in batches,
// when something waits for it: a client's fsync, or its own tick, every
// mds_tick_interval (5 s by default). A record that client A wrote last is
// left with A holding the write caps and a writable range on its inode (the
// reply to A's rename hands them back after A's close gave them up). When
// client B then looks the record up, the MDS takes the caps back from A,
// journals the inode's new max_size, and holds B's lookup until that entry
// is written: until the next tick, since nobody waits on the journal. Each
// record read through one client after the other client wrote it then
// takes up to 5 s (renew-batch of 1,024 leases through B after A: 276 s
// against 3.6 s repeated through B; the MDS op tracker shows the lookups
// "failed to rdlock, waiting" on the inode's filelock, excl->sync).
//
// A kicker ends that wait from the reader's side: a read still in flight
// after a short delay makes one metadata change of no consequence (the
// times of the table's root directory set to now) and fsyncs it, and the
// client's fsync asks the MDS to write its journal now, the waiting entry
// with it. One kick serves every read that waits at that moment, so a
// table (one OSFS) kicks at most once per delay. The delay adapts: it drops
// to kickMin when a kick ended a read (the reads that wait on the journal
// end as soon as it is written) and doubles, up to kickMax, when a read
// was still in flight a delay after its kick (it waited on something
// else, a loaded server, and kicking it again only adds to the load). On
// any filesystem but CephFS there is no kicker and reads are not watched.
// A read of a name in the root directory itself is not helped: the touch
// waits for the kernel's lock of that directory, which the waiting lookup
// holds. A table's records, queue entries and lock files are all below it.
const (
	kickStart = 10 * time.Millisecond   // before anything is known: far below the tick, above most reads
	kickMin   = 2 * time.Millisecond    // a cached lookup, open and read take well under this
	kickMax   = 1000 * time.Millisecond // a read slow for another reason is kicked at most once a second
)

// kicker asks the MDS of one CephFS table to write its journal.
type kicker struct {
	fd    int          // the table root, a descriptor of its own
	delay atomic.Int64 // how long a read waits before a kick, nanoseconds
	last  atomic.Int64 // when the last kick began, unix nanoseconds
	kicks atomic.Int64
	mu    sync.Mutex // held while a kick runs

	// clock is the kicker's time: nil is the system's. The seam through
	// which its tests move time themselves (TestKickerKicksSlowReads).
	clock kickClock
}

// kickClock is what a kicker asks of time: now, and a function run after
// a delay, as time.AfterFunc.
type kickClock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) kickTimer
}

// kickTimer is the *time.Timer of kickClock.AfterFunc.
type kickTimer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// systemClock is the kickClock of the system's time.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) kickTimer {
	return time.AfterFunc(d, f)
}

func (k *kicker) timeSource() kickClock {
	if k.clock == nil {
		return systemClock{}
	}
	return k.clock
}

// cephSuperMagic is the statfs type of the kernel's CephFS client.
const cephSuperMagic = 0x00c36400

// newKicker returns the kicker of the table whose root is rootfd, or nil
// unless it is on CephFS. fuse says whether it is on FUSE: ceph-fuse
// answers its virtual xattr ceph.cluster_fsid itself (no MDS request);
// fstype is the root's statfs f_type (OS reads it once).
func newKicker(rootfd int, fuse bool, fstype int64) *kicker {
	ceph := false
	if fuse {
		var b [64]byte
		_, err := unix.Fgetxattr(rootfd, "ceph.cluster_fsid", b[:])
		ceph = err == nil || errors.Is(err, unix.ERANGE)
	} else {
		ceph = fstype == cephSuperMagic
	}
	if !ceph {
		return nil
	}
	fd, err := unix.Dup(rootfd)
	if err != nil {
		return nil
	}
	unix.CloseOnExec(fd)
	k := &kicker{fd: fd}
	k.delay.Store(int64(kickStart))
	return k
}

// watch watches one read until the returned stop: while it is in flight,
// the filesystem is kicked after the delay and again every delay after
// each kick. A nil kicker watches nothing.
func (k *kicker) watch() (stop func()) {
	if k == nil {
		return func() {}
	}
	var (
		mu    sync.Mutex
		done  bool
		fires int
		t     kickTimer
	)
	// fire runs under mu, so that no kick is made for a read after its
	// stop returned (stop waits for a kick under way: a few milliseconds).
	fire := func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		fires++
		k.kickOnce()
		if fires > 1 {
			k.slower() // the last kick did not end this read: the next comes later
		}
		t.Reset(time.Duration(k.delay.Load()))
	}
	mu.Lock()
	t = k.timeSource().AfterFunc(time.Duration(k.delay.Load()), fire)
	mu.Unlock()
	return func() {
		mu.Lock()
		done = true
		t.Stop()
		helped := fires == 1
		mu.Unlock()
		if helped {
			k.delay.Store(int64(kickMin))
		}
	}
}

// slower doubles the delay, up to kickMax.
func (k *kicker) slower() {
	for {
		d := k.delay.Load()
		n := min(2*d, int64(kickMax))
		if d == n || k.delay.CompareAndSwap(d, n) {
			return
		}
	}
}

// kickOnce kicks, unless a kick began less than a delay ago: then it waits
// for that one to end.
func (k *kicker) kickOnce() {
	now := k.timeSource().Now().UnixNano()
	last := k.last.Load()
	if now-last < k.delay.Load() || !k.last.CompareAndSwap(last, now) {
		k.mu.Lock() // a kick under way: its end is this read's kick
		k.mu.Unlock()
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fd < 0 {
		return
	}
	k.kicks.Add(1)
	// Both times now: allowed to the owner and to whoever may write the
	// directory (every writer of a shared table). Without that right
	// there is no kick, and the read waits for the tick.
	if futimensNow(k.fd) == nil {
		unix.Fsync(k.fd)
	}
}

// futimensNow is futimens(fd, NULL): utimensat with no path names fd
// itself (x/sys always passes a path).
func futimensNow(fd int) error {
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, 0, 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// close releases the kicker's descriptor, after a kick under way.
func (k *kicker) close() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fd >= 0 {
		unix.Close(k.fd)
		k.fd = -1
	}
}

// journalKicks reports how many times this FS asked the CephFS metadata
// server to write its journal for a read that waited on it (0 on any
// other filesystem).
func (o *OSFS) journalKicks() int64 {
	if o.kick == nil {
		return 0
	}
	return o.kick.kicks.Load()
}
