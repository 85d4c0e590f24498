package commit

import (
	"sync"
	"sync/atomic"

	"github.com/leasetool/lease/commit/durable"
)

// The two-pass batch of the syncfs strategy (docs/design.md#durability):
// a batch under a syncfs barrier is cut into chunks of at most
// Options.SyncfsChunk items in the global lock order (the first a quarter
// of that when the batch has more: headChunk), and each chunk is written
// in two passes:
//
//  1. every item takes its record lock, reads, decides and writes its
//     temp file (not fsynced), and keeps the lock; once every item of the
//     chunk has done so or has nothing to write, one syncfs makes all the
//     temp files durable (G1);
//  2. every item renames its temp file into place and releases its lock.
//
// The chunks are pipelined: while one chunk's syncfs runs, the next chunk
// takes its locks and writes its temp files, so the CPU's work and the
// filesystem's flush overlap (at most twoPassDepth chunks at once). A
// chunk's renames are made durable by a syncfs that starts after them:
// a later chunk's first-pass syncfs, at the latest the one the batch's
// Flush runs after the last rename, before any item is reported (it stands
// for the directory fsyncs, G3/G4). So a batch of c chunks costs c + 1
// syncfs whatever the number of writers, where a barrier per writer cost
// one per record with one writer.
//
// Deadlock freedom (docs/design.md#locks): the locks of the whole batch are
// taken one after the other in the global order (shard, ID) — item j tries
// its lock only once item j-1's try is over (lockTurn), across chunks too —
// and the chunks are cut in that order, so every lock a chunk holds comes
// before every lock of the chunks after it. So a process waiting for the
// lock of record L holds only locks of records before L in that order.
// Whoever holds L is either in its second pass, which waits for no lock
// (only for its chunk's syncfs) and releases L, or in its first pass
// waiting for a lock after L. A cycle of waits would need a lock before
// itself: there is none. (Every other lock a first pass may take — held/,
// the tally, a spare of the reserve — is taken and released without
// waiting for a record lock.) A repeated ID starts a chunk of its own once
// the chunks before it are over: its lock is theirs until their renames.
// Lock waits stay bounded by the lock timeout all the same. A try is not
// repeated after a transient error (applyOne): its lock would be taken
// again out of order.
//
// A failure anywhere stops the batch: the items of every chunk still in
// the first pass rename nothing and remove their temp files
// (SyncBatch.Stop), the final syncfs runs whatever failed (G5), no later
// chunk starts, and no item is reported OK (G6, Store.apply).

// DefaultSyncfsChunk is the most items of one two-pass chunk when
// Options.SyncfsChunk is 0. Smaller chunks overlap more of the CPU's work
// with the flushes, each costing one more syncfs; 256 measured best for
// renew-batch of 1,024 records on ext4 and XFS loop images
// (docs/performance.md#syncfs).
const DefaultSyncfsChunk = 256

// headChunk is the most items of a batch's first chunk (of at most chunk
// items each). The first chunk's first pass overlaps nothing: no flush
// runs yet. So a batch of more than one chunk starts with a quarter chunk,
// and its first syncfs starts sooner, overlapping the next chunk's locks
// and temp files; it costs one syncfs more. Measured with the default
// chunk (a head of 64), renew-batch of 1,024 records in 16 shards, 21
// interleaved rounds on loop images: ext4 117 ms against 126 (each round
// against its own: median 0.94, faster in 18 of 21), XFS 130 against 137
// (0.97, 14 of 21); a head of 128 made no difference on XFS
// (docs/performance.md#syncfs).
func headChunk(n, chunk int) int {
	if n <= chunk {
		return chunk
	}
	return max(chunk/4, 1)
}

// twoPassDepth is the most chunks in flight at once: the record locks a
// process holds at once are at most twoPassDepth chunks' (the temp files
// are closed once written).
const twoPassDepth = 2

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
// pipelined two-pass chunks of batch, a batch with a syncfs barrier. The
// caller's batch.Flush makes the last renames durable.
func (s *Store) twoPass(sorted []int, items []Item, batch *durable.SyncBatch, aborted *atomic.Bool,
	body func(i int, b *durable.SyncBatch, turn *lockTurn)) {
	// A pool of goroutines, each taking item after item: an item waits in
	// its pass, so every item of the chunks in flight needs one, and
	// twoPassDepth chunks are at most twoPassDepth*chunk items. Reused,
	// a goroutine grows its stack once, not once per item.
	type job struct {
		i          int
		pass       *durable.Pass
		wait       chan struct{}
		turn       *lockTurn
		chunkItems *sync.WaitGroup
	}
	jobs := make(chan job)
	var workers sync.WaitGroup
	for range min(len(sorted), twoPassDepth*s.chunk) {
		workers.Go(func() {
			for j := range jobs {
				<-j.wait
				view := batch.ForItem(j.pass)
				body(j.i, view, j.turn)
				j.turn.pass()
				view.Leave()
				j.chunkItems.Done()
			}
		})
	}
	ready := make(chan struct{})
	close(ready)
	var inflight []chan struct{} // the chunks under way, oldest first: closed when over
	drain := func(keep int) {
		for len(inflight) > keep {
			<-inflight[0]
			inflight = inflight[1:]
		}
	}
	defer func() {
		drain(0)
		close(jobs)
		workers.Wait()
	}()
	for start := 0; start < len(sorted); {
		limit := s.chunk
		if start == 0 {
			limit = headChunk(len(sorted), s.chunk)
		}
		end := start + 1
		for end < len(sorted) && end-start < limit && items[sorted[end]].ID != items[sorted[end-1]].ID {
			end++ // a repeated ID starts the next chunk: its lock is this chunk's
		}
		if start > 0 && items[sorted[start]].ID == items[sorted[start-1]].ID {
			drain(0) // the repeated ID's lock is held until its chunk is over
		}
		drain(twoPassDepth - 1)
		if aborted.Load() {
			for _, i := range sorted[start:] {
				body(i, batch, nil) // not attempted
			}
			return
		}
		chunk := sorted[start:end]
		pass := batch.BeginPass(len(chunk))
		over := make(chan struct{})
		inflight = append(inflight, over)
		chunkItems := new(sync.WaitGroup)
		chunkItems.Add(len(chunk))
		for _, i := range chunk {
			turn := &lockTurn{next: make(chan struct{})}
			jobs <- job{i: i, pass: pass, wait: ready, turn: turn, chunkItems: chunkItems}
			ready = turn.next
		}
		go func() {
			chunkItems.Wait()
			batch.EndPass(pass)
			close(over)
		}()
		start = end
	}
}
