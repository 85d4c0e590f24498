// Package durable is the durability layer of the storage engine, between
// the filesystem seam (package seam) and the lease operations (package
// commit): how a file of a lease table is written so that it survives a
// crash, and how a record is locked.
//
//   - G1, content before name: Disk.WriteTemp fsyncs every temp file
//     before anything renames it.
//   - G2, one rename per record: Disk.Put moves one temp file into place,
//     over the record (SyncBatch.Replace) or, for a record read as
//     missing, without ever replacing (SyncBatch.Create, ErrAppeared when
//     a record is there after all).
//   - G3, success after every directory fsync: Disk.WriteFile, Disk.Move
//     and Disk.EnsureDir fsync what they touched before they return; a
//     SyncBatch's renames are durable once its Flush returned.
//   - G4, one fsync per directory per batch: SyncBatch remembers the
//     directories renamed into and fsyncs each once.
//   - G5, earlier renames still fsynced on failure, and G6's raw material:
//     SyncBatch.Flush fsyncs every pending directory whatever failed, and
//     remembers the first failure (SyncBatch.Err).
//   - G8, same-directory batches only: SyncBatch refuses a rename across
//     directories (ErrCrossDirectory); Disk.Move moves across directories
//     without replacing, fsyncing the destination directory first.
//
// What the protocol is, and why, is in docs/lease-format.md. The record
// locks (Disk.Lock) and the retries of transient errors of network
// filesystems (Retry, Disk.Again) are here too; deciding what a record
// becomes, and when a batch is reported failed, is package commit's.
//
// Like package seam, this is the tool's own machinery: Go programs use
// package leases.
package durable

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasetool/lease/commit/seam"
)

// Counts counts the durability work a Disk did; it is safe for concurrent
// use.
type Counts struct {
	FileSyncs      atomic.Int64
	DirectorySyncs atomic.Int64
	// Retries counts the steps tried again after a transient error
	// (Retry): ESTALE, a read that failed after its open, a record that
	// appeared while it was created.
	Retries atomic.Int64
	// Syncfs counts the syncfs(2) calls of batches under the Syncfs
	// strategy (barrier.go).
	Syncfs atomic.Int64
	// SparesUsed counts the records written through a spare of the
	// reserve on a full filesystem, SparesRecycled the replaced records'
	// files that became spares, SparesUnfit the spares set aside because
	// they could not take a record (reserve.go).
	SparesUsed, SparesRecycled, SparesUnfit atomic.Int64
}

// Disk writes the files of one table durably through its FS.
type Disk struct {
	fs      seam.FS
	root    string
	counts  *Counts
	ensured sync.Map   // directories known to exist
	mkMu    sync.Mutex // EnsureDir's makers, one at a time
	pool    reserve    // the reserve's spares as last listed (reserve.go)
	// strategy is the Strategy chosen by SetStrategy (Record or Syncfs;
	// Auto, the zero value, before: per record); auto says it was chosen
	// by Auto, which checks the machine's dirty data per batch.
	strategy atomic.Int32
	auto     atomic.Bool
}

// New returns the Disk of the table at root (for messages) over f,
// counting into c (which must not be nil).
func New(f seam.FS, root string, c *Counts) *Disk {
	return &Disk{fs: f, root: root, counts: c}
}

// FS is the filesystem the Disk writes through.
func (d *Disk) FS() seam.FS { return d.fs }

// Abs is the absolute path of a table-relative name, for messages.
func (d *Disk) Abs(name string) string {
	return filepath.Join(d.root, filepath.FromSlash(name))
}

// Batch returns an empty SyncBatch over the Disk's FS that counts its
// directory fsyncs: for a write of one record or a few, per record.
func (d *Disk) Batch() *SyncBatch { return NewSyncBatch(d.fs, &d.counts.DirectorySyncs) }

// GroupBatch is Batch for a batch of up to n records (Store.Apply, lease
// add, a group claim): under the Syncfs strategy (SetStrategy) it has a
// group syncfs barrier (barrier.go), which Put waits for instead of
// fsyncing each temp file and Flush runs instead of the directory fsyncs;
// under Auto only from AutoMinBatch records on. Its descriptor is closed
// when the batch is garbage (its os.File).
func (d *Disk) GroupBatch(n int) *SyncBatch {
	b := d.Batch()
	b.barrier = d.barrierFor(n)
	return b
}

// TempName is the temp file name pattern of the durability protocol:
// .NAME.tmp.<random> (docs/lease-format.md).
func TempName(name string) string {
	var b [6]byte
	rand.Read(b[:])
	return "." + name + ".tmp." + hex.EncodeToString(b[:])
}

// WriteTemp writes data to a new temp file beside name in dir and makes it
// durable (G1). The temp file is removed when anything fails.
func (d *Disk) WriteTemp(dir, name string, data []byte) (string, error) {
	return d.writeTemp(dir, name, data, true)
}

// writeTemp is WriteTemp; without fsync, the temp file is written but not
// made durable: its caller waits for a batch's barrier before renaming it.
func (d *Disk) writeTemp(dir, name string, data []byte, fsync bool) (string, error) {
	tmp := path.Join(dir, TempName(name))
	f, err := d.fs.CreateExcl(tmp)
	if err != nil {
		return "", &OpError{Op: "cannot create the new record's temp file", Err: Bare(err)}
	}
	_, err = f.Write(data)
	if err == nil && fsync {
		if err = f.Sync(); err == nil {
			d.counts.FileSyncs.Add(1)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", &OpError{Op: "cannot write the new record (" + d.removeTemp(tmp) + ")", Err: Bare(err)}
	}
	return tmp, nil
}

// removeTemp removes tmp, the temp file of a write that failed, and says
// what became of it for the error's text: removed, or (a server away: an
// NFS soft mount's calls time out) left for lease fsck --repair, which
// removes such temp files under the record's lock.
func (d *Disk) removeTemp(tmp string) string {
	if err := d.fs.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "its temp file could not be removed either; lease fsck --repair removes it"
	}
	return "its temp file was removed"
}

// Put writes data to a durable temp file beside final and moves it into
// place in batch b: over final, or, with create, only where nothing is
// (SyncBatch.Create; an error wrapping ErrAppeared when something is).
// The move is durable once b is flushed. Under b's syncfs barrier the temp
// file is not fsynced: Put waits for a syncfs that started after it was
// written (G1) before renaming it — the syncfs of the pass, in a two-pass
// chunk (SyncBatch.BeginPass), which runs once every item of the chunk has
// written its temp file or has nothing to write.
func (d *Disk) Put(b *SyncBatch, final string, data []byte, create bool) error {
	tmp, err := d.writeTemp(path.Dir(final), path.Base(final), data, b.barrier == nil)
	if err != nil {
		return err
	}
	if b.barrier != nil {
		if err := b.wait(); errors.Is(err, ErrBatchStopped) {
			return &OpError{Op: "not renamed (" + d.removeTemp(tmp) + ")", Err: err}
		} else if err != nil {
			b.fail(err)
			return &OpError{Op: "cannot make the new record durable: syncfs of the table's filesystem failed (" + d.removeTemp(tmp) + ")", Err: Bare(err)}
		}
	}
	move := b.Replace
	if create {
		move = b.Create
	}
	if err := move(tmp, final); err != nil {
		removed := d.removeTemp(tmp)
		if errors.Is(err, fs.ErrNotExist) && d.landed(final, data) {
			// A rename the server had made already, answered ENOENT
			// when resent (an NFS server restarted without its reply
			// cache): the record is ours. Its directory still gets its
			// fsync (G3).
			b.Mark(path.Dir(final))
			return nil
		}
		if errors.Is(err, ErrCrossDirectory) {
			return err
		}
		if create && errors.Is(err, fs.ErrExist) {
			return Appeared(err)
		}
		return &OpError{Op: "cannot rename the new record into place (" + removed + ")", Err: Bare(err)}
	}
	return nil
}

// landed reports whether final holds exactly data, the bytes a Put wrote:
// its rename failed with ENOENT, yet may have been made (a client resends
// a RENAME whose reply the NFS server's cut lost; the server booted again
// has no reply cache and finds the temp file gone). The bytes carry the
// writer's token and times, which nobody else writes, so equal bytes are
// this Put's rename. The read is bounded by len(data) and never follows a
// symbolic link (FS.ReadFile).
func (d *Disk) landed(final string, data []byte) bool {
	got, err := d.fs.ReadFile(final, len(data))
	return err == nil && bytes.Equal(got, data)
}

// WriteFile durably replaces final by data on its own: temp, fsync,
// rename, directory fsync. The caller holds the record's lock.
func (d *Disk) WriteFile(final string, data []byte) error {
	b := d.Batch()
	if err := d.Put(b, final, data, false); err != nil {
		b.Flush()
		return err
	}
	return b.Flush()
}

// Move moves from to to across directories without ever replacing an
// existing name, then fsyncs the destination directory and after it the
// source directory (G8), so after a crash the file is in at least one
// place.
func (d *Disk) Move(from, to string) error {
	if err := d.fs.RenameNoReplace(from, to); err != nil {
		return err
	}
	if err := d.fs.SyncDir(path.Dir(to)); err != nil {
		return err
	}
	d.counts.DirectorySyncs.Add(1)
	if path.Dir(from) == path.Dir(to) {
		return nil
	}
	if err := d.fs.SyncDir(path.Dir(from)); err != nil {
		return err
	}
	d.counts.DirectorySyncs.Add(1)
	return nil
}

// EnsureDir makes the table-relative directory dir exist, creating it and
// any missing parent below the root durably (mkdir, then fsync of the
// parent), as a table made by another program may lack some
// (docs/lease-format.md). A name that exists but is not a directory (a
// symbolic link included) is refused with seam.ErrNotRegular. Directories
// once seen are remembered for the life of the Disk.
func (d *Disk) EnsureDir(dir string) error {
	if dir == "" || dir == "." {
		return nil
	}
	if _, ok := d.ensured.Load(dir); ok {
		return nil
	}
	fi, err := d.fs.Lstat(dir)
	switch {
	case err == nil && fi.IsDir():
	case err == nil:
		return &fs.PathError{Op: "open", Path: d.Abs(dir), Err: fmt.Errorf("%w: not a directory", seam.ErrNotRegular)}
	case errors.Is(err, fs.ErrNotExist):
		if err := d.EnsureDir(path.Dir(dir)); err != nil {
			return err
		}
		// One maker at a time: the writers of a batch that meet the same
		// missing directory (a new bucket of the tally) wait for the
		// first one's mkdir and fsync instead of each fsyncing the parent.
		d.mkMu.Lock()
		defer d.mkMu.Unlock()
		if _, ok := d.ensured.Load(dir); ok {
			return nil
		}
		if err := d.fs.Mkdir(dir); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := d.fs.SyncDir(path.Dir(dir)); err != nil {
			return err
		}
		d.counts.DirectorySyncs.Add(1)
	default:
		return err
	}
	d.ensured.Store(dir, true)
	return nil
}

// Forget drops what the Disk remembers of directory dir and of every
// directory below it (EnsureDir's memory), after dir was moved away (a
// published staging directory), so that a later directory of the same
// name is made again.
func (d *Disk) Forget(dir string) {
	d.ensured.Range(func(k, _ any) bool {
		if n := k.(string); n == dir || strings.HasPrefix(n, dir+"/") {
			d.ensured.Delete(k)
		}
		return true
	})
}

// Lock takes the exclusive lock on byte off of the lock file name (a
// record's lock: docs/lease-format.md), making its directory first if it
// is missing, waiting at most timeout and no longer than ctx lasts
// (seam.FS.Lock).
func (d *Disk) Lock(ctx context.Context, name string, off int64, timeout time.Duration) (func(), error) {
	if err := d.EnsureDir(path.Dir(name)); err != nil {
		return nil, err
	}
	return d.fs.Lock(ctx, name, off, timeout)
}

// MkdirRoot creates root and its missing parents, fsyncing the parent of
// every directory it creates so the root itself survives a crash.
func MkdirRoot(root string) error {
	root = filepath.Clean(root)
	if fi, err := os.Stat(root); err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: root, Err: errors.New("not a directory")}
		}
		return nil
	}
	parent := filepath.Dir(root)
	if parent != root {
		if err := MkdirRoot(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(root, 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	dir, err := os.Open(parent)
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return &fs.PathError{Op: "fsync", Path: parent, Err: err}
	}
	return nil
}
