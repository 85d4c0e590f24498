package commit

// The engine of the group operations described in groups.go: the locks of
// a chunk, the decisions under them, the writes through the store's writer
// pool, and the restore when a write or a barrier fails (G9).

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

type lockKey struct {
	file string
	off  int64
}

// groupLocks holds the locks of one chunk, each byte once.
type groupLocks struct {
	ctx     context.Context
	s       *Store
	got     map[lockKey]error
	unlocks []func()
}

func (l *groupLocks) take(k leasefmt.Kind, id leasefmt.ID) error {
	key := lockKey{path.Join(l.s.ShardDir(k, id.Shard(l.s.hdr.Shards(k))), layout.LockFile), id.LockOffset()}
	if err, ok := l.got[key]; ok {
		return err
	}
	unlock, err := l.s.Lock(l.ctx, k, id)
	l.got[key] = err
	if err == nil {
		l.unlocks = append(l.unlocks, unlock)
	}
	return err
}

func (l *groupLocks) release() {
	for i := len(l.unlocks) - 1; i >= 0; i-- {
		l.unlocks[i]()
	}
	l.unlocks = nil
}

// recWrite is one record a group writes: its new bytes and, to restore,
// the bytes it replaces (nil when there was no record).
type recWrite struct {
	kind leasefmt.Kind
	id   leasefmt.ID
	data []byte
	prev []byte
}

// groupOp is one group of a call while it runs.
type groupOp struct {
	it       Item
	res      *GroupResult
	targets  []leasefmt.ID
	mraw     []byte             // the manifest's bytes as read, nil when none
	next     []*leasefmt.Record // decided records, the manifest last
	writes   []recWrite
	replaced []recWrite
	written  bool  // written and fsynced
	failure  error // why its chunk failed, when it did
	restore  error // why putting back what it replaced failed
	begun    time.Time
}

// targetRead is a target record read under its lock.
type targetRead struct {
	rec    *leasefmt.Record
	raw    []byte
	out    Outcome // OK: readable (rec nil when missing)
	detail string
}

// runGroups runs policy over the groups of items: the engine of group
// claims, renewals and releases described at the top of this file.
func (s *Store) runGroups(ctx context.Context, items []Item, pol groupPolicy) []GroupResult {
	s.stats.Batches.Add(1)
	res := make([]GroupResult, len(items))
	ops := make([]*groupOp, len(items))
	for i, it := range items {
		res[i] = GroupResult{Item: it, Path: s.Abs(s.RecordPath(leasefmt.Group, it.ID))}
		ops[i] = &groupOp{it: it, res: &res[i]}
	}
	sorted := slices.Clone(ops)
	slices.SortStableFunc(sorted, func(a, b *groupOp) int { return strings.Compare(string(a.it.ID), string(b.it.ID)) })
	var fatal error
	for pos := 0; pos < len(sorted) && fatal == nil; {
		pos, fatal = s.groupChunk(ctx, sorted, pos, pol)
	}
	for _, op := range ops {
		r := op.res
		switch {
		case op.written && fatal == nil && reportedLate(op.next[len(op.next)-1], s.now(), s.skew):
			m := op.next[len(op.next)-1]
			r.Manifest, r.Token = m, m.Token
			r.Outcome, r.Detail = Expired, fmt.Sprintf("written until %s, but that was over (clock_skew %gs) by the time the write was durable",
				formatTime(m.ExpiresAt), s.skew)
		case op.written && fatal == nil:
			r.Outcome, r.Detail = OK, ""
			r.Manifest = op.next[len(op.next)-1]
			r.Token = r.Manifest.Token
			s.stats.Renewals.Add(int64(len(op.writes)))
			s.stats.addLatency(r.Latency)
			continue
		case op.written:
			// An earlier chunk, durable; the call as a whole failed (G6).
			r.Outcome, r.Detail = IOError, "written durably, but a later part of the batch failed, so not reported: "+fatal.Error()
		case op.failure != nil:
			r.Outcome, r.Detail = IOError, "not written: "+op.failure.Error()
			switch {
			case len(op.replaced) == 0:
			case op.restore == nil:
				r.Detail += "; the records already replaced were restored"
			default:
				r.Detail += "; restoring the records already replaced failed (lease fsck repairs the group): " + op.restore.Error()
			}
		case r.Outcome == OK && fatal != nil:
			// Checked but not written, or never reached.
			r.Outcome, r.Detail = IOError, "not attempted: the batch stopped at an I/O error: "+fatal.Error()
		}
		s.count(r.Outcome)
	}
	return res
}

// groupChunk runs the groups sorted[pos:] until about groupChunkLocks locks
// are held, and returns where the next chunk starts and the I/O error that
// stops the call, if any. Every lock of the chunk is held until its
// directories are fsynced or its records restored.
func (s *Store) groupChunk(ctx context.Context, sorted []*groupOp, pos int, pol groupPolicy) (int, error) {
	c := &groupRun{ctx: ctx, s: s, pol: pol, locks: groupLocks{ctx: ctx, s: s, got: map[lockKey]error{}}}
	defer c.locks.release()
	pos = c.manifests(sorted, pos)
	c.targets()
	if todo := c.decide(); c.fatal == nil && len(todo) > 0 {
		c.write(todo)
	}
	return pos, c.fatal
}

// groupRun is one chunk of a group call while it runs.
type groupRun struct {
	ctx   context.Context
	s     *Store
	pol   groupPolicy
	locks groupLocks
	ops   []*groupOp
	reads map[leasefmt.ID]*targetRead
	mu    sync.Mutex
	fatal error // the I/O error that stops the call
}

// fail records the I/O error that stops the call, and the first error of
// op's group.
func (c *groupRun) fail(op *groupOp, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fatal == nil {
		c.fatal = err
	}
	if op != nil && op.failure == nil {
		op.failure = err
	}
}

func (c *groupRun) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fatal != nil
}

// manifests locks and reads the manifests of sorted[pos:], in ascending
// GID order, until the locks planned reach groupChunkLocks; it returns where
// it stopped.
func (c *groupRun) manifests(sorted []*groupOp, pos int) int {
	s, planned := c.s, 0
	for pos < len(sorted) && c.fatal == nil && (len(c.ops) == 0 || planned < groupChunkLocks) {
		op := sorted[pos]
		pos++
		c.ops = append(c.ops, op)
		planned++
		op.begun = time.Now()
		r := op.res
		var rr Result
		if err := c.locks.take(leasefmt.Group, op.it.ID); err != nil {
			c.fatal = s.lockFailed(err, &rr, "lock the group manifest")
			r.Outcome, r.Detail = rr.Outcome, rr.Detail
			continue
		}
		m, raw, err := s.readRaw(c.ctx, leasefmt.Group, op.it.ID)
		if err != nil {
			c.fatal = s.readFailed(err, &rr)
			r.Outcome, r.Detail = rr.Outcome, rr.Detail
			continue
		}
		r.Manifest = m
		if m != nil {
			r.Token, op.mraw = m.Token, raw
		}
		targets, out, detail := c.pol.manifest(op.it, m, s.now())
		r.Outcome, r.Detail = out, detail
		if out == OK {
			op.targets = targets
			planned += len(targets)
		}
	}
	return pos
}

// targets locks and reads the targets of the groups whose manifest passed,
// in ascending ID order, each lock byte once.
func (c *groupRun) targets() {
	var want []leasefmt.ID
	for _, op := range c.ops {
		if op.res.Outcome == OK && op.targets != nil {
			want = append(want, op.targets...)
		}
	}
	want = groups.Sorted(want)
	c.reads = make(map[leasefmt.ID]*targetRead, len(want))
	for _, id := range want {
		if c.fatal != nil {
			return
		}
		tr := &targetRead{}
		c.reads[id] = tr
		var rr Result
		if err := c.locks.take(leasefmt.Target, id); err != nil {
			c.fatal = c.s.lockFailed(err, &rr, "lock the target record")
			tr.out, tr.detail = rr.Outcome, rr.Detail
			continue
		}
		rec, raw, err := c.s.readRaw(c.ctx, leasefmt.Target, id)
		if err != nil {
			c.fatal = c.s.readFailed(err, &rr)
			tr.out, tr.detail = rr.Outcome, rr.Detail
			continue
		}
		tr.rec, tr.raw = rec, raw
	}
}

// decide makes the decision of every group whose manifest passed and
// encodes every record it writes, before the first write; it returns the
// groups to write.
func (c *groupRun) decide() []*groupOp {
	s := c.s
	claimed := map[leasefmt.ID]leasefmt.ID{}
	var todo []*groupOp
	for _, op := range c.ops {
		r := op.res
		if r.Outcome != OK || op.targets == nil || c.fatal != nil {
			continue // refused already, or reported as not attempted
		}
		ts := make([]*leasefmt.Record, len(op.targets))
		var issues []TargetIssue
		for i, id := range op.targets {
			tr := c.reads[id]
			if tr.out != OK {
				issues = append(issues, TargetIssue{Target: id, Outcome: tr.out, Detail: tr.detail})
			}
			ts[i] = tr.rec
		}
		out, detail := OK, ""
		var next []*leasefmt.Record
		if len(issues) == 0 {
			next, out, detail, issues = c.pol.next(op.it, r.Manifest, op.targets, ts, s.now())
		} else {
			out = worstIssue(issues)
			detail = fmt.Sprintf("%d of %d targets could not be checked; nothing written", len(issues), len(op.targets))
		}
		for _, id := range op.targets {
			if other, dup := claimed[id]; dup && out == OK {
				out, detail = Corrupt, fmt.Sprintf("target %s is also written by group %s in this call; nothing written", id, other)
			}
		}
		for i := range issues {
			issues[i].Path = s.Abs(s.RecordPath(leasefmt.Target, issues[i].Target))
		}
		r.Issues = issues
		if r.Outcome, r.Detail = out, detail; out != OK {
			continue
		}
		writes := make([]recWrite, 0, len(next))
		for i, rec := range next {
			data, err := leasefmt.Encode(rec)
			if err != nil {
				r.Outcome, r.Detail = Corrupt, fmt.Sprintf("cannot rewrite %s: %v", s.Abs(s.RecordPath(rec.Kind, rec.ID)), err)
				break
			}
			w := recWrite{kind: rec.Kind, id: rec.ID, data: data, prev: op.mraw}
			if i < len(op.targets) {
				w.prev = c.reads[rec.ID].raw
			}
			writes = append(writes, w)
		}
		if r.Outcome != OK {
			continue
		}
		for _, id := range op.targets {
			claimed[id] = op.it.ID
		}
		op.next, op.writes = next, writes
		todo = append(todo, op)
	}
	return todo
}

// write writes the records of the groups of todo. The temp files of every
// record of every group are written and fsynced by the pool of writers
// (G1); only when all of them are durable are they renamed, group by group,
// targets first and the manifest last, into one SyncBatch, whose
// directories are then fsynced once each (G4). A failure restores what was
// replaced.
func (c *groupRun) write(todo []*groupOp) {
	s := c.s
	type job struct {
		op  *groupOp
		w   recWrite
		tmp string
	}
	var jobs []*job
	for _, op := range todo {
		for _, w := range op.writes {
			jobs = append(jobs, &job{op: op, w: w})
		}
	}
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	s.parallel(order, func(i int) {
		j := jobs[i]
		if c.failed() {
			return
		}
		final := s.RecordPath(j.w.kind, j.w.id)
		tmp, err := s.Disk().WriteTemp(path.Dir(final), j.w.id.FileName(), j.w.data)
		if err != nil {
			c.fail(j.op, err)
			return
		}
		j.tmp = tmp
	})
	batch := s.Disk().GroupBatch(len(jobs))
	for _, j := range jobs {
		if j.tmp == "" {
			continue
		}
		if c.fatal == nil {
			move := batch.Replace
			if j.w.prev == nil {
				// Read as missing: created without replacing, so a
				// record another client made meanwhile (or this
				// client's cache hid) fails the group instead of
				// being destroyed.
				move = batch.Create
			}
			err := move(j.tmp, s.RecordPath(j.w.kind, j.w.id))
			if err == nil {
				j.op.replaced = append(j.op.replaced, j.w)
				continue
			}
			if j.w.prev == nil {
				err = durable.Appeared(err)
			}
			c.fail(j.op, err)
		}
		s.fs.Remove(j.tmp)
	}
	if c.fatal == nil {
		if err := batch.Flush(); err != nil {
			c.fail(nil, err)
		}
	}
	if c.fatal == nil {
		flushed := time.Now()
		for _, op := range todo {
			op.written = true
			op.res.Latency = flushed.Sub(op.begun)
		}
		return
	}
	s.restoreGroups(todo)
	for _, op := range todo {
		if op.failure == nil {
			op.failure = c.fatal
		}
	}
}

// writeGroupRecord writes w's temp file, fsyncs it and renames it over the
// record in batch b.
func (s *Store) writeGroupRecord(b *durable.SyncBatch, w recWrite) error {
	final := s.RecordPath(w.kind, w.id)
	tmp, err := s.Disk().WriteTemp(path.Dir(final), w.id.FileName(), w.data)
	if err != nil {
		return err
	}
	if err := b.Replace(tmp, final); err != nil {
		s.fs.Remove(tmp)
		return err
	}
	return nil
}

// restoreGroups puts back, in reverse order, every record the groups of ops
// replaced: the previous bytes durably, or the new file removed when there
// was none; then fsyncs each directory involved once. It is best effort:
// every record is tried, and each group keeps the first error it met.
func (s *Store) restoreGroups(ops []*groupOp) {
	rb := s.Disk().Batch()
	for _, op := range ops {
		for i := len(op.replaced) - 1; i >= 0; i-- {
			w := op.replaced[i]
			final := s.RecordPath(w.kind, w.id)
			rb.Mark(path.Dir(final))
			var err error
			if w.prev == nil {
				err = s.fs.Remove(final)
			} else {
				err = s.writeGroupRecord(rb, recWrite{kind: w.kind, id: w.id, data: w.prev})
			}
			if err != nil && op.restore == nil {
				op.restore = err
			}
		}
	}
	if err := rb.Flush(); err != nil {
		for _, op := range ops {
			if len(op.replaced) > 0 && op.restore == nil {
				op.restore = err
			}
		}
	}
}
