package durable

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/leasetool/lease/commit/seam"
)

// Strategy is how a batch makes its records durable
// (docs/design.md#durability).
type Strategy int

const (
	// Auto: Syncfs where the filesystem makes syncfs(2) a
	// whole-filesystem barrier with something to flush (ext4, XFS, btrfs)
	// and the machine has little dirty data, Record everywhere else
	// (tmpfs among them).
	Auto Strategy = iota
	// Record: every temp file fdatasynced before its rename, every
	// directory renamed into fsynced once per batch (G1, G4).
	Record
	// Syncfs: where the filesystem allows it (seam.FilesystemSyncer),
	// a batch of many records (Store.Apply) is written in two passes per
	// chunk: every temp file written, one syncfs(2), every rename, one
	// syncfs (SyncBatch.BeginPass); other writes under a group batch
	// wait on the barrier's shared rounds before their rename. Record
	// where the filesystem has no syncfs.
	Syncfs
)

var strategyNames = [...]string{"auto", "record", "syncfs"}

func (s Strategy) String() string { return strategyNames[s] }

// ParseStrategy reads auto, record or syncfs.
func ParseStrategy(v string) (Strategy, error) {
	for i, n := range strategyNames {
		if v == n {
			return Strategy(i), nil
		}
	}
	return Auto, fmt.Errorf("sync %q: want auto, record or syncfs", v)
}

// DirtyLimit is the machine's dirty and writeback data (/proc/meminfo)
// above which a batch under Auto fsyncs per record: a syncfs writes back
// every dirty page of the filesystem, other writers' too, where an
// fdatasync writes its own file (docs/performance.md, the dirty writer).
const DirtyLimit = 256 << 20

// Choice is the strategy a filesystem gets and why, for lease qualify.
type Choice struct {
	Strategy Strategy // Record or Syncfs
	FSType   string   // the filesystem type, "" when unknown
	Why      string
}

// Choose is the strategy the Disk's batches get under want, before the
// per-batch check of dirty data that Auto adds.
func (d *Disk) Choose(want Strategy) Choice {
	fsys, ok := d.fs.(seam.FilesystemSyncer)
	if want == Record {
		return Choice{Strategy: Record, Why: "forced by sync = record (auto, the default, chooses by filesystem)"}
	}
	if !ok {
		return Choice{Strategy: Record, Why: "this filesystem interface has no syncfs"}
	}
	name, barrier, err := fsys.FilesystemType()
	switch {
	case err != nil:
		return Choice{Strategy: Record, Why: "statfs: " + err.Error()}
	case want == Syncfs:
		return Choice{Strategy: Syncfs, FSType: name, Why: "forced by sync = syncfs"}
	case !barrier:
		return Choice{Strategy: Record, FSType: name, Why: "syncfs is not trusted as a whole-filesystem barrier on " + name}
	case name == "tmpfs":
		// Nothing to flush either way, and the two-pass order's lock
		// turns cost CPU the per-record path does not pay: renew-batch
		// of 1,024 took 1.2x as long (docs/performance.md#syncfs).
		return Choice{Strategy: Record, FSType: name, Why: "tmpfs has nothing to flush: per record costs the least there"}
	}
	return Choice{Strategy: Syncfs, FSType: name, Why: fmt.Sprintf("syncfs is a whole-filesystem barrier on %s (per record while the machine has more than %d MiB dirty)", name, DirtyLimit>>20)}
}

// SetStrategy sets how the Disk's batches make their records durable
// (Auto by default).
func (d *Disk) SetStrategy(s Strategy) {
	c := d.Choose(s)
	d.strategy.Store(int32(c.Strategy))
	d.auto.Store(s == Auto)
}

// Dirty reads the machine's Dirty + Writeback bytes from /proc/meminfo;
// false when it cannot.
func Dirty() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	var sum int64
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 || (string(f[0]) != "Dirty:" && string(f[0]) != "Writeback:") {
			continue
		}
		kb, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			return 0, false
		}
		sum += kb << 10
		seen++
	}
	return sum, seen == 2
}

// dirtyNow is Dirty, a variable for tests.
var dirtyNow = Dirty

// AutoMinBatch is the fewest records of a batch that Auto gives the syncfs
// barrier: a smaller one, such as the one-record claim and done of a
// worker's item, makes as few syncs per record (one file and one
// directory fsync for one record, against two syncfs) without writing
// back the dirty data of every other writer of the filesystem (a
// fuzzer's queue, its crashes) twice per item.
const AutoMinBatch = 8

// barrierFor opens the barrier of a new batch, or nil when the batch
// fsyncs per record.
func (d *Disk) barrierFor(records int) *Barrier {
	if Strategy(d.strategy.Load()) != Syncfs {
		return nil
	}
	if d.auto.Load() {
		if records < AutoMinBatch {
			return nil
		}
		if n, ok := dirtyNow(); !ok || n > DirtyLimit {
			return nil
		}
	}
	fsys, ok := d.fs.(seam.FilesystemSyncer)
	if !ok {
		return nil
	}
	h, err := fsys.OpenSyncfs()
	if err != nil {
		return nil // per record: that open failing says nothing of the writes
	}
	return NewBarrier(h.Syncfs, h.Close, &d.counts.Syncfs)
}

// Barrier is a group commit by the filesystem (leader and followers): Sync
// returns once a syncfs that started after Sync was called has finished.
// One syncfs runs at a time; every caller that arrived before it started
// is covered by the next one, which the first of them runs. The first
// failure is kept: every later Sync returns it (G6).
type Barrier struct {
	sync    func() error
	close   func() error
	count   *atomic.Int64
	mu      sync.Mutex
	cond    *sync.Cond
	started uint64 // rounds started
	done    uint64 // the last round finished
	running bool
	waiting int // callers waiting for a round (for tests)
	failed  error
	closed  sync.Once
}

// NewBarrier returns a barrier running sync (counted in count when not
// nil); close, when not nil, is called by Close.
func NewBarrier(syncfs, closeFn func() error, count *atomic.Int64) *Barrier {
	b := &Barrier{sync: syncfs, close: closeFn, count: count}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// Sync waits for a syncfs that starts after the call, running it when none
// is running, and returns the first error any round of the barrier met.
func (b *Barrier) Sync() error { return b.round(false) }

// Final is Sync even after a failure: the barrier of what a failed batch
// already renamed (G5).
func (b *Barrier) Final() error { return b.round(true) }

func (b *Barrier) round(always bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	target := b.started + 1 // a round running now started before this call
	for b.done < target && (always || b.failed == nil) {
		if b.running {
			b.waiting++
			b.cond.Wait()
			b.waiting--
			continue
		}
		b.running = true
		b.started++
		round := b.started
		b.mu.Unlock()
		err := b.sync()
		b.mu.Lock()
		if b.count != nil {
			b.count.Add(1)
		}
		b.running = false
		b.done = round
		if err != nil && b.failed == nil {
			b.failed = err
		}
		b.cond.Broadcast()
	}
	return b.failed
}

// Err is the first error of the barrier.
func (b *Barrier) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed
}

// Close closes the barrier's descriptor (once); a Sync after it fails.
func (b *Barrier) Close() {
	b.closed.Do(func() {
		if b.close != nil {
			b.close()
		}
	})
}

// ErrBatchStopped is the error of a Put that wrote its temp file in the
// first pass of a two-pass chunk but did not rename it, because a failure
// elsewhere stopped the batch (SyncBatch.Stop).
var ErrBatchStopped = errors.New("the batch stopped at another item's error")

// Pass is the first pass of a two-pass chunk (SyncBatch.BeginPass): a
// rendezvous of the chunk's n items. An item arrives (its temp file is
// written and it waits to rename) or leaves (it writes nothing, or is
// done); once all n have, one syncfs of the barrier runs, if any arrived,
// and every arrival returns its result. Deadlock freedom is the caller's:
// the items take their locks in the global order (Store.apply).
type Pass struct {
	barrier  *Barrier
	mu       sync.Mutex
	cond     *sync.Cond
	n, in    int // items, items arrived or left
	arrivals int
	done     bool
	err      error
	stopped  error
}

func newPass(b *Barrier, n int) *Pass {
	p := &Pass{barrier: b, n: n}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *Pass) arrive() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.in++
	p.arrivals++
	p.complete()
	for !p.done {
		p.cond.Wait()
	}
	return p.err
}

func (p *Pass) leave() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.in++
	p.complete()
}

func (p *Pass) stop(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped == nil {
		p.stopped = err
	}
}

// complete runs the pass's syncfs once every item arrived or left; p.mu
// is held (and let go during the syncfs, which no one else can start).
func (p *Pass) complete() {
	if p.in != p.n || p.done {
		return
	}
	var err error
	if p.arrivals > 0 && p.stopped == nil {
		p.mu.Unlock()
		err = p.barrier.Sync()
		p.mu.Lock()
	}
	if p.stopped != nil {
		err = fmt.Errorf("%w: %w", ErrBatchStopped, p.stopped)
	}
	p.err, p.done = err, true
	p.cond.Broadcast()
}
