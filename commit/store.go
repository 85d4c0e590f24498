package commit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
)

// Top-level names of a table (SPEC §2).
const (
	TableFile = "TABLE"
	StageDir  = "stage"
	PublicDir = "public"
	LostFound = "lost+found"
	LockFile  = ".lock"
)

// Errors of Open and Create.
var (
	// ErrNoTable: the root holds no TABLE and the command does not create one.
	ErrNoTable = errors.New("no lease table")
	// ErrShardConflict: an explicit shard count differs from the table's.
	ErrShardConflict = errors.New("shard count conflicts with the table")
)

// Store is an open lease table.
type Store struct {
	Root  string
	FS    seam.FS
	Table *leasefmt.Table
	// LockTimeout bounds every lock wait.
	LockTimeout time.Duration
	// Writers bounds the concurrent record writers of a batch.
	Writers int
	// MoreProcs, when set, is called with the size of a batch's writer pool
	// before the batch and returns the function called after it: the
	// command line raises GOMAXPROCS there while writers block in fsync.
	// The library itself never changes GOMAXPROCS.
	MoreProcs func(writers int) (restore func())
	// Clock is the time now in seconds since the epoch. Every operation
	// reads it while it holds the record's lock (SPEC §6), never once per
	// batch, so input that arrives late cannot grant or renew a lease
	// that is already over. Nil means SystemClock.
	Clock func() float64
	// ClockSkew bounds the clock difference between the nodes sharing the
	// table, in seconds (SPEC §6): a claim takes over an expired lease
	// only from expires_at + ClockSkew, and a holder's lease counts as
	// lost from expires_at - ClockSkew.
	ClockSkew float64
	// Retry bounds the retries of one record's step after a transient
	// error of a network filesystem (see Retry); zero means DefaultRetry.
	Retry durable.Retry
	// Stats counts what the store did.
	Stats Stats
	// Sharing is how the table is shared (TABLE's "shared"), nil when it
	// is not.
	Sharing *seam.Sharing

	diskOnce  sync.Once
	disk      *durable.Disk
	shardDirs [3]atomic.Pointer[[]string] // ShardDir's names by kind
}

// Disk is the durability layer the store writes through.
func (s *Store) Disk() *durable.Disk {
	s.diskOnce.Do(func() { s.disk = durable.New(s.FS, s.Root, &s.Stats.Counts) })
	return s.disk
}

// SystemClock is the system's clock in seconds since the epoch, with the
// microsecond precision records are written with.
func SystemClock() float64 { return float64(time.Now().UnixMicro()) / 1e6 }

// FixedClock returns a clock that always says t (lease --now).
func FixedClock(t float64) func() float64 { return func() float64 { return t } }

// now reads the store's clock.
func (s *Store) now() float64 {
	if s.Clock != nil {
		return s.Clock()
	}
	return SystemClock()
}

// Now is the store's clock: what an operation would read now.
func (s *Store) Now() float64 { return s.now() }

// DefaultWriters is the default size of a batch's writer pool. Measured on
// journaled ext4: 64 writers merge file fsyncs into few journal commits.
const DefaultWriters = 64

// Open opens the table at root through f. When the root holds no TABLE and
// create is nil, it returns ErrNoTable; with create it makes the table
// durably (see create); a concurrent creator's header wins.
func Open(root string, f seam.FS, create *leasefmt.Table) (*Store, error) {
	s := &Store{Root: root, FS: f, LockTimeout: 10 * time.Second, Writers: DefaultWriters, Retry: durable.DefaultRetry}
	t, err := s.readTable()
	if errors.Is(err, fs.ErrNotExist) && create != nil {
		if sh, ok, err := TableSharing(create); err != nil {
			return nil, err
		} else if ok {
			seam.Share(f, sh) // the table's own directories and files are shared too
		}
		if err := s.create(create); err != nil {
			return nil, err
		}
		s.Stats.FileSyncs.Store(0) // creating the table is not part of the caller's batch
		t, err = s.readTable()
	}
	if err != nil {
		return nil, err
	}
	sh, ok, err := TableSharing(t)
	if err != nil {
		return nil, fmt.Errorf("table header %s: %w", filepath.Join(s.Root, TableFile), err)
	}
	if ok {
		seam.Share(f, sh)
		s.Sharing = &sh
	}
	s.Table = t
	return s, nil
}

func (s *Store) readTable() (*leasefmt.Table, error) {
	data, err := s.FS.ReadFile(TableFile, leasefmt.MaxRecordSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoTable, filepath.Join(s.Root, TableFile), fs.ErrNotExist)
	}
	if errors.Is(err, seam.ErrNotRegular) {
		return nil, fmt.Errorf("table header %s: %w: %w", filepath.Join(s.Root, TableFile), leasefmt.ErrCorrupt, err)
	}
	if err != nil {
		return nil, err
	}
	t, err := leasefmt.DecodeTable(data)
	if err != nil {
		return nil, fmt.Errorf("table header %s: %w", filepath.Join(s.Root, TableFile), err)
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
	if work != 0 && work != s.Table.WorkShards {
		return fmt.Errorf("%w: %d (%s), but %s has work_shards %d", ErrShardConflict, work, workFrom, filepath.Join(s.Root, TableFile), s.Table.WorkShards)
	}
	if target != 0 && target != s.Table.TargetShards {
		return fmt.Errorf("%w: %d (%s), but %s has target_shards %d", ErrShardConflict, target, targetFrom, filepath.Join(s.Root, TableFile), s.Table.TargetShards)
	}
	return nil
}

// create makes the directories, the shard lock files and then, last, the
// TABLE header, so a TABLE that exists always describes a complete table.
// Concurrent creators agree: the header is moved in without replacing, and
// a loser uses the winner's header.
func (s *Store) create(t *leasefmt.Table) error {
	mk := func(name string) error {
		if err := s.FS.Mkdir(name); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return nil
	}
	var dirs []string
	for _, top := range []string{leasefmt.Work.Dir(), leasefmt.Target.Dir(), leasefmt.Group.Dir(), StageDir, PublicDir, LostFound} {
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
			unlock, err := s.FS.Lock(context.TODO(), path.Join(dir, LockFile), 0, 0)
			if err == nil {
				unlock()
			} else if !errors.Is(err, ErrLockTimeout) {
				return err
			}
			dirs = append(dirs, dir)
		}
		dirs = append(dirs, k.Dir())
	}
	dirs = append(dirs, "")
	b := durable.NewSyncBatch(s.FS, nil)
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
	tmp, err := s.Disk().WriteTemp("", TableFile, data)
	if err != nil {
		return err
	}
	err = s.FS.RenameNoReplace(tmp, TableFile)
	if errors.Is(err, fs.ErrExist) || errors.Is(err, os.ErrExist) {
		s.FS.Remove(tmp)
		return nil // another creator won; its header stands
	}
	if err != nil {
		s.FS.Remove(tmp)
		return err
	}
	return s.FS.SyncDir("")
}

// ShardDir is the table-relative directory of shard sh of kind k.
func (s *Store) ShardDir(k leasefmt.Kind, sh int) string {
	n := s.Table.Shards(k)
	if k < 0 || int(k) >= len(s.shardDirs) || sh < 0 || sh >= n {
		return path.Join(k.Dir(), leasefmt.ShardDirName(sh, n))
	}
	c := s.shardDirs[k].Load()
	if c == nil || len(*c) != n {
		// Made once per kind (the names are asked for several times per
		// record); remade if the table's shard count was changed.
		dirs := make([]string, n)
		for i := range dirs {
			dirs[i] = k.Dir() + "/" + leasefmt.ShardDirName(i, n)
		}
		c = &dirs
		s.shardDirs[k].Store(c)
	}
	return (*c)[sh]
}

// RecordPath is the table-relative path of the record of id.
func (s *Store) RecordPath(k leasefmt.Kind, id leasefmt.ID) string {
	return s.ShardDir(k, id.Shard(s.Table.Shards(k))) + "/" + id.FileName()
}

// Abs is the absolute path of a table-relative name, for messages.
func (s *Store) Abs(name string) string { return filepath.Join(s.Root, filepath.FromSlash(name)) }

// ensureShard creates a shard directory that a table made by another
// program may lack, durably, once per Store.
func (s *Store) ensureShard(dir string) error { return s.Disk().EnsureDir(dir) }

// StagePath is the table-relative staging directory of the holder of
// token of id, stage/ID.TOKEN (SPEC §3.2): results staged there can only
// be published while token is current.
func StagePath(id leasefmt.ID, token int64) string {
	return StageDir + "/" + string(id) + "." + strconv.FormatInt(token, 10)
}

// ParseStageName parses the name ID.TOKEN of a staging directory.
func ParseStageName(name string) (leasefmt.ID, int64, bool) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return "", 0, false
	}
	id, err := leasefmt.ParseID(name[:i])
	if err != nil {
		return "", 0, false
	}
	tok, err := leasefmt.ParseToken(name[i+1:])
	if err != nil {
		return "", 0, false
	}
	return id, tok, true
}

// MakeStage creates the staging directory of the holder of token of id,
// durably, and returns its absolute path. It does not check the lease:
// whatever is staged there is published only while token is current.
func (s *Store) MakeStage(id leasefmt.ID, token int64) (string, error) {
	dir := StagePath(id, token)
	if err := s.Disk().EnsureDir(dir); err != nil {
		return "", err
	}
	return s.Abs(dir), nil
}

// Lock takes the lock of the record of id (SPEC §5).
func (s *Store) Lock(k leasefmt.Kind, id leasefmt.ID) (func(), error) {
	dir := s.ShardDir(k, id.Shard(s.Table.Shards(k)))
	if err := s.ensureShard(dir); err != nil {
		return nil, err
	}
	return s.FS.Lock(context.TODO(), path.Join(dir, LockFile), id.LockOffset(), s.LockTimeout)
}

// Read reads and validates the record of id. It returns (nil, nil) when
// there is none; an error wrapping leasefmt.ErrCorrupt when a record exists
// but does not validate (a symbolic link or other non-regular file in its
// place included).
func (s *Store) Read(k leasefmt.Kind, id leasefmt.ID) (*leasefmt.Record, error) {
	r, _, err := s.readRaw(k, id)
	return r, err
}

// readRaw is Read that also returns the bytes read, so a failed group
// write can put them back exactly. A transient error (a read that failed
// after its open, ESTALE) is retried as s.Retry says and, when the tries
// run out, returned as the I/O error it is: never as a missing record.
func (s *Store) readRaw(k leasefmt.Kind, id leasefmt.ID) (*leasefmt.Record, []byte, error) {
	name := s.RecordPath(k, id)
	for attempt := 1; ; attempt++ {
		r, data, err := s.readOnce(k, id, name)
		if !s.Disk().Again(context.TODO(), s.Retry, attempt, name, err) {
			return r, data, err
		}
	}
}

// readOnce reads and validates the record of id at name once.
func (s *Store) readOnce(k leasefmt.Kind, id leasefmt.ID, name string) (*leasefmt.Record, []byte, error) {
	data, err := s.FS.ReadFile(name, leasefmt.MaxRecordSize)
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
	data, err := leasefmt.Encode(rec)
	if err != nil {
		return err
	}
	return s.Disk().WriteFile(s.RecordPath(rec.Kind, rec.ID), data)
}

// stageBytes writes data, the encoding of rec, to a temp file and moves it
// into place in batch b: over the record, or, with create, only where no
// record exists (durable.Disk.Put; ErrAppeared when one does).
func (s *Store) stageBytes(b *durable.SyncBatch, rec *leasefmt.Record, data []byte, create bool) error {
	return s.Disk().Put(b, s.RecordPath(rec.Kind, rec.ID), data, create)
}
