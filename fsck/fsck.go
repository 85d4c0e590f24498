// Package fsck checks a lease table and repairs it: the checker behind
// `lease fsck` (docs/design.md#cli; fsck(8) exit codes).
//
// Check runs phases in a fixed order and streams typed findings (*Finding,
// one Kind each) to a callback as it goes:
//
//  1. header: TABLE is read and validated; when it is missing or bad the
//     shard counts are read from the shard directories;
//  2. layout: the top-level directories (lost+found/ first, since repairs
//     move things into it), stray .TABLE.tmp.* files, unknown files; in
//     a table shared by a group, the modes and group of its directories
//     and lock files (perms.go);
//  3. records: every shard directory of work/, then targets/, then groups/,
//     scanned by a pool of workers and reported in shard order; each entry
//     is a record, the shard's .lock, a stray temp file or something
//     unknown; live group manifests are checked against their targets;
//  4. publish: abandoned publishes settled (rolled forward or back), stage/
//     against the current leases, public/ against the records that name
//     its results (see publish.go);
//  5. queue: the entries of queue/ (see queue.go);
//  6. input: the stored contents of input/, each hashed (see input.go).
//
// A read-only run changes nothing: it takes record locks only on lock files
// that exist (to tell a stray temp file from one a live writer holds, and to
// re-check a group under its locks) and never writes. A repair run fixes
// each error under the same locks, with the same durable primitives, as the
// normal commands, re-reading and re-validating under the lock first, so it
// can run while workers renew and claim. Findings stream; records do not
// accumulate (only committing records that name a published result are
// kept for the publish phase).
package fsck

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
	"golang.org/x/sys/unix"
)

// Options select what Check does.
type Options struct {
	// Repair fixes what can be fixed; without it nothing is written.
	Repair bool
	// Now is the clock for expiry and for the times repairs write.
	Now float64
	// ClockSkew is the clock_skew of the table's nodes (docs/design.md#clocks): an
	// abandoned publish is rolled back only from expires_at + ClockSkew,
	// when a claimer could take the record over.
	ClockSkew float64
	// LockTimeout bounds every record lock wait (default 10 s).
	LockTimeout time.Duration
	// Shards restricts the record scan to these shard directories: "SS"
	// (that shard of every kind) or "KIND/SS" with KIND work, targets or
	// groups. Empty means all.
	Shards []string
	// WorkShards and TargetShards, when not 0, are shard counts given
	// explicitly: they must agree with TABLE, and they are used to rewrite a
	// missing or bad TABLE instead of the counts read from the directories.
	WorkShards, TargetShards int
	// Workers is the number of shard directories scanned at once
	// (default 8).
	Workers int
	// Spares is the number of spares a repair tops an existing reserve up
	// to (0: durable.DefaultSpares; negative: none).
	Spares int
	// Progress, when set, is called after each shard directory with the
	// directories done, their total and the records checked so far.
	Progress func(done, total, records int)
}

// Errors of Check that are not findings.
var (
	// ErrNoTable: the root holds neither a TABLE nor any record directory.
	ErrNoTable = errors.New("not a lease table")
	// ErrUsage: a SHARD argument or an explicit shard count is wrong.
	ErrUsage = errors.New("usage")
	// ErrRepairRunning: another repair held the repair lock for longer
	// than LockTimeout.
	ErrRepairRunning = errors.New("another lease fsck --repair is running on this table")
)

// RepairLockOffset is the byte of work shard 0's lock file that a repair
// holds from its start to its end (docs/lease-format.md, Locks): 2^60,
// beyond the byte of every record (int(ID[0:15], 16) < 2^60), so it
// excludes other repairs and nothing else. Two repairs at once would each
// move what the other is checking (a staging directory, a queue entry)
// and report the vanished name as damage; the second waits instead.
const RepairLockOffset int64 = 1 << 60

// checker is one run of Check.
type checker struct {
	// ctx bounds the check's lock waits and retries (a repair's locks).
	ctx context.Context
	fs  seam.FS
	// disk writes through fs durably from the start; st, the table's
	// store, exists once the header is known (run).
	disk   *durable.Disk
	st     *commit.Store
	opt    Options
	sum    *Summary
	report func(*Finding)

	// unlockRepair releases the repair lock; nil while it is not held.
	unlockRepair func()

	mu         sync.Mutex
	committing []committingRec
	// public holds the names of the results in public/, true once a done
	// or committing record names it (see listPublic).
	public map[string]bool
	// movedHome holds the homes misplaced records were moved to by this
	// run (under mu): checked where they were found, they are not checked
	// again when their home's listing comes after the move.
	movedHome map[string]bool
	records   atomic.Int64
	// marked counts the status markers a repair made (markRecord).
	marked atomic.Int64
	// tallyTrusted: the tally was trusted when the check began;
	// tallyPending: this repair made TRUSTED.pending; tallyLeft counts the
	// tally's findings left unrepaired, tallied the links and flags a
	// repair made quietly (tally.go).
	tallyTrusted, tallyPending bool
	tallyLeft, tallied         atomic.Int64
	// partial is set once any part of the check failed (an io finding):
	// what was not read cannot vouch for a result, so no orphans then.
	partial atomic.Bool
	// silly collects the NFS silly-rename files the listings met
	// (readDirSorted), reported after the check (reportSilly).
	silly *sillyFiles
}

// committingRec is a committing work record that names a published result.
type committingRec struct {
	id      leasefmt.ID
	token   int64
	publish string
	expires float64
}

// Check checks the table at root through fsys and calls report with every
// finding, in a stable order, after any repair of it was made. The error is
// ErrNoTable, ErrUsage or an I/O error that stopped the check; I/O errors
// that only stop part of it are KindIO findings.
func Check(ctx context.Context, root string, fsys seam.FS, opt Options, report func(*Finding)) (*Summary, error) {
	if opt.LockTimeout <= 0 {
		opt.LockTimeout = commit.DefaultLockTimeout
	}
	if opt.Workers < 1 {
		opt.Workers = 8
	}
	c := &checker{
		ctx:    ctx,
		fs:     fsys,
		disk:   durable.New(fsys, root, &durable.Counts{}),
		opt:    opt,
		sum:    newSummary(opt.Repair),
		report: report,
		silly:  &sillyFiles{},
	}
	err := c.run()
	if c.unlockRepair != nil {
		c.unlockRepair()
	}
	c.reportSilly()
	if err != nil {
		return c.sum, err
	}
	return c.sum, nil
}

func (c *checker) emit(f *Finding) {
	if f == nil || f.gone {
		return
	}
	if f.Kind == KindIO {
		c.partial.Store(true)
	}
	c.sum.add(f)
	c.report(f)
}

func (c *checker) ioFinding(rel string, what string, err error) *Finding {
	return &Finding{Kind: KindIO, Path: rel, Found: what + ": " + err.Error(), Err: err}
}

// listFailed is the finding about a directory that could not be listed:
// none when it is gone. Workers remove and rename names while a check
// runs (a staging directory emptied by a publish and removed by its lease
// run, a temp file renamed over its record), and a name that vanished
// since its parent was listed is not damage: whatever replaced it is
// checked by the next run. On NFS a directory another client removed
// after the parent was listed answers ESTALE rather than ENOENT (the
// client still held its handle): that is the same vanished name when a
// fresh lookup finds nothing there; any other ESTALE stays an io finding.
func (c *checker) listFailed(rel string, what string, err error) *Finding {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if errors.Is(err, unix.ESTALE) {
		if r, ok := seam.As[seam.Refresher](c.fs); ok {
			r.Refresh(rel)
		}
		if c.vanished(rel) {
			return nil
		}
	}
	return c.ioFinding(rel, what, err)
}

func (c *checker) run() error {
	hdr, err := c.readHeader()
	if err != nil {
		return err
	}
	if hdr.table != nil {
		if err := c.checkExplicit(hdr.table); err != nil {
			return err
		}
	}
	tasks, err := c.selectShards(hdr.tableOrInferred())
	if err != nil {
		return err
	}
	// The repair lock, before anything is changed; where the layout keeps
	// its lock file from being made (work/ is not a directory), after the
	// layout was repaired.
	layoutFirst, err := c.lockRepair(hdr.tableOrInferred())
	if err != nil {
		return err
	}
	c.checkLostFound()
	c.emit(c.fixHeader(hdr))
	t := hdr.tableOrInferred()
	c.sum.Table = t
	c.checkTop()
	c.checkReserve()
	if t == nil {
		return nil // the shard counts are unknown: records cannot be checked
	}
	c.checkPerms(t)
	c.checkReadLocks(t)
	// The store of the records' operations (locks, reads, settling
	// publishes, rewrites), over the header as checked (or inferred).
	if c.st, err = commit.Open(c.disk.Abs(""), commit.Options{FS: c.fs, Header: t, LockTimeout: c.opt.LockTimeout, Writers: 1, Clock: func() float64 { return c.opt.Now }, ClockSkew: c.opt.ClockSkew}); err != nil {
		return err
	}
	if tasks == nil {
		tasks = c.checkKindDirs()
	}
	if layoutFirst {
		if _, err := c.lockRepair(t); err != nil {
			return err
		}
	}
	c.beginTally()
	c.listPublic()
	c.scanRecords(tasks)
	c.sum.Marked = int(c.marked.Load())
	c.checkPublish()
	c.checkQueue(tasks)
	c.checkHeld()
	c.checkInput(tasks)
	c.checkTally()
	c.endTally()
	return nil
}

// lockRepair takes the repair lock on a repair run (RepairLockOffset of
// work shard 0's lock file, made durably if missing), waiting up to
// LockTimeout. It reports later when the lock file cannot be made for the
// table's layout (work/ or its shard 0 is not a directory: the layout
// repair fixes that), and does nothing when the shard counts are unknown
// (there are no records to repair) or the lock is already held.
func (c *checker) lockRepair(t *leasefmt.Table) (later bool, err error) {
	if !c.opt.Repair || t == nil || c.unlockRepair != nil {
		return false, nil
	}
	dir := path.Join(leasefmt.Work.Dir(), leasefmt.ShardDirName(0, t.WorkShards))
	lf := path.Join(dir, layout.LockFile)
	if err := c.disk.EnsureDir(dir); err != nil {
		if errors.Is(err, seam.ErrNotRegular) || errors.Is(err, fs.ErrPermission) {
			return true, nil
		}
		return false, fmt.Errorf("the repair lock %s: %w", c.disk.Abs(lf), err)
	}
	unlock, err := c.fs.Lock(c.ctx, lf, RepairLockOffset, c.opt.LockTimeout)
	switch {
	case errors.Is(err, commit.ErrLockTimeout):
		return false, fmt.Errorf("%w: it holds the repair lock (byte 2^60 of %s), still held after %s (--lock-timeout); run the repair again once it is done",
			ErrRepairRunning, c.disk.Abs(lf), c.opt.LockTimeout)
	case errors.Is(err, seam.ErrNotRegular), errors.Is(err, fs.ErrPermission):
		// The lock file is not a regular file, or its mode keeps this
		// account out (a shared table whose modes went wrong): the scan
		// and the mode checks report and repair that; the repair runs
		// without the lock when they cannot.
		return true, nil
	case err != nil:
		return false, fmt.Errorf("the repair lock %s: %w", c.disk.Abs(lf), err)
	}
	c.unlockRepair = unlock
	return false, nil
}

func (c *checker) checkExplicit(t *leasefmt.Table) error {
	if c.opt.WorkShards != 0 && c.opt.WorkShards != t.WorkShards {
		return fmt.Errorf("%w: --shards %d, but TABLE has work_shards %d", ErrUsage, c.opt.WorkShards, t.WorkShards)
	}
	if c.opt.TargetShards != 0 && c.opt.TargetShards != t.TargetShards {
		return fmt.Errorf("%w: --target-shards %d, but TABLE has target_shards %d", ErrUsage, c.opt.TargetShards, t.TargetShards)
	}
	return nil
}

// task is one directory of records to scan.
type task struct {
	kind leasefmt.Kind
	dir  string
	// shard is the shard the directory holds, -1 for a directory that is
	// not a shard directory (every valid record in it is misplaced).
	shard int
}

var kinds = []leasefmt.Kind{leasefmt.Work, leasefmt.Target, leasefmt.Group}

// selectShards resolves the SHARD arguments; nil means every shard (the
// directories are listed by checkKindDirs).
func (c *checker) selectShards(t *leasefmt.Table) ([]task, error) {
	if len(c.opt.Shards) == 0 {
		return nil, nil
	}
	if t == nil {
		return nil, fmt.Errorf("%w: SHARD arguments need the shard counts, and TABLE is missing or bad (check the whole table)", ErrUsage)
	}
	seen := map[string]bool{}
	var out []task
	for _, arg := range c.opt.Shards {
		n := 0
		for _, k := range kinds {
			name := arg
			if i := strings.IndexByte(arg, '/'); i >= 0 {
				if arg[:i] != k.Dir() {
					continue
				}
				name = arg[i+1:]
			}
			sh, ok := leasefmt.ParseShardDirName(name, t.Shards(k))
			if !ok {
				continue
			}
			n++
			dir := path.Join(k.Dir(), name)
			if !seen[dir] {
				seen[dir] = true
				out = append(out, task{kind: k, dir: dir, shard: sh})
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: SHARD %s is not a shard directory of this table (SS or KIND/SS, KIND one of work, targets, groups; %d work and %d target shards)",
				ErrUsage, leasefmt.Quote(arg), t.WorkShards, t.TargetShards)
		}
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].kind != out[b].kind {
			return out[a].kind < out[b].kind
		}
		return out[a].dir < out[b].dir
	})
	return out, nil
}

// readDirSorted lists dir by name, without its NFS silly-rename files
// (leasefmt.IsNFSSillyRename), which it keeps for reportSilly: every
// directory fsck lists passes them over in this one place, so that no
// check takes one for a record, a temp file or damage, and no repair
// moves or removes one (it may be open, and its client removes it when
// it is closed).
func (c *checker) readDirSorted(dir string) ([]fs.DirEntry, error) {
	ents, _, err := c.readDirSilly(dir)
	return ents, err
}

// readDirSilly is readDirSorted that also says how many NFS silly-rename
// files it passed over.
func (c *checker) readDirSilly(dir string) ([]fs.DirEntry, int, error) {
	ents, err := c.fs.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	kept := ents[:0]
	for _, e := range ents {
		if e.Type().IsRegular() && leasefmt.IsNFSSillyRename(e.Name()) {
			c.silly.add(path.Join(dir, e.Name()))
			continue
		}
		kept = append(kept, e)
	}
	silly := len(ents) - len(kept)
	ents = kept
	sort.Slice(ents, func(a, b int) bool { return ents[a].Name() < ents[b].Name() })
	return ents, silly, nil
}

// sillyFiles are the NFS silly-rename files the listings of a check met
// (by the workers of the scan too).
type sillyFiles struct {
	mu    sync.Mutex
	paths []string
}

func (s *sillyFiles) add(rel string) {
	s.mu.Lock()
	s.paths = append(s.paths, rel)
	s.mu.Unlock()
}

// reportSilly reports the NFS silly-rename files met, by name, each once:
// notices, left alone by a repair.
func (c *checker) reportSilly() {
	paths := c.silly.paths
	sort.Strings(paths)
	for i, p := range paths {
		if i > 0 && paths[i-1] == p {
			continue
		}
		c.emit(&Finding{Kind: KindNFSSillyRename, Path: p,
			Found: "an NFS silly-rename file (removed while open; the client deletes it on close)"})
	}
}
