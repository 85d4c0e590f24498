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
	"fmt"
	"io"
	"io/fs"
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

// Exchange implements seam.Overwriter (renameat2 RENAME_EXCHANGE): the
// two names swap their files. Logged as one call with two entry changes,
// each durable as of its directory's next fsync and undone independently
// by a crash, so a crash state may hold one file under both names: what
// Overwrite's link count refuses.
func (r *Recorder) Exchange(a, b string) error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpExchange, b)
	ad, abase, err := r.parent(a)
	if err != nil {
		return r.fail(i, perr("exchange", a, err))
	}
	bd, bbase, err := r.parent(b)
	if err != nil {
		return r.fail(i, perr("exchange", b, err))
	}
	an, ok := ad.kids[abase]
	if !ok {
		return r.fail(i, perr("exchange", a, fs.ErrNotExist))
	}
	bn, ok := bd.kids[bbase]
	if !ok {
		return r.fail(i, perr("exchange", b, fs.ErrNotExist))
	}
	if an.dir || bn.dir {
		return r.fail(i, perr("exchange", b, seam.ErrNotRegular))
	}
	ad.kids[abase], bd.kids[bbase] = bn, an
	r.emit(event{kind: evEntry, call: i, key: entKey{ad, abase}, val: bn})
	r.emit(event{kind: evEntry, call: i, key: entKey{bd, bbase}, val: an})
	return nil
}

// Overwrite implements seam.Overwriter: the file's whole new content is
// written in place and made durable (logged as a write and an fsync, so a
// crash before it may leave the file torn, as any write). It refuses, as
// the kernel FS does, a file with another name (the names are counted in
// the namespace) or with fewer bytes allocated than data needs (a file's
// allocation is modelled as its size rounded up to 4 KiB blocks).
func (r *Recorder) Overwrite(name string, data []byte) error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpOverwrite, name)
	n, err := r.lookup(name)
	if err != nil {
		return r.fail(i, perr("open", name, err))
	}
	if n.dir {
		return r.fail(i, perr("open", name, seam.ErrNotRegular))
	}
	if links := r.links(r.root, n); links != 1 {
		return r.fail(i, perr("overwrite", name, fmt.Errorf("%w: %d links", seam.ErrUnfit, links)))
	}
	if alloc := (len(n.data) + 4095) / 4096 * 4096; alloc < len(data) {
		return r.fail(i, perr("overwrite", name, fmt.Errorf("%w: %d bytes allocated, %d needed", seam.ErrUnfit, alloc, len(data))))
	}
	n.data = bytes.Clone(data)
	r.emit(event{kind: evData, call: i, node: n, data: n.data})
	r.emit(event{kind: evFsync, call: i, node: n})
	return nil
}

// links counts the names of file n below directory d.
func (r *Recorder) links(d, n *inode) int {
	c := 0
	for _, k := range d.kids {
		switch {
		case k == n:
			c++
		case k.dir:
			c += r.links(k, n)
		}
	}
	return c
}

// Link implements seam.Linker: a second name of the regular file oldname,
// never replacing one (logged and emitted as the entry it makes).
func (r *Recorder) Link(oldname, newname string) error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpLink, newname)
	n, err := r.lookup(oldname)
	if err != nil {
		return r.fail(i, perr("link", oldname, err))
	}
	if n.dir {
		return r.fail(i, perr("link", oldname, seam.ErrNotRegular))
	}
	d, base, err := r.parent(newname)
	if err != nil {
		return r.fail(i, perr("link", newname, err))
	}
	if _, ok := d.kids[base]; ok {
		return r.fail(i, perr("link", newname, fs.ErrExist))
	}
	d.kids[base] = n
	r.emit(event{kind: evEntry, call: i, key: entKey{d, base}, val: n})
	return nil
}

// ReadLocked implements seam.ReadLockFinder: the Recorder's locks are its
// own process's write locks, so no read lock is ever held; name must be
// there.
func (r *Recorder) ReadLocked(name string) (bool, int, error) {
	if _, err := r.Lstat(name); err != nil {
		return false, 0, err
	}
	return false, 0, nil
}
