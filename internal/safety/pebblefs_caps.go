package safety

// The optional capabilities of Mem (seam's DirOpener, LockPreparer,
// Refresher, IdleLockDropper, Syncer, Sharer, PermFixer, and Close), so
// that an operation over it takes the kernel FS's paths.

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/leasetool/lease/commit/seam"
)

// OpenDir implements seam.DirOpener: the names of directory name as of the
// open, sorted, handed out a bounded number at a time.
func (m *Mem) OpenDir(name string) (seam.DirReader, error) {
	ents, err := m.ReadDir(name)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return &seam.ListedDir{Names: names}, nil
}

// PrepareLock implements seam.LockPreparer: the lock file is created when
// missing (never truncated), as the kernel FS's open ahead of a batch does.
func (m *Mem) PrepareLock(name string) error {
	p, err := memPath("open", name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lockFile(name, p)
}

// lockFile creates the lock file at memfs path p when it is missing. The
// caller holds m.mu.
func (m *Mem) lockFile(name, p string) error {
	if err := m.parentDir("open", name, p); err != nil {
		return err
	}
	fi, ok, err := m.stat(p)
	switch {
	case err != nil:
		return memErr("open", name, err)
	case ok && fi.IsDir():
		return &fs.PathError{Op: "open", Path: name, Err: seam.ErrNotRegular}
	case ok:
		return nil
	}
	f, err := m.fs.OpenReadWrite(p, vfs.WriteCategoryUnspecified)
	if err != nil {
		return memErr("open", name, err)
	}
	m.created(p, false, true)
	return f.Close()
}

// created gives what was just made at p the modes of the table's sharing.
func (m *Mem) created(p string, dir, writable bool) {
	m.modeMu.Lock()
	defer m.modeMu.Unlock()
	if m.share == nil {
		return
	}
	if dir {
		m.modes[p] = m.share.DirMode(0o777)
	} else {
		m.modes[p] = m.share.FileMode(0o666, writable)
	}
}

// Refresh implements seam.Refresher. Mem caches no handles: there is
// nothing to drop.
func (m *Mem) Refresh(dir string) {}

// DropIdleLocks implements seam.IdleLockDropper. Mem keeps no lock files
// open: there is nothing to close.
func (m *Mem) DropIdleLocks() {}

// Syncfs implements seam.Syncer: every file and directory is synced, as
// syncfs(2) makes them durable.
func (m *Mem) Syncfs() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var walk func(p string) error
	walk = func(p string) error {
		names, err := m.fs.List(p)
		if err != nil {
			return memErr("syncfs", p, err)
		}
		sort.Strings(names)
		for _, n := range names {
			c := path.Join(p, n)
			fi, err := m.fs.Stat(c)
			if err != nil {
				return memErr("syncfs", c, err)
			}
			if fi.IsDir() {
				if err := walk(c); err != nil {
					return err
				}
				continue
			}
			f, err := m.fs.OpenReadWrite(c, vfs.WriteCategoryUnspecified)
			if err != nil {
				return memErr("syncfs", c, err)
			}
			err = f.Sync()
			f.Close()
			if err != nil {
				return memErr("syncfs", c, err)
			}
		}
		d, err := m.fs.OpenDir(p)
		if err != nil {
			return memErr("syncfs", p, err)
		}
		defer d.Close()
		return d.Sync()
	}
	return walk("/")
}

// SetSharing implements seam.Sharer: what is created from now on gets the
// shared modes (reported by Lstat; a crash clone keeps no modes).
func (m *Mem) SetSharing(s seam.Sharing) {
	m.modeMu.Lock()
	defer m.modeMu.Unlock()
	m.share = &s
}

// FixPerm implements seam.PermFixer: the mode of name, "" being the root
// (Mem keeps no groups, so gid is not kept).
func (m *Mem) FixPerm(name string, mode uint32, gid int) error {
	p, err := memPath("chmod", name)
	if err != nil {
		return err
	}
	if _, ok, err := m.stat(p); err != nil || !ok {
		if err == nil {
			err = fs.ErrNotExist
		}
		return memErr("chmod", name, err)
	}
	m.modeMu.Lock()
	defer m.modeMu.Unlock()
	m.modes[p] = mode & 0o7777
	return nil
}

// Close implements io.Closer, as the kernel FS does; Mem holds nothing to
// release.
func (m *Mem) Close() error { return nil }

// OpenRead implements seam.FileOpener: the file's bytes as a stream, read
// as ReadFile reads them.
func (m *Mem) OpenRead(name string) (io.ReadCloser, error) {
	p, err := memPath("open", name)
	if err != nil {
		return nil, err
	}
	fi, ok, err := m.stat(p)
	switch {
	case err != nil:
		return nil, memErr("open", name, err)
	case !ok:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	d, err := m.ReadFile(name, int(fi.Size()))
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(d)), nil
}

// Exchange implements seam.Overwriter: Pebble's MemFS has no exchange, so
// it is three renames under m.mu (atomic for the callers of this Mem; a
// crash clone may show a rename of the three undone).
func (m *Mem) Exchange(a, b string) error {
	ap, bp, err := m.renamePaths(a, b)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok, _ := m.stat(bp); !ok {
		return memErr("exchange", b, fs.ErrNotExist)
	}
	tmp := bp + ".exchange"
	for _, mv := range [][2]string{{bp, tmp}, {ap, bp}, {tmp, ap}} {
		if err := m.fs.Rename(mv[0], mv[1]); err != nil {
			return memErr("exchange", b, err)
		}
	}
	return nil
}

// Overwrite implements seam.Overwriter: the file written with data and
// synced; one smaller than data once rounded up to 4 KiB blocks (Mem's
// model of what is allocated) is refused as unfit. Pebble's MemFS has no
// hard links, so no file of Mem has two names outside a crash clone.
func (m *Mem) Overwrite(name string, data []byte) error {
	p, err := memPath("open", name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	fi, ok, err := m.stat(p)
	switch {
	case err != nil:
		return memErr("open", name, err)
	case !ok:
		return memErr("open", name, fs.ErrNotExist)
	case fi.IsDir():
		return &fs.PathError{Op: "open", Path: name, Err: seam.ErrNotRegular}
	case (fi.Size()+4095)/4096*4096 < int64(len(data)):
		return &fs.PathError{Op: "overwrite", Path: name, Err: fmt.Errorf("%w: %d bytes allocated, %d needed", seam.ErrUnfit, fi.Size(), len(data))}
	}
	// Pebble's files cannot be cut short: the file is written anew under
	// its name (Create truncates), which a crash can tell from an overwrite
	// in place only by the temp name's entry, whose value does not matter.
	f, err := m.fs.Create(p, vfs.WriteCategoryUnspecified)
	if err != nil {
		return memErr("open", name, err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return memErr("write", name, err)
	}
	if err := f.Sync(); err != nil {
		return memErr("fsync", name, err)
	}
	return nil
}

// Link implements seam.Linker with MemFS's link: a second name of the
// regular file oldname, never replacing one.
func (m *Mem) Link(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	op, np, err := m.renamePaths(oldname, newname)
	if err != nil {
		return err
	}
	fi, ok, err := m.stat(op)
	switch {
	case err != nil:
		return memErr("link", oldname, err)
	case !ok:
		return &fs.PathError{Op: "link", Path: oldname, Err: fs.ErrNotExist}
	case fi.IsDir():
		return &fs.PathError{Op: "link", Path: oldname, Err: seam.ErrNotRegular}
	}
	if _, ok, err := m.stat(np); err != nil || ok {
		if err == nil {
			err = fs.ErrExist
		}
		return memErr("link", newname, err)
	}
	if err := m.fs.Link(op, np); err != nil {
		return memErr("link", newname, err)
	}
	return nil
}

// ReadLocked implements seam.ReadLockFinder: no other process can hold a
// read lock on a file of memory; name must be there.
func (m *Mem) ReadLocked(name string) (bool, int, error) {
	if _, err := m.Lstat(name); err != nil {
		return false, 0, err
	}
	return false, 0, nil
}
