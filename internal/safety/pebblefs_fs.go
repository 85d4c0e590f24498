package safety

// The seam.FS methods of Mem on names, over Pebble's MemFS (Lock is in
// pebblefs_locks.go, the file handles in pebblefs_file.go).

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"sort"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/leasetool/lease/commit/seam"
)

// ReadFile implements FS.
func (m *Mem) ReadFile(name string, max int) ([]byte, error) {
	p, err := memPath("open", name)
	if err != nil {
		return nil, err
	}
	fi, ok, err := m.stat(p)
	if err != nil {
		return nil, memErr("open", name, err)
	}
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: seam.ErrNotRegular}
	}
	f, err := m.fs.Open(p)
	if err != nil {
		return nil, memErr("open", name, err)
	}
	defer f.Close()
	buf := make([]byte, max+1)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, memErr("read", name, err)
	}
	return buf[:n], nil
}

// CreateExcl implements FS.
func (m *Mem) CreateExcl(name string) (seam.File, error) {
	p, err := memPath("create", name)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.parentDir("create", name, p); err != nil {
		return nil, err
	}
	if _, ok, err := m.stat(p); err != nil || ok {
		if err == nil {
			err = fs.ErrExist
		}
		return nil, memErr("create", name, err)
	}
	f, err := m.fs.Create(p, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, memErr("create", name, err)
	}
	m.created(p, false, false)
	return &memFile{f: f, name: name}, nil
}

// Rename implements FS.
func (m *Mem) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	op, np, err := m.renamePaths(oldname, newname)
	if err != nil {
		return err
	}
	if fi, ok, _ := m.stat(np); ok && fi.IsDir() {
		return &fs.PathError{Op: "rename", Path: newname, Err: errors.New("is a directory")}
	}
	if err := m.fs.Rename(op, np); err != nil {
		return memErr("rename", newname, err)
	}
	return nil
}

// RenameNoReplace implements FS as renameat2(RENAME_NOREPLACE) does on
// Linux, the kernel FS's path there: one rename, refused when newname
// exists (checked and renamed under m.mu, so atomically for the callers of
// this Mem). The kernel FS's fallback for filesystems without it (link,
// then unlink) is not what Linux takes, so Mem does not take it either.
func (m *Mem) RenameNoReplace(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	op, np, err := m.renamePaths(oldname, newname)
	if err != nil {
		return err
	}
	if _, ok, err := m.stat(np); err != nil || ok {
		if err == nil {
			err = fs.ErrExist
		}
		return memErr("rename", newname, err)
	}
	if err := m.fs.Rename(op, np); err != nil {
		return memErr("rename", newname, err)
	}
	return nil
}

// renamePaths checks a rename of oldname to newname before any of it is
// done (Pebble unlinks the source before it resolves the destination, so
// a failed rename would lose it) and returns both memfs paths. The caller
// holds m.mu.
func (m *Mem) renamePaths(oldname, newname string) (string, string, error) {
	op, err := memPath("rename", oldname)
	if err != nil {
		return "", "", err
	}
	np, err := memPath("rename", newname)
	if err != nil {
		return "", "", err
	}
	if _, ok, err := m.stat(op); err != nil || !ok {
		if err == nil {
			err = fs.ErrNotExist
		}
		return "", "", memErr("rename", oldname, err)
	}
	if err := m.parentDir("rename", newname, np); err != nil {
		return "", "", err
	}
	return op, np, nil
}

// Remove implements FS.
func (m *Mem) Remove(name string) error {
	p, err := memPath("remove", name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fs.Remove(p); err != nil {
		return memErr("remove", name, err)
	}
	return nil
}

// Mkdir implements FS.
func (m *Mem) Mkdir(name string) error {
	p, err := memPath("mkdir", name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.parentDir("mkdir", name, p); err != nil {
		return err
	}
	if _, ok, err := m.stat(p); err != nil || ok {
		if err == nil {
			err = fs.ErrExist
		}
		return memErr("mkdir", name, err)
	}
	if err := m.fs.MkdirAll(p, 0o777); err != nil {
		return memErr("mkdir", name, err)
	}
	m.created(p, true, false)
	return nil
}

// MkdirPrivate implements seam.PrivateDirMaker: Mkdir, the directory
// with mode 0700 (setgid in a shared table, as the kernel FS keeps a
// setgid parent's).
func (m *Mem) MkdirPrivate(name string) error {
	if err := m.Mkdir(name); err != nil {
		return err
	}
	p, _ := memPath("mkdir", name)
	m.modeMu.Lock()
	defer m.modeMu.Unlock()
	m.modes[p] = m.modes[p]&0o2000 | 0o700
	return nil
}

// SyncDir implements FS.
func (m *Mem) SyncDir(name string) error {
	p, err := memPath("fsync", name)
	if err != nil {
		return err
	}
	fi, ok, err := m.stat(p)
	if err == nil && ok && !fi.IsDir() {
		err = errors.New("not a directory")
	}
	if err == nil && !ok {
		err = fs.ErrNotExist
	}
	if err != nil {
		return memErr("fsync", name, err)
	}
	d, err := m.fs.OpenDir(p)
	if err != nil {
		return memErr("fsync", name, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return memErr("fsync", name, err)
	}
	return nil
}

// SyncFile implements FS.
func (m *Mem) SyncFile(name string) error {
	p, err := memPath("open", name)
	if err != nil {
		return err
	}
	fi, ok, err := m.stat(p)
	if err == nil && !ok {
		err = fs.ErrNotExist
	}
	if err == nil && fi.IsDir() {
		err = seam.ErrNotRegular
	}
	if err != nil {
		return memErr("open", name, err)
	}
	f, err := m.fs.OpenReadWrite(p, vfs.WriteCategoryUnspecified)
	if err != nil {
		return memErr("open", name, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return memErr("fsync", name, err)
	}
	return nil
}

// ReadDir implements FS, sorted by name like os.ReadDir.
func (m *Mem) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := memPath("open", name)
	if err != nil {
		return nil, err
	}
	fi, ok, err := m.stat(p)
	if err == nil && ok && !fi.IsDir() {
		err = errors.New("not a directory")
	}
	if err == nil && !ok {
		err = fs.ErrNotExist
	}
	if err != nil {
		return nil, memErr("open", name, err)
	}
	names, err := m.fs.List(p)
	if err != nil {
		return nil, memErr("readdir", name, err)
	}
	sort.Strings(names)
	out := make([]fs.DirEntry, 0, len(names))
	for _, n := range names {
		fi, err := m.fs.Stat(path.Join(p, n))
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, fs.FileInfoToDirEntry(m.info(n, path.Join(p, n), fi)))
	}
	return out, nil
}

// Lstat implements FS; Mem has no symbolic links.
func (m *Mem) Lstat(name string) (fs.FileInfo, error) {
	p, err := memPath("lstat", name)
	if err != nil {
		return nil, err
	}
	fi, err := m.fs.Stat(p)
	if err != nil {
		return nil, memErr("lstat", name, err)
	}
	return m.info(path.Base(p), p, fi), nil
}
