package commit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// Errors of Open and Create.
var (
	// ErrNoTable: the root holds no TABLE and the command does not create one.
	ErrNoTable = errors.New("no lease table")
	// ErrShardConflict: an explicit shard count differs from the table's.
	ErrShardConflict = errors.New("shard count conflicts with the table")
)

// Store is an open lease table and the lease operations over it. Its
// methods may be called from several goroutines at once. A Store is made
// by Open, configured by Open's options, and released by Close; At gives a
// view of the same table read at another clock.
type Store struct {
	*shared
	// clock is the time now in seconds since the epoch. Every operation
	// reads it while it holds the record's lock (docs/lease-format.md),
	// never once per batch, so input that arrives late cannot grant or
	// renew a lease that is already over.
	clock func() float64
}

// shared is what every view of one open table shares.
type shared struct {
	root    string
	fs      seam.FS
	owned   io.Closer // the FS Open opened (Close closes it), nil when given
	hdr     *leasefmt.Table
	sharing *seam.Sharing // TABLE's "shared", nil when not shared
	// lockWait bounds every lock wait (nanoseconds; Options.LockTimeout, and
	// the tests' setLockTimeout).
	lockWait  atomic.Int64
	pool      int     // the writer pool of a batch
	chunk     int     // the most items of a two-pass chunk (Options.SyncfsChunk)
	skew      float64 // the clock skew bound, in seconds
	retry     durable.Retry
	moreProcs func(writers int) (restore func())
	stats     Stats
	disk      *durable.Disk
	shardDirs [3]atomic.Pointer[[]string] // ShardDir's names by kind
	closeOnce sync.Once
	closeErr  error
}

// Options configure Open. The zero value opens an existing table through
// the kernel's filesystem at the root, with the defaults of defaults.go.
type Options struct {
	// FS opens the table over f instead of the kernel's filesystem at the
	// root (the crash-testing filesystems, a table in memory). Close does
	// not close it: its opener does.
	FS seam.FS
	// Wrap wraps the table's filesystem (a fault injector of a test, a
	// benchmark's commit strategy); capabilities its FS lacks are found
	// through its Unwrap (seam.As).
	Wrap func(seam.FS) seam.FS
	// Create makes the table, durably, with this header when the root
	// holds none (lease init); a concurrent creator's header wins. Without
	// it a root without TABLE is ErrNoTable.
	Create *leasefmt.Table
	// Share, with Create, shares the new table with the accounts of a
	// group (lease init --shared): TABLE records it as "shared", and the
	// root gets its modes (share.go).
	Share *seam.Sharing
	// Header opens the table with this header as it is, reading no TABLE
	// and applying none of its settings: for lease fsck, which reads (and
	// repairs) the header itself.
	Header *leasefmt.Table
	// LockTimeout bounds every lock wait: 0 is DefaultLockTimeout, a
	// negative value no wait at all (one try: a lock timeout of 0 s).
	LockTimeout time.Duration
	// Writers bounds the concurrent record writers of a batch: 0 is
	// DefaultWriters, 1 writes one record at a time.
	Writers int
	// Clock is the clock every decision reads under the record's lock, in
	// seconds since the epoch (nil: leasefmt.Now; lease --now: a fixed
	// one).
	Clock func() float64
	// ClockSkew bounds the clock difference between the nodes sharing the
	// table, in seconds: a claim takes over an expired lease only from
	// expires_at + skew, and a holder's lease counts as lost from
	// expires_at - skew (docs/lease-format.md). The zero value is no skew;
	// the command line and package leases give their setting,
	// DefaultClockSkew by default.
	ClockSkew float64
	// Sync says how a batch makes its records durable (nil: defaultSync;
	// durable.Auto: by syncfs(2) where the filesystem makes it a
	// whole-filesystem barrier, else per record; docs/design.md#durability).
	Sync *durable.Strategy
	// SyncfsChunk bounds the records of one two-pass chunk of a batch
	// under syncfs (0: DefaultSyncfsChunk; docs/design.md#durability).
	SyncfsChunk int
	// Retry bounds the retries of one record's step after a transient
	// error of a network filesystem (zero: durable.DefaultRetry).
	Retry durable.Retry
	// MoreProcs is called with the size of a batch's writer pool before
	// the batch and returns the function called after it: the command line
	// raises GOMAXPROCS there while writers block in fsync. The engine
	// itself never changes GOMAXPROCS.
	MoreProcs func(writers int) (restore func())
}

// defaultSync is the strategy of a store opened without Options.Sync, and
// of lease's sync setting: syncfs(2) where the filesystem makes it a
// whole-filesystem barrier and little dirty data waits, per record
// everywhere else (issue 41: the power cuts on ext4, XFS and btrfs and the
// benchmark against the no-fsync floor are in docs/performance.md).
const defaultSync = durable.Auto

// RootError is the error of Open when the table root itself cannot be
// opened (missing, not a directory, not readable).
type RootError struct {
	Root string
	Err  error
}

// Error names the root and the cause.
func (e *RootError) Error() string { return "table root " + e.Root + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *RootError) Unwrap() error { return e.Err }

// ShareRootError is the error of an Open that creates a shared table and
// cannot give the root the shared directory mode (a root another account
// owns); nothing was created.
type ShareRootError struct {
	Root string
	Err  error
}

// Error names the root and the cause.
func (e *ShareRootError) Error() string {
	return "share the table root " + e.Root + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *ShareRootError) Unwrap() error { return e.Err }

// Open opens the table at root: through the kernel's filesystem (seam.OS),
// which the Store owns and Close closes, unless o.FS gives another. When
// the root holds no TABLE it returns ErrNoTable, unless o.Create says to
// make the table (durably, see create; a shared one with a shared root).
func Open(root string, o Options) (*Store, error) {
	switch {
	case o.LockTimeout == 0:
		o.LockTimeout = DefaultLockTimeout
	case o.LockTimeout < 0:
		o.LockTimeout = 0
	}
	if o.Writers == 0 {
		o.Writers = DefaultWriters
	}
	if o.Retry == (durable.Retry{}) {
		o.Retry = durable.DefaultRetry
	}
	sync := defaultSync
	if o.Sync != nil {
		sync = *o.Sync
	}
	f := o.FS
	var owned io.Closer
	if f == nil {
		osfs, err := seam.OS(root)
		if err != nil {
			return nil, &RootError{Root: root, Err: err}
		}
		f, owned = osfs, osfs
	}
	if o.Wrap != nil {
		f = o.Wrap(f)
	}
	sh := &shared{root: root, fs: f, owned: owned, pool: max(o.Writers, 1), chunk: cmp.Or(max(o.SyncfsChunk, 0), DefaultSyncfsChunk), skew: o.ClockSkew, retry: o.Retry, moreProcs: o.MoreProcs}
	sh.lockWait.Store(int64(o.LockTimeout))
	sh.disk = durable.New(f, root, &sh.stats.Counts)
	sh.disk.SetStrategy(sync)
	s := &Store{shared: sh, clock: o.Clock}
	if o.Header != nil {
		sh.hdr = o.Header
		return s, nil
	}
	create := o.Create
	if create != nil && o.Share != nil {
		create = withSharing(create, *o.Share)
	}
	if err := s.open(create); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// open reads the header, making the table first with create when there is
// none, and applies its sharing.
func (s *Store) open(create *leasefmt.Table) error {
	t, err := s.readTable()
	if errors.Is(err, fs.ErrNotExist) && create != nil {
		if sh, ok, err := tableSharing(create); err != nil {
			return err
		} else if ok {
			if s.owned != nil {
				// A new table: its root is shared too, so that what is
				// made in it gets its group, and sticky, so that no
				// member renames another's entries of it.
				if err := seam.ShareRoot(s.fs, sh); err != nil {
					return &ShareRootError{Root: s.root, Err: err}
				}
			}
			if fi, err := s.fs.Lstat(""); err == nil {
				if mode, _, _, known := seam.Owner(fi); known {
					sh, _ = sh.Within(mode)
				}
			}
			seam.Share(s.fs, sh) // the table's own directories and files are shared too
		}
		if err := s.create(create); err != nil {
			return err
		}
		s.stats.FileSyncs.Store(0) // creating the table is not part of the caller's batch
		t, err = s.readTable()
	}
	if err != nil {
		return err
	}
	// Bounded by the root's mode: a member may have replaced TABLE.
	sh, ok, _, err := RootSharing(s.fs, t)
	if err != nil {
		return fmt.Errorf("table header %s: %w", filepath.Join(s.root, layout.TableFile), err)
	}
	if ok {
		seam.Share(s.fs, sh)
		s.sharing = &sh
	}
	s.hdr = t
	return nil
}

// Close releases the filesystem Open opened (its open directories and lock
// files, dropping the locks); a filesystem given by Options.FS is left open.
// The views of At share it: closing one closes them all.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.owned != nil {
			s.closeErr = s.owned.Close()
		}
	})
	return s.closeErr
}

// At returns a view of the table whose operations read the fixed clock
// now: lease --now, and tests. The view shares everything else.
func (s *Store) At(now float64) *Store { return &Store{shared: s.shared, clock: fixedClock(now)} }

// Root is the table's root directory.
func (s *Store) Root() string { return s.root }

// FS is the filesystem the table is read and written through.
func (s *Store) FS() seam.FS { return s.fs }

// Table is the table's header.
func (s *Store) Table() *leasefmt.Table { return s.hdr }

// Sharing is how the table is shared (TABLE's "shared"), nil when it is
// not.
func (s *Store) Sharing() *seam.Sharing { return s.sharing }

// Stats counts what the table's operations did.
func (s *Store) Stats() *Stats { return &s.stats }

// ClockSkew is the bound of Options.ClockSkew, in seconds.
func (s *Store) ClockSkew() float64 { return s.skew }

// lockTimeout is the bound of every lock wait.
func (s *Store) lockTimeout() time.Duration { return time.Duration(s.lockWait.Load()) }

// LockTimeout is the bound of every lock wait (Options.LockTimeout). It is
// fixed at Open: one call's wait is bounded by its context's deadline
// instead (a holder whose renewals must wait less than its claim did:
// keepalive.LockWait).
func (s *Store) LockTimeout() time.Duration { return s.lockTimeout() }

// Disk is the durability layer the table is written through.
func (s *Store) Disk() *durable.Disk { return s.disk }

// fixedClock returns a clock that always says t.
func fixedClock(t float64) func() float64 { return func() float64 { return t } }

// now reads the store's clock.
func (s *Store) now() float64 {
	if s.clock != nil {
		return s.clock()
	}
	return leasefmt.Now()
}

// Now is the store's clock: what an operation would read now.
func (s *Store) Now() float64 { return s.now() }

func (s *Store) readTable() (*leasefmt.Table, error) {
	data, err := s.fs.ReadFile(layout.TableFile, leasefmt.MaxRecordSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoTable, filepath.Join(s.root, layout.TableFile), fs.ErrNotExist)
	}
	if errors.Is(err, seam.ErrNotRegular) {
		return nil, fmt.Errorf("table header %s: %w: %w", filepath.Join(s.root, layout.TableFile), leasefmt.ErrCorrupt, err)
	}
	if err != nil {
		return nil, err
	}
	t, err := leasefmt.DecodeTable(data)
	if err != nil {
		return nil, fmt.Errorf("table header %s: %w", filepath.Join(s.root, layout.TableFile), err)
	}
	return t, nil
}

// CheckShards returns ErrShardConflict when an explicit shard count differs
// from the table's; 0 means not given.
func (s *Store) CheckShards(work, target int) error {
	return s.CheckShardsFrom(work, "work shards", target, "target shards")
}

// CheckShardsFrom is CheckShards with the origin of each count named in the
// error ("--shards", "LEASE_SHARDS", "lease.toml:3"), so that the conflict
// is reported where the count came from.
func (s *Store) CheckShardsFrom(work int, workFrom string, target int, targetFrom string) error {
	if work != 0 && work != s.hdr.WorkShards {
		return fmt.Errorf("%w: %d (%s), but %s has work_shards %d", ErrShardConflict, work, workFrom, filepath.Join(s.root, layout.TableFile), s.hdr.WorkShards)
	}
	if target != 0 && target != s.hdr.TargetShards {
		return fmt.Errorf("%w: %d (%s), but %s has target_shards %d", ErrShardConflict, target, targetFrom, filepath.Join(s.root, layout.TableFile), s.hdr.TargetShards)
	}
	return nil
}

// create makes the directories, the shard lock files and then, last, the
// TABLE header, so a TABLE that exists always describes a complete table.
// Concurrent creators agree: the header is moved in without replacing, and
// a loser uses the winner's header.
func (s *Store) create(t *leasefmt.Table) error {
	mk := func(name string) error {
		if err := s.fs.Mkdir(name); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return nil
	}
	var dirs []string
	for _, top := range []string{leasefmt.Work.Dir(), leasefmt.Target.Dir(), leasefmt.Group.Dir(), layout.StageDir, layout.PublicDir, layout.LostFound, layout.TallyDir} {
		if err := mk(top); err != nil {
			return err
		}
	}
	for _, k := range []leasefmt.Kind{leasefmt.Work, leasefmt.Target, leasefmt.Group} {
		n := t.Shards(k)
		for sh := 0; sh < n; sh++ {
			dir := path.Join(k.Dir(), leasefmt.ShardDirName(sh, n))
			if err := mk(dir); err != nil {
				return err
			}
			unlock, err := s.fs.Lock(context.Background(), path.Join(dir, layout.LockFile), 0, 0)
			if err == nil {
				unlock()
			} else if !errors.Is(err, ErrLockTimeout) {
				return err
			}
			dirs = append(dirs, dir)
		}
		dirs = append(dirs, k.Dir())
	}
	// A new table's tally holds every finished record: none.
	if f, err := s.fs.CreateExcl(layout.TrustedFile); err == nil {
		if err := f.Close(); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return err
	}
	dirs = append(dirs, layout.TallyDir, "")
	b := durable.NewSyncBatch(s.fs, nil)
	for _, d := range dirs {
		b.Mark(d)
	}
	if err := b.Flush(); err != nil {
		return err
	}
	data, err := leasefmt.EncodeTable(t)
	if err != nil {
		return err
	}
	tmp, err := s.Disk().WriteTemp("", layout.TableFile, data)
	if err != nil {
		return err
	}
	err = s.fs.RenameNoReplace(tmp, layout.TableFile)
	if errors.Is(err, fs.ErrExist) || errors.Is(err, os.ErrExist) {
		s.fs.Remove(tmp)
		return nil // another creator won; its header stands
	}
	if err != nil {
		s.fs.Remove(tmp)
		return err
	}
	return s.fs.SyncDir("")
}

// ShardDir is the table-relative directory of shard sh of kind k.
func (s *Store) ShardDir(k leasefmt.Kind, sh int) string {
	n := s.hdr.Shards(k)
	if k < 0 || int(k) >= len(s.shardDirs) || sh < 0 || sh >= n {
		return path.Join(k.Dir(), leasefmt.ShardDirName(sh, n))
	}
	c := s.shardDirs[k].Load()
	if c == nil || len(*c) != n {
		// Made once per kind (the names are asked for several times per
		// record); remade if the table's shard count was changed.
		dirs := make([]string, n)
		for i := range dirs {
			dirs[i] = s.hdr.ShardDir(k, i)
		}
		c = &dirs
		s.shardDirs[k].Store(c)
	}
	return (*c)[sh]
}

// RecordPath is the table-relative path of the record of id.
func (s *Store) RecordPath(k leasefmt.Kind, id leasefmt.ID) string {
	return s.ShardDir(k, id.Shard(s.hdr.Shards(k))) + "/" + id.FileName()
}

// Abs is the absolute path of a table-relative name, for messages.
func (s *Store) Abs(name string) string { return filepath.Join(s.root, filepath.FromSlash(name)) }

// MakeStage creates the staging directory of the holder of token of id,
// not durably, and returns its absolute path. It does not check the lease:
// whatever is staged there is published only while token is current.
//
// The directory belongs to its claimer (docs/safety.md): made fresh, and
// in a shared table with mode 0700 (and setgid) from the moment it exists,
// so that no other account can plant anything in it while the claimer's
// command writes there; the group gets its modes at publication. A name
// that exists already is reused only when it is this account's own
// directory that nobody else may write (a second call for the same
// lease); anything else there was made by someone else and is never
// reused: it is moved to lost+found/ and a fresh directory made, or, in a
// shared table, where stage/ is sticky and only its maker or root may move
// it, the claim's staging fails with an error saying so.
// ErrStageTaken: the staging directory's name was taken by another
// account (MakeStage). The lease is not at fault and neither is the item:
// a worker releases it and goes on (docs/safety.md#stage).
var ErrStageTaken = errors.New("the staging directory's name is taken by another account")

func (s *Store) MakeStage(id leasefmt.ID, token int64) (string, error) {
	dir := layout.StagePath(id, token)
	if err := s.disk.EnsureDir(layout.StageDir); err != nil {
		return "", err
	}
	mkdir := s.fs.Mkdir
	if maker, ok := seam.As[seam.PrivateDirMaker](s.fs); ok && s.sharing != nil {
		mkdir = maker.MkdirPrivate
	}
	for try := 0; ; try++ {
		err := mkdir(dir)
		if err == nil {
			// No fsync of stage/: a staging directory a crash loses
			// belonged to a holder the crash ended (a new claim gets a new
			// token, so a new directory), and a publish makes durable what
			// it moves (G1, G8); what a crash leaves in stage/ is lease
			// fsck's (docs/performance.md#budget).
			return s.Abs(dir), nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		fi, err := s.fs.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // removed meanwhile: made fresh
		case err != nil:
			return "", err
		case ownStage(fi, s.sharing != nil):
			return s.Abs(dir), nil
		}
		if try == 2 {
			return "", fmt.Errorf("%s: made again by another account each time it was moved aside; a staging directory is never reused: %w", s.Abs(dir), ErrStageTaken)
		}
		aside := path.Join(layout.LostFound, fmt.Sprintf("%s-%s.%d", layout.StageDir, path.Base(dir), time.Now().UnixNano()))
		if err := s.disk.EnsureDir(layout.LostFound); err != nil {
			return "", err
		}
		if err := s.disk.Move(dir, aside); errors.Is(err, fs.ErrPermission) && s.sharing != nil {
			// stage/ is sticky (seam.StickyDirs): only its maker or root
			// may move it; never reused all the same.
			return "", fmt.Errorf("%s exists, made by another account, and is never reused; stage/ is sticky, so only that account or root can move it away (root's lease fsck --repair does once the lease is over): %w: %w", s.Abs(dir), ErrStageTaken, err)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s exists, made by someone else, and is never reused; moving it to %s failed: %w", s.Abs(dir), s.Abs(aside), err)
		}
	}
}

// ownStage reports whether fi is a directory of this process's account
// (shared: one that no other account could have written in, no group or
// other write bit): a staging directory MakeStage made for the same lease
// before. An FS that tells no owner (a memory FS of the tests) is its
// process's.
func ownStage(fi fs.FileInfo, shared bool) bool {
	mode, uid, _, ok := seam.Owner(fi)
	return fi.IsDir() && (!ok || uid == os.Geteuid() && (!shared || mode&0o022 == 0))
}

// Lock takes the lock of the record of id (docs/lease-format.md, locks),
// waiting at most the lock timeout and no longer than ctx lasts (an error
// wrapping ErrLockTimeout, and ctx.Err() when ctx ended the wait).
func (s *Store) Lock(ctx context.Context, k leasefmt.Kind, id leasefmt.ID) (func(), error) {
	return s.lockFor(ctx, k, id, s.lockTimeout())
}

// lockFor is Lock waiting at most timeout (0: tried once).
func (s *Store) lockFor(ctx context.Context, k leasefmt.Kind, id leasefmt.ID, timeout time.Duration) (func(), error) {
	return s.disk.Lock(ctx, s.ShardDir(k, id.Shard(s.hdr.Shards(k)))+"/"+layout.LockFile, id.LockOffset(), timeout)
}

// Read reads and validates the record of id. It returns (nil, nil) when
// there is none; an error wrapping leasefmt.ErrCorrupt when a record exists
// but does not validate (a symbolic link or other non-regular file in its
// place included).
func (s *Store) Read(ctx context.Context, k leasefmt.Kind, id leasefmt.ID) (*leasefmt.Record, error) {
	r, _, err := s.readRaw(ctx, k, id)
	return r, err
}

// readRaw is Read that also returns the bytes read, so a failed group
// write can put them back exactly. A transient error (a read that failed
// after its open, ESTALE) is retried as s.retry says and, when the tries
// run out, returned as the I/O error it is: never as a missing record.
func (s *Store) readRaw(ctx context.Context, k leasefmt.Kind, id leasefmt.ID) (*leasefmt.Record, []byte, error) {
	name := s.RecordPath(k, id)
	for attempt := 1; ; attempt++ {
		r, data, err := s.readOnce(k, id, name)
		if !s.disk.Again(ctx, s.retry, attempt, name, err) {
			return r, data, err
		}
	}
}

// readOnce reads and validates the record of id at name once.
func (s *Store) readOnce(k leasefmt.Kind, id leasefmt.ID, name string) (*leasefmt.Record, []byte, error) {
	data, err := s.fs.ReadFile(name, leasefmt.MaxRecordSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if errors.Is(err, seam.ErrNotRegular) {
		return nil, nil, fmt.Errorf("%s: %w: not a regular file", s.Abs(name), leasefmt.ErrCorrupt)
	}
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		// A link or a file where the shard directory must be (err names it).
		return nil, nil, fmt.Errorf("%w: %w", leasefmt.ErrCorrupt, err)
	}
	if err != nil {
		return nil, nil, err
	}
	r, err := leasefmt.Decode(data, k, id)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.Abs(name), err)
	}
	return r, data, nil
}

// WriteOne durably replaces the record of rec.ID by rec on its own: temp,
// fsync, rename, directory fsync. The caller holds the record's lock.
func (s *Store) WriteOne(rec *leasefmt.Record) error {
	return s.writeAlone(rec, func(b *durable.SyncBatch, name string, data []byte) error {
		return s.Disk().Put(b, name, data, false)
	})
}

// writeAlone writes rec on its own through put (temp, fsync, rename) and
// gives a finished work record its status marker and its link in the
// tally; the record's shard directory and the tally's bucket are then
// fsynced together, concurrently, as in a batch's group commit
// (docs/design.md#tally).
func (s *Store) writeAlone(rec *leasefmt.Record, put func(b *durable.SyncBatch, name string, data []byte) error) error {
	data, err := leasefmt.Encode(rec)
	if err != nil {
		return err
	}
	b := s.Disk().Batch()
	if err := put(b, s.RecordPath(rec.Kind, rec.ID), data); err != nil {
		b.Flush()
		return err
	}
	if rec.Kind == leasefmt.Work && layout.Marked(rec.Status) {
		s.mark(rec)
		s.retally(nil, rec, batchSyncer(b))
	}
	return b.Flush()
}

// TopUpReserve makes spares in the table's reserve until it holds want of
// them (durable.Disk.TopUp): lease init for a new table, lease fsck
// --repair, and a batch that used the reserve. It returns how many it made;
// a full filesystem stops it without an error.
func (s *Store) TopUpReserve(want int) (int, error) { return s.disk.TopUp(want) }

// writeHeld is WriteOne for the holder's own change of its lease
// (heldWrite): through the reserve when the filesystem is full.
func (s *Store) writeHeld(rec *leasefmt.Record) error { return s.writeAlone(rec, s.Disk().PutHeld) }

// stageBytes writes data, the encoding of rec, to a temp file and moves it
// into place in batch b: over the record, or, with create, only where no
// record exists (durable.Disk.Put; ErrAppeared when one does).
func (s *Store) stageBytes(b *durable.SyncBatch, rec *leasefmt.Record, data []byte, create bool) error {
	return s.Disk().Put(b, s.RecordPath(rec.Kind, rec.ID), data, create)
}
