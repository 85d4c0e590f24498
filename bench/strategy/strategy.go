// Package strategy holds the commit algorithms lease is measured against,
// as wrappers of the filesystem seam (seam.FS) rather than as branches in
// the storage engine: the engine always commits its own way (a pool of
// writers, one directory fsync per shard as soon as its last record is
// renamed), and a strategy changes what the filesystem does with the
// engine's calls and how many writers the engine runs.
//
//   - concurrent: lease itself, unwrapped (the calls are only counted).
//   - sequential: the seed's F324 group commit: one writer, one directory
//     fsync per shard once its last record is renamed (the engine with one
//     writer is exactly that).
//   - one-at-a-time: the seed's F323: one writer, the directory fsynced
//     after every rename (the wrapper fsyncs it there, and skips the
//     engine's later fsync of a directory with no rename since).
//   - nosync: the floor: the same writes and renames with no file or
//     directory fsync, and one syncfs(2) of the filesystem when the
//     process is done with it (Finish); not durable per record.
//
// The benchmarks run them through bench/leasebench, the lease command line
// over a wrapped filesystem, and the engine benchmark of bench_test.go.
package strategy

import (
	"fmt"
	"path"
	"sync"
	"sync/atomic"

	"github.com/leasetool/lease/commit/seam"
)

// Kind is a commit strategy.
type Kind int

// The strategies.
const (
	Concurrent Kind = iota
	Sequential
	OneAtATime
	NoSync
)

var names = [...]string{"concurrent", "sequential", "one-at-a-time", "nosync"}

// String is the strategy's name as the benchmarks spell it.
func (k Kind) String() string { return names[k] }

// Parse maps a name to a Kind.
func Parse(s string) (Kind, error) {
	for k, n := range names {
		if s == n {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("unknown strategy %q (concurrent, sequential, one-at-a-time, nosync)", s)
}

// Writers is the writer pool the engine runs with under k: 0 (the
// engine's own) for concurrent, 1 for the seed's algorithms, which commit
// one record at a time.
func (k Kind) Writers() int {
	if k == Concurrent {
		return 0
	}
	return 1
}

// Counts are the syncs that reached the filesystem through a wrapper.
type Counts struct {
	FileSyncs      int64 `json:"file_syncs"`
	DirectorySyncs int64 `json:"directory_syncs"`
	Syncfs         int64 `json:"syncfs"`
}

// FS is an FS wrapped for a strategy. Its capabilities are the wrapped
// FS's (seam.As finds them through Unwrap).
type FS struct {
	seam.FS
	kind   Kind
	files  atomic.Int64
	dirs   atomic.Int64
	syncfs atomic.Int64
	once   sync.Once
	ferr   error

	mu    sync.Mutex
	clean map[string]bool // one-at-a-time: directories fsynced after their last rename
}

// Wrap returns f wrapped for strategy k.
func Wrap(k Kind, f seam.FS) *FS {
	return &FS{FS: f, kind: k, clean: map[string]bool{}}
}

// Unwrap implements seam.Unwrapper.
func (w *FS) Unwrap() seam.FS { return w.FS }

// Counts returns the syncs made so far.
func (w *FS) Counts() Counts {
	return Counts{FileSyncs: w.files.Load(), DirectorySyncs: w.dirs.Load(), Syncfs: w.syncfs.Load()}
}

// Finish ends the strategy's work on the filesystem: for nosync, the one
// syncfs(2) that stands for every fsync skipped (once; later calls return
// its error). The other strategies have nothing left to do.
func (w *FS) Finish() error {
	if w.kind != NoSync {
		return nil
	}
	w.once.Do(func() {
		s, ok := seam.As[seam.Syncer](w.FS)
		if !ok {
			w.ferr = fmt.Errorf("nosync: the filesystem cannot be synced whole (no syncfs)")
			return
		}
		w.ferr = s.Syncfs()
		w.syncfs.Add(1)
	})
	return w.ferr
}

// CreateExcl implements seam.FS: the file's Sync is counted, or skipped
// under nosync.
func (w *FS) CreateExcl(name string) (seam.File, error) {
	f, err := w.FS.CreateExcl(name)
	if err != nil {
		return nil, err
	}
	return &file{File: f, w: w}, nil
}

type file struct {
	seam.File
	w *FS
}

func (f *file) Sync() error {
	if f.w.kind == NoSync {
		return nil
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	f.w.files.Add(1)
	return nil
}

// SyncFile implements seam.FS (skipped under nosync).
func (w *FS) SyncFile(name string) error {
	if w.kind == NoSync {
		return nil
	}
	if err := w.FS.SyncFile(name); err != nil {
		return err
	}
	w.files.Add(1)
	return nil
}

// SyncDir implements seam.FS: skipped under nosync, and under
// one-at-a-time for a directory the wrapper fsynced after its last rename.
func (w *FS) SyncDir(name string) error {
	switch w.kind {
	case NoSync:
		return nil
	case OneAtATime:
		w.mu.Lock()
		clean := w.clean[name]
		w.mu.Unlock()
		if clean {
			return nil
		}
	}
	return w.syncDir(name)
}

func (w *FS) syncDir(name string) error {
	if err := w.FS.SyncDir(name); err != nil {
		return err
	}
	w.dirs.Add(1)
	return nil
}

// Rename implements seam.FS: under one-at-a-time the directory is fsynced
// at once.
func (w *FS) Rename(oldname, newname string) error {
	if err := w.FS.Rename(oldname, newname); err != nil {
		return err
	}
	return w.renamed(newname)
}

// RenameNoReplace implements seam.FS, as Rename.
func (w *FS) RenameNoReplace(oldname, newname string) error {
	if err := w.FS.RenameNoReplace(oldname, newname); err != nil {
		return err
	}
	return w.renamed(newname)
}

func (w *FS) renamed(newname string) error {
	if w.kind != OneAtATime {
		return nil
	}
	dir := path.Dir(newname)
	if dir == "." {
		dir = ""
	}
	w.mu.Lock()
	delete(w.clean, dir)
	w.mu.Unlock()
	if err := w.syncDir(dir); err != nil {
		return err
	}
	w.mu.Lock()
	w.clean[dir] = true
	w.mu.Unlock()
	return nil
}

// Mkdir and Remove implement seam.FS: a directory whose entries change is
// no longer clean under one-at-a-time.
func (w *FS) Mkdir(name string) error {
	w.dirtied(name)
	return w.FS.Mkdir(name)
}

// Remove implements seam.FS (see Mkdir).
func (w *FS) Remove(name string) error {
	w.dirtied(name)
	return w.FS.Remove(name)
}

func (w *FS) dirtied(name string) {
	if w.kind != OneAtATime {
		return
	}
	dir := path.Dir(name)
	if dir == "." {
		dir = ""
	}
	w.mu.Lock()
	delete(w.clean, dir)
	w.mu.Unlock()
}
