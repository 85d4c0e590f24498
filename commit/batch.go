package commit

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// Item is one input line of a batch: an ID and the token its caller holds
// (0 for a claim).
type Item struct {
	ID    leasefmt.ID
	Token int64
	// queued: the item was taken from the queue (ClaimNext), so its
	// first record needs no flag in the tally (tally.go) and no lookup
	// of its queue entry under the lock.
	queued bool
	// held: the item was taken from held/ by that name (held.go): its
	// lock is tried once, never waited for, and the name is renamed or
	// removed under the lock.
	held string
	// turn, in a two-pass chunk (twopass.go), is passed once the item's
	// lock was tried: the next item in the global order may take its own.
	turn *lockTurn
}

// Outcome is what happened to one item.
type Outcome int

// The outcomes, with the reason words of docs/design.md#cli.
const (
	OK Outcome = iota
	StaleToken
	Expired
	Held
	Done
	Released
	Missing
	Exists
	Corrupt
	LockTimeout
	IOError
	// Queued: lease add of an ID that is already queued (not added again).
	Queued
	// Failed: the item failed max_attempts times; claims refuse it until
	// lease retry puts it back.
	Failed
)

var reasons = [...]string{"ok", "stale-token", "expired", "held", "done", "released", "missing", "exists", "corrupt", "lock-timeout", "io-error", "queued", "failed"}

// Reason is the stable reason word printed on stderr.
func (o Outcome) Reason() string { return reasons[o] }

// The errors a failed Result wraps (Result.Err; errors.Is), one per
// outcome. ErrCorrupt is leasefmt.ErrCorrupt and ErrLockTimeout the error
// of the lock seam, so that a cause found deeper down matches too.
var (
	ErrStale    = errors.New("stale token")
	ErrExpired  = errors.New("lease expired")
	ErrHeld     = errors.New("held by another lease")
	ErrDone     = errors.New("work is done")
	ErrReleased = errors.New("lease released")
	ErrMissing  = errors.New("no record")
	ErrExists   = errors.New("already published")
	ErrCorrupt  = leasefmt.ErrCorrupt
	ErrIO       = errors.New("I/O error")
	ErrQueued   = errors.New("already queued")
	ErrFailed   = errors.New("work failed")
	// ErrLockTimeout is the lock seam's (seam.ErrLockTimeout).
	ErrLockTimeout = seam.ErrLockTimeout
)

// The causes of items that a failed batch did not finish (G5, G6): they
// wrap ErrIO and the error of the item that stopped the batch.
var (
	// ErrNotAttempted: the batch stopped at another item's I/O error
	// before this item was tried; nothing was written for it.
	ErrNotAttempted = errors.New("not attempted: the batch stopped at an I/O error")
	// ErrBatchFailed: this item was written, but the batch failed
	// afterwards (a directory fsync, another item), so it is not reported
	// as done (G6).
	ErrBatchFailed = errors.New("batch failed")
)

var outcomeErrs = [...]error{nil, ErrStale, ErrExpired, ErrHeld, ErrDone, ErrReleased, ErrMissing, ErrExists, ErrCorrupt, ErrLockTimeout, ErrIO, ErrQueued, ErrFailed}

// Graver reports whether o is a more serious outcome than p (docs/design.md#cli): an
// I/O error over a corrupt record over a lock timeout over a negative
// answer over success.
func (o Outcome) Graver(p Outcome) bool { return o.gravity() > p.gravity() }

func (o Outcome) gravity() int {
	switch o {
	case OK:
		return 0
	case LockTimeout:
		return 2
	case Corrupt:
		return 3
	case IOError:
		return 4
	}
	return 1
}

// Err is the error of outcome o, nil for OK.
func (o Outcome) Err() error { return outcomeErrs[o] }

// OutcomeOf is the outcome whose error err wraps, and false when none does.
func OutcomeOf(err error) (Outcome, bool) {
	for o := len(outcomeErrs) - 1; o > 0; o-- {
		if errors.Is(err, outcomeErrs[o]) {
			return Outcome(o), true
		}
	}
	return OK, err == nil
}

// itemError is the error of a Result that did not succeed: its item, the
// record's path, the outcome and the detail, wrapping the outcome's error
// and the cause.
type itemError struct {
	Item    Item
	Path    string
	Outcome Outcome
	Detail  string
	Cause   error
}

// Error names the item, its record and the cause.
func (e *itemError) Error() string {
	msg := e.Outcome.Reason() + " " + string(e.Item.ID)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Path != "" {
		msg += " (" + e.Path + ")"
	}
	return msg
}

// Unwrap gives the outcome's error and the cause.
func (e *itemError) Unwrap() []error { return []error{e.Outcome.Err(), e.Cause} }

// Result is the outcome of one item.
type Result struct {
	Item
	Outcome Outcome
	// Token is the token now held (OK) or the token found on disk.
	Token int64
	// Detail says more, for stderr.
	Detail string
	// Record is the record as written (OK) or as found.
	Record *leasefmt.Record
	// Path is the record's absolute path.
	Path string
	// Latency is how long the item took until its directory was fsynced.
	Latency time.Duration
	// Cause, for an item that did not succeed, is the underlying error
	// when there is one (an I/O error, or ErrNotAttempted or
	// ErrBatchFailed wrapping the error that stopped the batch).
	Cause error

	// settledWrite: a refused item whose abandoned publish was settled,
	// so its record was written all the same.
	settledWrite bool
}

// Err is nil when the item succeeded, else an *itemError wrapping the
// outcome's error (ErrStale, ErrExpired, ...) and the cause.
func (r Result) Err() error {
	if r.Outcome == OK {
		return nil
	}
	return &itemError{Item: r.Item, Path: r.Path, Outcome: r.Outcome, Detail: r.Detail, Cause: r.Cause}
}

// Derived reports whether r failed only because another item stopped its
// batch (ErrNotAttempted or ErrBatchFailed), not by an error of its own.
func (r Result) Derived() bool {
	return errors.Is(r.Cause, ErrNotAttempted) || errors.Is(r.Cause, ErrBatchFailed)
}

// Decide computes the next version of a record. It runs under the record's
// lock, after the record was read and validated, with now read from the
// store's clock under that lock; cur is nil when there is no record. An
// outcome other than OK writes nothing (G7); OK with a nil next is a
// success that needs no write (a retried complete).
type Decide func(it Item, cur *leasefmt.Record, now float64) (next *leasefmt.Record, out Outcome, detail string)

// settlePolicy says whether an abandoned publish met under the lock by item
// it is settled before deciding (see Store.settle); nil never settles.
type settlePolicy func(it Item, cur *leasefmt.Record, now float64) bool

// Apply runs decide over items as one group commit and returns the results
// in input order. Items are sorted by (shard, ID) and dealt round-robin
// over the shards to a pool of at most Options.Writers concurrent writers; each
// shard directory is fsynced once, as soon as its last record was renamed
// (G4), or, under the syncfs strategy (Options.Sync), the batch is written in
// two passes per chunk of Options.SyncfsChunk items, its locks taken in the
// global order: every temp file written under its lock, one syncfs, every
// rename, one syncfs standing for the directory fsyncs (twopass.go). An
// I/O error stops the batch:
// no new item starts, the directories already renamed into are still
// fsynced (G5), and no item is reported OK (G6).
//
// A lease written leased (a claim or a renewal) whose expires_at, less the
// clock skew, has passed by the time its directory is fsynced is reported
// Expired, not OK: nothing is reported granted or renewed that its holder
// could no longer count on (docs/design.md#clocks).
func (s *Store) Apply(ctx context.Context, k leasefmt.Kind, items []Item, decide Decide) []Result {
	return s.apply(ctx, k, items, decide, nil)
}

func (s *Store) apply(ctx context.Context, k leasefmt.Kind, items []Item, decide Decide, settle settlePolicy) []Result {
	s.stats.Batches.Add(1)
	if f, ok := seam.As[seam.IdleLockDropper](s.fs); ok {
		f.DropIdleLocks()
	}
	res := make([]Result, len(items))
	n := s.hdr.Shards(k)
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		ia, ib := items[order[a]].ID, items[order[b]].ID
		sa, sb := ia.Shard(n), ib.Shard(n)
		if sa != sb {
			return sa < sb
		}
		return ia < ib
	})
	sorted := append([]int(nil), order...) // the global lock order, for two passes
	if s.pool > 1 {
		// Deal the sorted records round-robin over the shards (each shard
		// still in ID order), so the writers work in K directories at once:
		// a create or rename holds its directory's lock for a whole round
		// trip on FUSE and NFS, and 64 writers in one directory queue on it.
		// Measured on FUSE with 2 ms latency: 3-3.5x faster at N=1024 and
		// 7.4x at N=16384; no change on ext4 (bench/results/matrix.md).
		turn := make([]int, len(items))
		seen := map[int]int{}
		for _, i := range order {
			sh := items[i].ID.Shard(n)
			turn[i] = seen[sh]
			seen[sh]++
		}
		sort.SliceStable(order, func(a, b int) bool { return turn[order[a]] < turn[order[b]] })
	}
	if err := s.prepare(k, items); err != nil {
		for i, it := range items {
			res[i] = Result{Item: it, Path: s.Abs(s.RecordPath(k, it.ID)), Outcome: IOError,
				Detail: "not attempted: " + durable.Describe(err), Cause: fmt.Errorf("%w: %w", ErrNotAttempted, err)}
			s.count(IOError)
		}
		return res
	}
	remaining := map[int]*atomic.Int32{}
	var left atomic.Int32
	left.Store(int32(len(items)))
	for _, it := range items {
		sh := it.ID.Shard(n)
		if remaining[sh] == nil {
			remaining[sh] = new(atomic.Int32)
		}
		remaining[sh].Add(1)
	}
	usedBefore, recycledBefore, unfitBefore := s.stats.SparesUsed.Load(), s.stats.SparesRecycled.Load(), s.stats.SparesUnfit.Load()
	var (
		batch    = s.Disk().GroupBatch(len(items))
		aborted  atomic.Bool
		errMu    sync.Mutex
		firstErr error
		firstAt  int = -1 // the item whose I/O error stopped the batch
		syncMu   sync.Mutex
		syncedAt = map[string]time.Time{}
		begun    = make([]time.Time, len(items))
	)
	fail := func(i int, err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr, firstAt = err, i
		}
		errMu.Unlock()
		aborted.Store(true)
		batch.Stop(err)
	}
	body := func(i int, batch *durable.SyncBatch, turn *lockTurn) {
		it := items[i]
		r := &res[i]
		r.Item, r.Path = it, s.Abs(s.RecordPath(k, it.ID))
		it.turn = turn
		defer s.stats.Attempted.Add(1)
		if aborted.Load() {
			r.Outcome = IOError // the detail names the cause below
			r.Detail = ""
			return
		}
		if ctx.Err() != nil {
			// The caller is done waiting: items not started are not
			// attempted, as a lock wait cut short (what was written is
			// still made durable and reported).
			r.Outcome, r.Cause = LockTimeout, seam.WaitEnded(ctx)
			r.Detail = "not attempted: " + r.Cause.Error()
			return
		}
		begun[i] = time.Now()
		if err := s.applyOne(ctx, k, it, decide, settle, batch, r); err != nil {
			fail(i, err)
		}
		dir := path.Dir(s.RecordPath(k, it.ID))
		// A shard's barrier goes as soon as its last record is renamed,
		// except the batch's last shard: Flush takes that one, concurrently
		// with the directories still pending (the tally's bucket), so a
		// batch of one shard waits for one round of directory fsyncs, not
		// two.
		last := left.Add(-1) == 0
		if remaining[it.ID.Shard(n)].Add(-1) == 0 && !last && !batch.Syncfs() && batch.Pending(dir) {
			if err := batch.SyncDir(dir); err != nil {
				fail(i, &durable.OpError{Op: "fsync the shard directory", Path: s.Abs(dir), Err: err})
			}
			syncMu.Lock()
			syncedAt[dir] = time.Now()
			syncMu.Unlock()
		}
	}
	if batch.Syncfs() {
		s.twoPass(sorted, items, batch, &aborted, body)
	} else {
		s.parallel(order, func(i int) { body(i, batch, nil) })
	}
	if err := batch.Flush(); err != nil {
		op := "fsync the shard directories"
		if batch.Syncfs() {
			op = "syncfs after the renames"
		}
		fail(-1, &durable.OpError{Op: op, Err: err})
	}
	if lost := (s.stats.SparesUsed.Load() - usedBefore) - (s.stats.SparesRecycled.Load() - recycledBefore) +
		(s.stats.SparesUnfit.Load() - unfitBefore); lost > 0 {
		// The batch used spares it could not recycle: make as many anew
		// if space allows by now (a full disk stops it at once).
		s.disk.AddSpares(int(lost))
	}
	flushed := time.Now()
	cause := ""
	if firstErr != nil {
		cause = firstErr.Error()
		if firstAt >= 0 {
			cause = fmt.Sprintf("%s (%s): %s", items[firstAt].ID, res[firstAt].Path, firstErr)
		}
	}
	if k == leasefmt.Work {
		s.unhold(res) // after the record writes, not durably
	}
	reported := s.now()
	for i := range res {
		switch r := &res[i]; {
		case r.Outcome == IOError && r.Detail == "":
			r.Detail = "not attempted: the batch stopped at an I/O error of " + cause
			r.Cause = fmt.Errorf("%w: %w", ErrNotAttempted, firstErr)
		case r.Outcome == IOError && errors.Is(r.Cause, durable.ErrBatchStopped) && i != firstAt:
			fate := "not renamed (its temp file was removed)"
			if oe := (*durable.OpError)(nil); errors.As(r.Cause, &oe) {
				fate = oe.Op // Put's: it says whether the temp file could be removed
			}
			r.Detail = "written but " + fate + ": the batch stopped at an I/O error of " + cause
			r.Cause = fmt.Errorf("%w: %w", ErrBatchFailed, firstErr)
		}
	}
	if firstErr != nil {
		FailBatch(res, firstErr, firstAt, "written, but the batch failed, so not reported: "+cause)
	}
	for i := range res {
		r := &res[i]
		switch {
		case r.Outcome == OK && reportedLate(r.Record, reported, s.skew):
			r.Outcome = Expired
			r.Detail = fmt.Sprintf("written until %s, but that was over (clock_skew %gs) by the time the write was durable at %s",
				formatTime(r.Record.ExpiresAt), s.skew, formatTime(reported))
		case r.Outcome == OK:
			t, ok := syncedAt[path.Dir(s.RecordPath(k, r.ID))]
			if !ok {
				t = flushed
			}
			r.Latency = t.Sub(begun[i])
			s.stats.addLatency(r.Latency)
		}
		s.count(r.Outcome)
	}
	return res
}

func (s *Store) count(o Outcome) {
	switch o {
	case OK:
		s.stats.Renewals.Add(1)
	case Corrupt, LockTimeout, IOError:
		s.stats.Failures.Add(1)
	default:
		s.stats.Lost.Add(1)
	}
}

// applyOnce locks, reads, decides and stages one item, once. It returns an
// error only for an I/O failure that must stop the batch, and whether that
// failure is one to try the item again for (a transient error of the lock
// or the write; the read retries on its own). try carries what an earlier
// try of the item wrote when its rename failed in a way that may still
// have taken effect.
func (s *Store) applyOnce(ctx context.Context, k leasefmt.Kind, it Item, decide Decide, settle settlePolicy, b *durable.SyncBatch, r *Result, try *itemTry) (error, bool) {
	timeout := s.lockTimeout()
	if it.held != "" {
		timeout = 0 // a busy lock is passed over: its holder is at work
	}
	unlock, err := s.lockFor(ctx, k, it.ID, timeout)
	it.turn.pass() // the next item of a two-pass chunk may lock now
	if err != nil {
		return s.lockFailed(err, r, "lock the record"), durable.Transient(err)
	}
	defer unlock()
	cur, raw, err := s.readRaw(ctx, k, it.ID)
	if err != nil {
		return s.readFailed(err, r), false
	}
	if try.landed(raw) {
		// The earlier try's rename reported an error but took effect:
		// the record is the one it wrote. Its directory still needs
		// its fsync before the item is reported.
		b.Mark(path.Dir(s.RecordPath(k, it.ID)))
		if k == leasefmt.Work {
			s.retally(nil, cur, batchSyncer(b))
		}
		r.Outcome, r.Detail, r.Record, r.Token = OK, try.detail, cur, cur.Token
		return nil, false
	}
	now := s.now()
	r.Record = cur
	if cur != nil {
		r.Token = cur.Token
	}
	var settled *leasefmt.Record
	settledHow := ""
	if settle != nil && cur != nil && abandonedPublish(cur) && settle(it, cur, now) {
		if settled, settledHow, err = s.settle(cur, now); err != nil {
			r.Outcome, r.Detail, r.Cause = IOError, durable.Describe(err), err
			return err, durable.Transient(err)
		}
		if settled.Status == leasefmt.Done {
			s.dropStage(cur.ID, cur.Token) // its result was moved out
		}
		cur = settled
	}
	next, out, detail := decide(it, cur, now)
	r.Outcome, r.Detail = out, detail
	if settled != nil && settledHow != "" {
		r.Detail = settledHow + "; " + detail
	}
	if k == leasefmt.Work && settled == nil && (next == nil || out != OK) && (out == OK || it.queued) {
		// Nothing to write: a complete retried after done, or a claim from
		// the queue of a finished item, whose entry the caller drops next.
		s.finishLeft(cur)
	}
	if out == OK && next == nil {
		return nil, false
	}
	if out != OK && k == leasefmt.Work {
		s.settleHeld(it, cur)
	}
	if out != OK {
		if settled == nil {
			return nil, false
		}
		next = settled // the settled record is written even when the claim is refused
		r.settledWrite = true
	}
	if k == leasefmt.Work && cur == nil && out == OK && !it.queued {
		s.flagUnqueued(it.ID, batchSyncer(b)) // before the record exists: see tally.go
	}
	data, err := leasefmt.Encode(next)
	if err == nil {
		// A record read as missing is created without replacing: if it
		// exists after all, it is read again instead of destroyed.
		switch {
		case cur != nil && heldWrite(cur, next):
			err = s.Disk().PutHeld(b, s.RecordPath(next.Kind, next.ID), data)
		default:
			err = s.stageBytes(b, next, data, cur == nil)
		}
	}
	if err != nil {
		if errors.Is(err, leasefmt.ErrCorrupt) {
			r.Outcome, r.Detail, r.Cause = Corrupt, "cannot rewrite: "+err.Error(), err
			return nil, false
		}
		r.Outcome, r.Detail, r.Cause = IOError, durable.Describe(err), err
		try.wrote(data, r.Detail, err)
		return err, durable.Transient(err)
	}
	r.Record, r.Token = next, next.Token
	if k == leasefmt.Work {
		if layout.Marked(next.Status) {
			s.mark(next) // still under the lock: ID.json is the file just renamed
		}
		if next.Status == leasefmt.Leased && (cur == nil || cur.Token != next.Token) {
			s.hold(it, next) // a claim: its name in held/, not durably
		}
		s.retally(cur, next, batchSyncer(b))
	}
	return nil, false
}

// batchSyncer has the tally's directories fsynced by batch b's group
// commit, with the shards'.
func batchSyncer(b *durable.SyncBatch) syncer {
	return func(dir string) error { b.Mark(dir); return nil }
}

// syncNow fsyncs dir at once: the tally's directory for a change that must
// be durable before the write that follows it (lease retry's unlink).
func (s *Store) syncNow(dir string) error {
	if err := s.fs.SyncDir(dir); err != nil {
		return err
	}
	s.stats.DirectorySyncs.Add(1)
	return nil
}

// heldWrite reports whether writing next over cur is the holder's own
// change of its lease (a renewal, a release, a complete, a failed run's
// release): the token stays and cur is leased or committing. Those writes
// may use the table's reserve on a full filesystem, so that no live lease
// is lost to a full disk (docs/design.md#durability); a claim, which takes
// a new token, never does.
func heldWrite(cur, next *leasefmt.Record) bool {
	return next.Token == cur.Token && (cur.Status == leasefmt.Leased || cur.Status == leasefmt.Committing)
}

func (s *Store) lockFailed(err error, r *Result, op string) error {
	switch {
	case errors.Is(err, seam.ErrReadLocked):
		// Not waited for: no lease holds it (see seam.ReadLockFinder).
		r.Outcome, r.Detail, r.Cause = LockTimeout, op+": "+err.Error(), err
		return nil
	case errors.Is(err, ErrLockTimeout) && errors.Is(err, context.DeadlineExceeded):
		r.Outcome, r.Detail, r.Cause = LockTimeout, op+": not granted by the caller's deadline (another process holds it)", err
		return nil
	case errors.Is(err, ErrLockTimeout) && errors.Is(err, context.Canceled):
		r.Outcome, r.Detail, r.Cause = LockTimeout, op+": not granted: the caller stopped waiting", err
		return nil
	case errors.Is(err, ErrLockTimeout):
		r.Outcome, r.Detail, r.Cause = LockTimeout, fmt.Sprintf("%s: not granted within %v (another process holds it)", op, s.lockTimeout()), err
		return nil
	case errors.Is(err, seam.ErrNotRegular), errors.Is(err, unix.ENOTDIR):
		r.Outcome, r.Detail, r.Cause = Corrupt, err.Error(), err
		return nil
	}
	oe := &durable.OpError{Op: "cannot " + op, Err: err}
	r.Outcome, r.Detail, r.Cause = IOError, oe.Error(), oe
	return oe
}

func (s *Store) readFailed(err error, r *Result) error {
	if errors.Is(err, leasefmt.ErrCorrupt) {
		r.Outcome, r.Detail, r.Cause = Corrupt, err.Error(), err
		return nil
	}
	oe := &durable.OpError{Op: "cannot read the record", Err: err}
	r.Outcome, r.Detail, r.Cause = IOError, oe.Error(), oe
	return oe
}

// prepare makes sure, before anything of a batch is written, that this
// process may use every shard the batch touches: the shard directory
// exists (made if missing) and its lock file opens for writing. The lock
// files are opened once per batch anyway; opening them first costs
// nothing more, and a table this process may not write (another
// account's, or on a read-only filesystem) fails the whole batch with an
// *AccessError before the first write, not halfway through it.
func (s *Store) prepare(k leasefmt.Kind, items []Item) error {
	p, ok := seam.As[seam.LockPreparer](s.fs)
	if !ok {
		return nil
	}
	n := s.hdr.Shards(k)
	seen := map[int]bool{}
	var shards []int
	for _, it := range items {
		if sh := it.ID.Shard(n); !seen[sh] {
			seen[sh] = true
			shards = append(shards, sh)
		}
	}
	// The shards at once, as the writers would open them: on NFS and FUSE
	// each open is a round trip.
	errs := make([]error, len(shards))
	idx := make([]int, len(shards))
	for i := range idx {
		idx[i] = i
	}
	s.parallel(idx, func(i int) {
		dir := s.ShardDir(k, shards[i])
		// Something planted where the directory or its lock file must be
		// (a link, a file) is left for the records of the shard to report
		// as corrupt.
		planted := func(err error) bool {
			return errors.Is(err, seam.ErrNotRegular) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
		}
		if err := s.disk.EnsureDir(dir); err != nil {
			if !planted(err) {
				errs[i] = prepareError(s.Abs(dir), "cannot make the shard directory", err)
			}
			return
		}
		lock := path.Join(dir, layout.LockFile)
		if err := p.PrepareLock(lock); err != nil && !planted(err) {
			errs[i] = prepareError(s.Abs(lock), "cannot open the shard's lock file", err)
		}
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// prepareError is the error of a batch that could not start at path: an
// *AccessError when this process may not use it, else an *OpError.
func prepareError(path, op string, err error) error {
	if accessDenied(err) {
		return &AccessError{Path: path, Err: bareErrno(err)}
	}
	return &durable.OpError{Op: op, Path: path, Err: durable.Bare(err)}
}

// bareErrno is the errno under err, or err.
func bareErrno(err error) error {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}
