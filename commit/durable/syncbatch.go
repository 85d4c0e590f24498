package durable

import (
	"errors"
	"fmt"
	"path"
	"sync"
	"sync/atomic"

	"github.com/leasetool/lease/commit/seam"
)

// ErrCrossDirectory is returned by SyncBatch.Replace for a rename whose
// source and destination directories differ (G8).
var ErrCrossDirectory = errors.New("rename across directories in a same-directory batch")

// SyncBatch is a same-directory group commit: it renames temp files over
// records and remembers the directories renamed into, then fsyncs each of
// them once (G4). It refuses, before renaming, a rename whose source and
// destination directories differ (G8): a set of directories cannot keep the
// destination-before-source order a cross-directory move needs (use
// Disk.Move for that).
type SyncBatch struct {
	*batchState
	// pass, in a view of one item (ForItem), is the first pass of the
	// item's two-pass chunk (BeginPass): its Put waits there instead of
	// in the barrier.
	pass *Pass
	// arrived, in a view of one item, says the item reached its pass's
	// syncfs (its Put waits in the pass).
	arrived *atomic.Bool
}

// batchState is what the views of one SyncBatch share.
type batchState struct {
	fs       seam.FS
	dirSyncs *atomic.Int64
	mu       sync.Mutex
	pending  map[string]bool
	order    []string
	failed   error
	// barrier, when not nil, is the batch's group syncfs (Disk.Batch
	// under the Syncfs strategy): Flush runs it instead of the directory
	// fsyncs, and SyncDir leaves its directory to Flush.
	barrier *Barrier
	// passes are the first passes begun (BeginPass) and not yet over:
	// Stop stops each of them.
	passes map[*Pass]bool
	// stopped is the error Stop was given, if it was called.
	stopped error
}

// NewSyncBatch returns an empty batch over f; dirSyncs, when not nil, counts
// the directory fsyncs it makes (Disk.Batch counts them in the Disk's
// Counts).
func NewSyncBatch(f seam.FS, dirSyncs *atomic.Int64) *SyncBatch {
	return &SyncBatch{batchState: &batchState{fs: f, dirSyncs: dirSyncs, pending: map[string]bool{}}}
}

// Replace renames tmp over final, which must be in the same directory, and
// marks that directory as needing an fsync.
func (b *SyncBatch) Replace(tmp, final string) error {
	return b.move(tmp, final, b.fs.Rename)
}

// Create moves tmp to final, which must be in the same directory and must
// not exist yet, without ever replacing it (FS.RenameNoReplace: fs.ErrExist
// when final exists), and marks that directory as needing an fsync. It is
// how a record read as missing gets its first version: if another client
// created the record meanwhile, or this client's caches hid it, the move
// fails instead of destroying that record.
func (b *SyncBatch) Create(tmp, final string) error {
	return b.move(tmp, final, b.fs.RenameNoReplace)
}

func (b *SyncBatch) move(tmp, final string, rename func(o, n string) error) error {
	dir := path.Dir(final)
	if path.Dir(tmp) != dir {
		return fmt.Errorf("%w: %s -> %s", ErrCrossDirectory, tmp, final)
	}
	if err := rename(tmp, final); err != nil {
		return err
	}
	b.Mark(dir)
	return nil
}

// Mark adds dir to the directories b fsyncs, for a change that did not go
// through Replace or Create (a removal, a rename whose call failed but took
// effect, a directory a new table was made with).
func (b *SyncBatch) Mark(dir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.pending[dir] {
		b.pending[dir] = true
		b.order = append(b.order, dir)
	}
}

// Pending reports whether dir has renames not yet covered by an fsync.
func (b *SyncBatch) Pending(dir string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pending[dir]
}

// SyncDir fsyncs dir now if it has pending renames; a later Flush does not
// sync it again unless new renames arrive. Used to pipeline the barrier of a
// shard as soon as its last record is renamed.
func (b *SyncBatch) SyncDir(dir string) error {
	if b.barrier != nil {
		return nil // one syncfs at Flush covers every directory
	}
	b.mu.Lock()
	if !b.pending[dir] {
		b.mu.Unlock()
		return nil
	}
	delete(b.pending, dir)
	b.mu.Unlock()
	return b.sync(dir)
}

// SyncNow fsyncs dir now, whether or not it is pending, and returns only
// once that fsync is done: what a write through the reserve needs before it
// unlocks its spare (reserve.go). SyncDir may return while another writer's
// fsync of dir is still under way. A failure fails the batch (Err) as any.
func (b *SyncBatch) SyncNow(dir string) error { return b.sync(dir) }

func (b *SyncBatch) sync(dir string) error {
	err := b.fs.SyncDir(dir)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		if b.failed == nil {
			b.failed = err
		}
		return err
	}
	if b.dirSyncs != nil {
		b.dirSyncs.Add(1)
	}
	return nil
}

// fail records err as the batch's failure unless one is recorded.
func (b *SyncBatch) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed == nil {
		b.failed = err
	}
}

// Syncfs reports whether the batch has a syncfs barrier (Disk.Batch under
// the Syncfs strategy).
func (b *SyncBatch) Syncfs() bool { return b.barrier != nil }

// Flush fsyncs every directory still pending, concurrently, and returns the
// first directory fsync error this batch met (G6): once a barrier failed,
// the batch has failed even if later ones succeed. Under a syncfs barrier
// it runs one syncfs that starts after every rename made so far instead,
// whatever failed before (G5), and closes the barrier's descriptor: a
// batch under a barrier ends with its Flush.
func (b *SyncBatch) Flush() error {
	if b.barrier != nil {
		b.checkpoint()
		b.barrier.Close()
		return b.Err()
	}
	b.mu.Lock()
	var dirs []string
	for _, d := range b.order {
		if b.pending[d] {
			dirs = append(dirs, d)
			delete(b.pending, d)
		}
	}
	b.order = b.order[:0]
	b.mu.Unlock()
	if len(dirs) == 1 {
		b.sync(dirs[0]) // one directory: nothing to issue concurrently
		return b.Err()
	}
	var wg sync.WaitGroup
	for _, d := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.sync(d)
		}()
	}
	wg.Wait()
	return b.Err()
}

// checkpoint runs one syncfs of the barrier, whatever failed before (G5),
// when anything was renamed since the last one.
func (b *SyncBatch) checkpoint() {
	b.mu.Lock()
	n := len(b.order)
	clear(b.pending)
	b.order = b.order[:0]
	b.mu.Unlock()
	if n > 0 {
		if err := b.barrier.Final(); err != nil {
			b.fail(err)
		}
	}
}

// BeginPass starts the first pass of a two-pass chunk of n items under
// the batch's syncfs barrier (Store.apply; docs/design.md#durability) and
// returns it: each item's Put, through the item's view (ForItem), writes
// its temp file and waits in the pass until every item of the chunk either
// waits there too or has left it (Leave); then one syncfs makes every temp
// file of the chunk durable (G1) and the Puts rename. Passes may overlap
// (the next chunk writes its temp files while this one's syncfs runs); the
// renames of every chunk are made durable by a later syncfs, at the latest
// the batch's Flush (G3/G4).
func (b *SyncBatch) BeginPass(n int) *Pass {
	p := newPass(b.barrier, n)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.passes == nil {
		b.passes = map[*Pass]bool{}
	}
	b.passes[p] = true
	if b.stopped != nil {
		p.stop(b.stopped)
	}
	return p
}

// ForItem is the view of b of one item of pass p: the same batch, which
// knows whether that item reached the pass's syncfs.
func (b *SyncBatch) ForItem(p *Pass) *SyncBatch {
	return &SyncBatch{batchState: b.batchState, pass: p, arrived: new(atomic.Bool)}
}

// Leave says the item of view b is done with the first pass: its Put, if
// it made one, waited there already; otherwise the pass no longer waits
// for it. Called once per item, when the item is done.
func (b *SyncBatch) Leave() {
	if b.pass != nil && !b.arrived.Swap(true) {
		b.pass.leave()
	}
}

// EndPass says every item of pass p has left it: Stop no longer needs to
// reach it.
func (b *SyncBatch) EndPass(p *Pass) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.passes, p)
}

// Stop makes every pass under way rename nothing more: every Put still
// waiting in one, or arriving, removes its temp file and returns an error
// wrapping ErrBatchStopped (a failure elsewhere stopped the batch). A pass
// begun later is stopped from its start.
func (b *SyncBatch) Stop(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped == nil {
		b.stopped = err
	}
	for p := range b.passes {
		p.stop(err)
	}
}

// wait is the syncfs a temp file waits for before its rename: its pass's
// when the item is in one, else a round of the barrier.
func (b *SyncBatch) wait() error {
	if b.pass != nil && b.arrived != nil && !b.arrived.Swap(true) {
		return b.pass.arrive()
	}
	return b.barrier.Sync()
}

// Err is the first directory fsync error met, if any.
func (b *SyncBatch) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed
}
