package commit

import (
	"sync"
	"sync/atomic"

	"github.com/leasetool/lease/commit/durable"
)

// The two-pass batch of the syncfs strategy (docs/design.md#durability):
// a batch under a syncfs barrier is cut into chunks of at most twoPassChunk
// items in the global lock order, and each chunk is written in two passes:
//
//  1. every item takes its record lock, reads, decides and writes its
//     temp file (not fsynced), and keeps the lock; once every item of the
//     chunk has done so or has nothing to write, one syncfs makes all the
//     temp files durable (G1);
//  2. every item renames its temp file into place and releases its lock;
//     one syncfs after the chunk's last rename stands for its directory
//     fsyncs (G3/G4).
//
// So a chunk costs two syncfs whatever the number of writers, where a
// barrier per writer cost one per record with one writer.
//
// Deadlock freedom (docs/design.md#locks): within a chunk the locks are
// taken one after the other in the global order (shard, ID) — item j tries
// its lock only once item j-1's try is over (lockTurn) — and a chunk's
// locks are all released before the next chunk takes any. So a process
// waiting for the lock of record L holds only locks of records before L in
// that order. Whoever holds L is either in its second pass, which waits
// for no lock and releases L, or in its first pass waiting for a lock
// after L. A cycle of waits would need a lock before itself: there is
// none. (Every other lock a first pass may take — held/, the tally, a
// spare of the reserve — is taken and released without waiting for a
// record lock.) Lock waits stay bounded by the lock timeout all the same.
// A try is not repeated after a transient error (applyOne): its lock would
// be taken again out of order.
//
// A failure anywhere stops the batch: the items of the chunk still in the
// first pass rename nothing and remove their temp files (SyncBatch.Stop),
// the chunk's final syncfs runs whatever failed (G5), no later chunk
// starts, and no item is reported OK (G6, Store.apply).

// twoPassChunk is the most items of one two-pass chunk: the record locks a
// process holds at once (the temp files are closed once written). 1,024
// items in one chunk: renew-batch of 1,024 records costs 2 syncfs.
var twoPassChunk = 1024

// lockTurn is passed once an item of a two-pass chunk has tried its lock.
type lockTurn struct {
	once sync.Once
	next chan struct{}
}

// pass lets the next item try its lock (once; nil-safe).
func (t *lockTurn) pass() {
	if t != nil {
		t.once.Do(func() { close(t.next) })
	}
}

// twoPass runs body over the items of sorted (the global lock order) in
// two-pass chunks of batch, a batch with a syncfs barrier.
func (s *Store) twoPass(sorted []int, items []Item, batch *durable.SyncBatch, aborted *atomic.Bool,
	body func(i int, b *durable.SyncBatch, turn *lockTurn), fail func(i int, err error)) {
	for start := 0; start < len(sorted); {
		if aborted.Load() {
			for _, i := range sorted[start:] {
				body(i, batch, nil) // not attempted
			}
			return
		}
		end := start + 1
		for end < len(sorted) && end-start < twoPassChunk && items[sorted[end]].ID != items[sorted[end-1]].ID {
			end++ // a repeated ID starts the next chunk: its lock is this chunk's
		}
		chunk := sorted[start:end]
		batch.BeginPass(len(chunk))
		ready := make(chan struct{})
		close(ready)
		var wg sync.WaitGroup
		for _, i := range chunk {
			turn := &lockTurn{next: make(chan struct{})}
			wait := ready
			ready = turn.next
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-wait
				view := batch.ForItem()
				body(i, view, turn)
				turn.pass()
				view.Leave()
			}()
		}
		wg.Wait()
		if err := batch.EndPass(); err != nil {
			fail(-1, &durable.OpError{Op: "syncfs after the renames", Err: err})
		}
		start = end
	}
}
