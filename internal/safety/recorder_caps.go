package safety

// The optional capabilities of Recorder (seam's DirOpener, LockPreparer,
// Refresher, IdleLockDropper, Syncer, Sharer, PermFixer, and Close), so
// that an operation explored over it takes the paths it takes over the
// kernel FS, not the fallbacks of an FS without them. Those with an effect
// on the namespace or on durability (PrepareLock creating a lock file,
// Syncfs) and the directory reads are logged as calls; the others change
// nothing a crash could show (handles, modes: metadata is not part of the
// crash model) and are not.

import (
	"bytes"
	"errors"
	"io"
	"math"
	"sort"

	"github.com/leasetool/lease/commit/seam"
)

// OpenDir implements seam.DirOpener: the names of directory name as of the
// open, sorted, handed out a bounded number at a time (logged as a
// readdir).
func (r *Recorder) OpenDir(name string) (seam.DirReader, error) {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpReadDir, name)
	d, err := r.lookup(name)
	if err != nil {
		return nil, r.fail(i, perr("open", name, err))
	}
	if !d.dir {
		return nil, r.fail(i, perr("open", name, errors.New("not a directory")))
	}
	names := make([]string, 0, len(d.kids))
	for n := range d.kids {
		names = append(names, n)
	}
	sort.Strings(names)
	return &seam.ListedDir{Names: names}, nil
}

// PrepareLock implements seam.LockPreparer: the lock file is created when
// missing, as the kernel FS's open ahead of a batch does.
func (r *Recorder) PrepareLock(name string) error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := r.lockFile(r.call(seam.OpPrepareLock, name), name)
	return err
}

// Refresh implements seam.Refresher. The Recorder caches no handles: every
// call resolves its name afresh, so there is nothing to drop.
func (r *Recorder) Refresh(dir string) {}

// DropIdleLocks implements seam.IdleLockDropper. The Recorder keeps no
// lock files open between calls, so there is nothing to close.
func (r *Recorder) DropIdleLocks() {}

// Syncfs implements seam.Syncer: every directory's entries and every
// file's data are durable from here, as after syncfs(2).
func (r *Recorder) Syncfs() error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpSyncfs, "")
	var walk func(n *inode)
	walk = func(n *inode) {
		if !n.dir {
			r.emit(event{kind: evFsync, call: i, node: n})
			return
		}
		r.emit(event{kind: evSyncDir, call: i, node: n})
		for _, c := range n.kids {
			walk(c)
		}
	}
	walk(r.root)
	return nil
}

// SetSharing implements seam.Sharer: what is created from now on gets the
// shared modes (reported by Lstat; modes are not part of the crash model).
func (r *Recorder) SetSharing(s seam.Sharing) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.share = &s
}

// FixPerm implements seam.PermFixer: the mode and group (gid -1 leaves it)
// of name, "" being the root.
func (r *Recorder) FixPerm(name string, mode uint32, gid int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, err := r.lookup(name)
	if err != nil {
		return perr("chmod", name, err)
	}
	n.mode = mode & 0o7777
	if gid >= 0 {
		n.gid = gid
	}
	return nil
}

// Close implements io.Closer, as the kernel FS does; the Recorder holds
// nothing to release.
func (r *Recorder) Close() error { return nil }

// OpenRead implements seam.FileOpener: the file's bytes as a stream, read
// (and logged) as ReadFile reads them.
func (r *Recorder) OpenRead(name string) (io.ReadCloser, error) {
	d, err := r.ReadFile(name, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(d)), nil
}
