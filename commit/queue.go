package commit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// The queue (docs/design.md#queue): queue/SS/ID, one empty regular file per queued
// work item that is not done, SS the ID's work shard. The name is the
// content, so an entry is created without a file fsync; each queue shard
// directory touched by a batch is fsynced once (group commit). Claims never
// remove an entry, so an expired or released item is found again; complete
// removes it once the record is done, and whoever meets an entry of a done
// item removes it then (the removal need not be durable).

// QueueShardDir is the directory of queue shard sh: queue/SS.
func (s *Store) QueueShardDir(sh int) string {
	return layout.QueueDir + "/" + leasefmt.ShardDirName(sh, s.hdr.WorkShards)
}

// QueuePath is the queue entry of id: queue/SS/ID.
func (s *Store) QueuePath(id leasefmt.ID) string {
	return s.QueueShardDir(id.Shard(s.hdr.WorkShards)) + "/" + string(id)
}

// Enqueue adds items to the queue and returns their results in input
// order: OK for each ID added; Queued for one already queued; Done for one
// whose record is done (not added: the work is over); Corrupt when its
// record does not validate (not added; lease fsck checks it); IOError when
// the entry could not be made durable. Entries are created concurrently
// by the writer pool; each touched queue shard directory is fsynced once,
// after its last entry, and an ID is reported added only after that (G3). A failed create or fsync
// fails the batch: nothing more is started, what was created is still
// fsynced (G5) and nothing is reported added (G6).
//
// The entry is made before the record is read, so that a complete running
// at the same time cannot leave an entry behind for an item it made done:
// either the complete's removal comes after the entry, or this read sees
// done and takes the entry back.
//
// A later line of an ID earlier in items is not attempted: its result is
// the first line's, except that an ID the first line added is Queued
// ("already queued"), as a later Enqueue of it answers. So the first line
// of an ID is the one reported added whatever the writers' order, and a
// batch split by shard across ranks (each rank's items in input order)
// answers as one process does, whether or not its input was cut into
// chunks.
func (s *Store) Enqueue(ctx context.Context, items []Item) []Result {
	s.stats.Batches.Add(1)
	res := make([]Result, len(items))
	n := s.hdr.WorkShards
	left := map[int]int{}
	for _, it := range items {
		left[it.ID.Shard(n)]++
	}
	var (
		mu      sync.Mutex
		failed  error
		created = map[int]int{}
	)
	fail := func(err error) {
		mu.Lock()
		if failed == nil {
			failed = err
		}
		mu.Unlock()
	}
	// Make the shard directories first, durably, and in a fixed order.
	for sh := range left {
		if err := s.Disk().EnsureDir(s.QueueShardDir(sh)); err != nil {
			fail(&durable.OpError{Op: "make the queue shard directory", Path: s.Abs(s.QueueShardDir(sh)), Err: err})
		}
	}
	firstOf := map[leasefmt.ID]int{}
	repeats := map[int]int{} // a later line of an ID: the index of its first
	order := make([]int, 0, len(items))
	for i, it := range items {
		if f, ok := firstOf[it.ID]; ok {
			repeats[i] = f
			continue
		}
		firstOf[it.ID] = i
		order = append(order, i)
	}
	s.parallel(order, func(i int) {
		it := items[i]
		r := &res[i]
		name := s.QueuePath(it.ID)
		r.Item, r.Path = it, s.Abs(name)
		mu.Lock()
		stop := failed
		mu.Unlock()
		if stop != nil {
			r.Outcome, r.Cause = IOError, fmt.Errorf("%w: %w", ErrNotAttempted, stop)
			return
		}
		start := time.Now()
		f, err := s.fs.CreateExcl(name)
		switch {
		case errors.Is(err, fs.ErrExist):
			r.Outcome, r.Detail = Queued, "already queued"
			return
		case err != nil:
			r.Outcome, r.Cause = IOError, &durable.OpError{Op: "create the queue entry", Path: r.Path, Err: err}
			fail(r.Cause)
			return
		}
		mu.Lock()
		created[it.ID.Shard(n)]++
		mu.Unlock()
		if err := f.Close(); err != nil {
			r.Outcome, r.Cause = IOError, &durable.OpError{Op: "close the queue entry", Path: r.Path, Err: err}
			fail(r.Cause)
			return
		}
		r.Outcome, r.Latency = OK, time.Since(start)
	})
	// Then the records of the items queued: which are done. A shard with
	// many new entries is listed once instead of looked up per ID (its
	// names are read after its entries were made, so a complete that
	// finishes later removes the entry itself).
	listed, bad := s.listWorkShards(created)
	check := make([]int, 0, len(items))
	for i := range res {
		if res[i].Outcome != OK {
			continue
		}
		if err := bad[items[i].ID.Shard(n)]; err != nil {
			res[i].Outcome, res[i].Cause, res[i].Detail = IOError, err, durable.Describe(err)
			continue
		}
		check = append(check, i)
	}
	s.parallel(check, func(i int) {
		it, r := items[i], &res[i]
		name := s.QueuePath(it.ID)
		if names, ok := listed[it.ID.Shard(n)]; ok && !names[it.ID.FileName()] {
			return // no record: not done
		}
		rec, err := s.Read(ctx, leasefmt.Work, it.ID)
		switch {
		case errors.Is(err, leasefmt.ErrCorrupt):
			s.fs.Remove(name) // not queued: the record is for lease fsck
			r.Outcome, r.Detail, r.Cause = Corrupt, "record does not validate; not queued (lease fsck checks it)", err
			r.Path = s.Abs(s.RecordPath(leasefmt.Work, it.ID))
		case err != nil:
			r.Outcome, r.Cause = IOError, err
			fail(err)
		case rec != nil && rec.Status == leasefmt.Done:
			if err := s.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				r.Outcome, r.Cause = IOError, &durable.OpError{Op: "remove the queue entry of a done item", Path: r.Path, Err: err}
				fail(r.Cause)
				return
			}
			r.Outcome, r.Token, r.Record, r.Detail = Done, rec.Token, rec, fmt.Sprintf("work is done (token %d); not queued", rec.Token)
		case rec != nil && rec.Status == leasefmt.Failed:
			// Taken back under the record's lock, where a lease retry
			// makes its entry (see attempts.go).
			if s.unqueueFailed(ctx, name, it.ID) {
				r.Outcome, r.Token, r.Record, r.Detail = Failed, rec.Token, rec, failedDetail(rec)+"; not queued"
			}
		case rec != nil:
			r.Token = rec.Token
		}
	})
	// One fsync per queue shard directory an entry was created in, the
	// directories synced concurrently, also after a failure (G5).
	var dirs []int
	for sh := range created {
		dirs = append(dirs, sh)
	}
	synced := time.Now()
	s.parallel(dirs, func(sh int) {
		dir := s.QueueShardDir(sh)
		s.stats.DirectorySyncs.Add(1)
		if err := s.fs.SyncDir(dir); err != nil {
			fail(&durable.OpError{Op: "fsync the queue shard directory", Path: s.Abs(dir), Err: err})
		}
	})
	wait := time.Since(synced)
	for i := range res {
		r := &res[i]
		s.stats.Attempted.Add(1)
		if f, ok := repeats[i]; ok { // f < i: its result is final
			*r = repeated(res[f], items[i])
			if r.Outcome == IOError || r.Outcome == Corrupt {
				s.stats.Failures.Add(1)
			}
			continue
		}
		switch {
		case r.Outcome == OK && failed != nil:
			r.Outcome, r.Cause = IOError, fmt.Errorf("%w: %w", ErrBatchFailed, failed)
		case r.Outcome == OK:
			r.Latency += wait
			s.stats.Renewals.Add(1)
			s.stats.addLatency(r.Latency)
		}
		if r.Outcome == IOError || r.Outcome == Corrupt {
			s.stats.Failures.Add(1)
		}
		if r.Outcome == IOError && r.Detail == "" {
			r.Detail = durable.Describe(r.Cause)
		}
	}
	return res
}

// repeated is the result of a later line it of the ID whose first line's
// result is first: the same, but an ID the first line added is already
// queued.
func repeated(first Result, it Item) Result {
	r := first
	r.Item, r.Latency = it, 0
	if r.Outcome == OK {
		r.Outcome, r.Detail, r.Token, r.Record = Queued, "already queued", 0, nil
	}
	return r
}

// listWorkShards lists the work shard directories in which many entries
// were created, when listing costs less than a lookup per entry would (the
// directory's size says about how many names it holds): the names of
// records there, by shard; a shard whose directory does not exist has
// none. A shard that cannot be listed is left out (its records are read
// one by one).
func (s *Store) listWorkShards(created map[int]int) (map[int]map[string]bool, map[int]error) {
	const minEntries = 256 // fewer: look each record up
	var shards []int
	out := map[int]map[string]bool{}
	bad := map[int]error{}
	for sh, c := range created {
		// A shard with no directory has no records, whatever the count: a
		// new table's add, chunked (a few hundred entries a shard), reads
		// no record then.
		fi, err := s.fs.Lstat(s.ShardDir(leasefmt.Work, sh))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			out[sh] = map[string]bool{} // no records in it
		case c < minEntries && err != nil:
			// Where each record would be looked up, the directory's
			// lookup failing is that shard's I/O error.
			bad[sh] = &durable.OpError{Op: "stat the shard directory", Path: s.Abs(s.ShardDir(leasefmt.Work, sh)), Err: err}
		case c < minEntries:
		case err != nil || !fi.IsDir() || fi.Size()/64 > int64(4*c):
		default:
			shards = append(shards, sh)
		}
	}
	var mu sync.Mutex
	s.parallel(shards, func(sh int) {
		names := map[string]bool{}
		if err := s.ListNames(s.ShardDir(leasefmt.Work, sh), func(n string) { names[n] = true }); err != nil {
			return
		}
		mu.Lock()
		out[sh] = names
		mu.Unlock()
	})
	return out, bad
}

// dequeue removes the queue entry of an item whose record is durably done.
// The removal need not be durable and its failure changes nothing that was
// reported: an entry met for a done record is removed then (docs/design.md#queue).
func (s *Store) dequeue(id leasefmt.ID) {
	if err := s.fs.Remove(s.QueuePath(id)); err == nil {
		s.stats.Dequeued.Add(1)
	}
}

// Answer is what a claim of the queue's next items found.
type Answer int

// The answers of ClaimNext.
const (
	// Granted: at least one item was claimed.
	Granted Answer = iota
	// Empty: nothing left to do; every queued item is done.
	Empty
	// Busy: items remain, but each is held (or its lock was busy).
	Busy
	// Blocked: items remain, but none could be claimed for an error of its
	// record (corrupt, an I/O error); the results say which.
	Blocked
)

var answers = [...]string{"granted", "empty", "busy", "blocked"}

// String is the answer's word: granted, empty, busy, blocked.
func (a Answer) String() string { return answers[a] }

// firstChunk is how many names of a queue shard a claim reads first, and
// nextChunk how many at a time after that, when none of the first was
// free (a few directory blocks each: see osDir).
const (
	firstChunk = 32
	nextChunk  = 128
)

// Next is the result of ClaimNext.
type Next struct {
	Answer Answer
	// Results holds the items granted and the items that could not be
	// claimed for an error of their own (corrupt, I/O error), in the
	// order they were met; held and done entries are only counted.
	Results []Result
	// Counts of what the claim passed over.
	Held int // held by another lease (or its lock wait timed out)
	// ReadLocked counts the items whose lock a read lock stands in the
	// way of (seam.ErrReadLocked): no lease holds them; they are in
	// Results.
	ReadLocked int
	Cleaned    int // entries of done items, removed
	Failed     int // entries of failed items, removed
	Foreign    int // names in queue/ that are not IDs, NFS silly-rename files aside (lease fsck reports them)
	// HeldRead counts the held/ names read whose lease may be over, and
	// TakenOver the items granted from them (held.go).
	HeldRead, TakenOver int
	Read                int // queue entries read
	Shards              int // queue shards opened
	Expiring            float64
	// Expiring is the earliest time a held item can be taken over
	// (expires_at + clock_skew), 0 when none is known: when a waiting
	// claimer may look again.
}

// ClaimNext claims up to n free items of the queue for owner, without a
// candidate list (docs/design.md#cli, claim --next). Its cost does not grow with the
// number of items done or queued: it visits the queue shards in a random
// order, reads firstChunk names of a shard and then nextChunk at a time,
// and tries them in random order, so that workers starting together do
// not collide. Held
// items are passed over (busy), entries of done items removed as they are
// met; only when no chunk had a free item does it read on, so it reads the
// whole queue only when everything in it is held or done. An I/O error
// stops it.
func (s *Store) ClaimNext(ctx context.Context, n int, owner string, ttl float64, rnd *rand.Rand) Next {
	return s.ClaimNextEach(ctx, n, owner, ttl, rnd, 0, nil)
}

// ClaimNextEach is ClaimNext for a large n: the items granted are handed
// to each, at most chunk at a time, as soon as their group commit is
// durable, instead of being kept in Results, so that its memory is
// bounded by a chunk; it reads at most chunk queue names at a time. When
// each returns false no further claim is made (an interrupted claim; the
// answer is then Granted if anything was). With a nil each it is
// ClaimNext.
func (s *Store) ClaimNextEach(ctx context.Context, n int, owner string, ttl float64, rnd *rand.Rand, chunk int, each func(granted []Result) bool) Next {
	var nx Next
	got := 0
	blocked, stopped := false, false
	// try claims items, each of whose queue entry is in the directory
	// entry(id) names, and sorts out the results; false when an I/O error
	// stops the claim.
	try := func(items []Item, entry func(leasefmt.ID) string) bool {
		var granted []Result
		for _, r := range s.Claim(ctx, items, owner, ttl) {
			switch r.Outcome {
			case OK:
				got++
				if r.held != "" {
					nx.TakenOver++
				}
				if each != nil {
					granted = append(granted, r)
					continue
				}
				nx.Results = append(nx.Results, r)
			case Held, LockTimeout, Expired:
				if r.Outcome == LockTimeout && errors.Is(r.Cause, seam.ErrReadLocked) {
					// No lease holds it: not "busy", which
					// promises that waiting helps.
					nx.ReadLocked++
					blocked = true
					nx.Results = append(nx.Results, r)
					continue
				}
				nx.Held++
				if r.Record != nil {
					if t := r.Record.ExpiresAt + s.skew; nx.Expiring == 0 || t < nx.Expiring {
						nx.Expiring = t
					}
				}
			case Failed:
				nx.Failed++
				s.unqueueFailed(ctx, entry(r.ID), r.ID)
			case Done:
				nx.Cleaned++
				// The entry was found in this directory, even if
				// another program put it in the wrong one.
				if err := s.fs.Remove(entry(r.ID)); err == nil {
					s.stats.Dequeued.Add(1)
				}
			case IOError:
				if len(granted) > 0 {
					each(granted)
				}
				nx.Results = append(nx.Results, r)
				return false
			default:
				blocked = true
				nx.Results = append(nx.Results, r)
			}
		}
		if len(granted) > 0 && !each(granted) {
			stopped = true
		}
		return true
	}
	ioStop := func() Next {
		nx.Answer = Blocked
		if got > 0 {
			nx.Answer = Granted
		}
		return nx
	}
	// Abandoned first: the leases of held/ that may be over, oldest
	// first (held.go).
	if cands, next, err := s.heldCandidates(); err == nil {
		if next > 0 {
			nx.Expiring = next
		}
		nx.HeldRead = len(cands)
		seen := map[leasefmt.ID]bool{}
		for len(cands) > 0 && got < n && !stopped && ctx.Err() == nil {
			w := n - got
			if chunk > 0 {
				w = min(w, chunk)
			}
			var items []Item
			for len(cands) > 0 && len(items) < w {
				c := cands[0]
				cands = cands[1:]
				if seen[c.id] {
					continue // an older name of the item is tried
				}
				seen[c.id] = true
				if _, err := s.fs.Lstat(s.QueuePath(c.id)); err != nil {
					// Not queued (claimed by name, or finished): not
					// the queue's to hand out.
					s.dropFinishedHeld(ctx, c)
					continue
				}
				items = append(items, Item{ID: c.id, queued: true, held: c.name})
			}
			if len(items) > 0 && !try(items, s.QueuePath) {
				return ioStop()
			}
		}
	}
	for _, sh := range rnd.Perm(s.hdr.WorkShards) {
		if got >= n || stopped {
			break
		}
		if ctx.Err() != nil {
			stopped = true // the caller is done waiting: never "empty" then
			break
		}
		dirName := s.QueueShardDir(sh)
		d, err := seam.OpenDir(s.fs, dirName)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			nx.Results = append(nx.Results, Result{Outcome: IOError, Path: s.Abs(dirName),
				Detail: durable.Describe(err), Cause: &durable.OpError{Op: "read the queue", Path: s.Abs(dirName), Err: err}})
			return ioStop()
		}
		nx.Shards++
		entry := func(id leasefmt.ID) string { return dirName + "/" + string(id) }
		for read := firstChunk; got < n && !stopped; read = nextChunk {
			want := n - got
			if chunk > 0 {
				want = min(want, chunk)
			}
			names, err := d.ReadNames(max(read, want))
			if err == io.EOF {
				break
			}
			if err != nil {
				d.Close()
				nx.Results = append(nx.Results, Result{Outcome: IOError, Path: s.Abs(dirName),
					Detail: durable.Describe(err), Cause: &durable.OpError{Op: "read the queue", Path: s.Abs(dirName), Err: err}})
				return ioStop()
			}
			nx.Read += len(names)
			var cands []leasefmt.ID
			for _, name := range names {
				id, err := leasefmt.ParseID(name)
				if err != nil {
					if !leasefmt.IsNFSSillyRename(name) {
						nx.Foreign++
					}
					continue
				}
				cands = append(cands, id)
			}
			rnd.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
			for len(cands) > 0 && got < n && !stopped {
				w := min(n-got, len(cands))
				if chunk > 0 {
					w = min(w, chunk)
				}
				items := make([]Item, w)
				for i := range items {
					items[i] = Item{ID: cands[i], queued: true}
				}
				cands = cands[w:]
				if !try(items, entry) {
					d.Close()
					return ioStop()
				}
			}
		}
		d.Close()
	}
	switch {
	case got > 0:
		nx.Answer = Granted
	case nx.Held > 0, stopped:
		nx.Answer = Busy
	case blocked:
		nx.Answer = Blocked
	default:
		nx.Answer = Empty
	}
	return nx
}
