package safety

// The seam.FS methods of Recorder on names (Lock is in recorder_locks.go,
// the file handles CreateExcl returns in recorder_file.go): each call is
// logged, and each effect on the namespace emitted as an event.

import (
	"bytes"
	"errors"
	"io/fs"
	"path"
	"sort"
	"syscall"

	"github.com/leasetool/lease/commit/seam"
)

// ReadFile implements seam.FS.
func (r *Recorder) ReadFile(name string, max int) ([]byte, error) {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpRead, name)
	n, err := r.lookup(name)
	if err != nil {
		return nil, r.fail(i, perr("open", name, err))
	}
	if n.dir {
		return nil, r.fail(i, perr("open", name, seam.ErrNotRegular))
	}
	d := n.data
	if len(d) > max+1 {
		d = d[:max+1]
	}
	return bytes.Clone(d), nil
}

// CreateExcl implements seam.FS.
func (r *Recorder) CreateExcl(name string) (seam.File, error) {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpCreate, name)
	d, base, err := r.parent(name)
	if err != nil {
		return nil, r.fail(i, perr("create", name, err))
	}
	if _, ok := d.kids[base]; ok {
		return nil, r.fail(i, perr("create", name, fs.ErrExist))
	}
	n := r.newInode(false)
	d.kids[base] = n
	r.emit(event{kind: evEntry, call: i, key: entKey{d, base}, val: n})
	return &recFile{r: r, n: n, name: name}, nil
}

func (r *Recorder) rename(op seam.Op, oldname, newname string, replace bool) error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(op, newname)
	od, obase, err := r.parent(oldname)
	if err != nil {
		return r.fail(i, perr("rename", oldname, err))
	}
	n, ok := od.kids[obase]
	if !ok {
		return r.fail(i, perr("rename", oldname, fs.ErrNotExist))
	}
	nd, nbase, err := r.parent(newname)
	if err != nil {
		return r.fail(i, perr("rename", newname, err))
	}
	if old, ok := nd.kids[nbase]; ok {
		if !replace {
			return r.fail(i, perr("rename", newname, fs.ErrExist))
		}
		if old.dir {
			return r.fail(i, perr("rename", newname, errors.New("is a directory")))
		}
		if old == n {
			return nil // same file: rename(2) does nothing
		}
	}
	if n.dir {
		for p := nd; p != nil; p = r.parentOf(p) {
			if p == n {
				return r.fail(i, perr("rename", newname, fs.ErrInvalid))
			}
		}
	}
	r.renames++
	delete(od.kids, obase)
	nd.kids[nbase] = n
	r.emit(event{kind: evEntry, call: i, key: entKey{od, obase}, rename: r.renames})
	r.emit(event{kind: evEntry, call: i, key: entKey{nd, nbase}, val: n, rename: r.renames, dst: true})
	return nil
}

// parentOf finds the directory holding d (nil for the root); directories
// are few, a search is fine.
func (r *Recorder) parentOf(d *inode) *inode {
	var find func(p *inode) *inode
	find = func(p *inode) *inode {
		for _, c := range p.kids {
			if c == d {
				return p
			}
			if c.dir {
				if f := find(c); f != nil {
					return f
				}
			}
		}
		return nil
	}
	return find(r.root)
}

// Rename implements seam.FS.
func (r *Recorder) Rename(oldname, newname string) error {
	return r.rename(seam.OpRename, oldname, newname, true)
}

// RenameNoReplace implements seam.FS (renameat2 RENAME_NOREPLACE).
func (r *Recorder) RenameNoReplace(oldname, newname string) error {
	return r.rename(seam.OpRenameNoReplace, oldname, newname, false)
}

// Remove implements seam.FS.
func (r *Recorder) Remove(name string) error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpRemove, name)
	d, base, err := r.parent(name)
	if err != nil {
		return r.fail(i, perr("remove", name, err))
	}
	n, ok := d.kids[base]
	if !ok {
		return r.fail(i, perr("remove", name, fs.ErrNotExist))
	}
	if n.dir && len(n.kids) > 0 {
		return r.fail(i, perr("remove", name, errors.New("directory not empty")))
	}
	delete(d.kids, base)
	r.emit(event{kind: evEntry, call: i, key: entKey{d, base}})
	return nil
}

// Mkdir implements seam.FS.
func (r *Recorder) Mkdir(name string) error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpMkdir, name)
	d, base, err := r.parent(name)
	if err != nil {
		return r.fail(i, perr("mkdir", name, err))
	}
	if _, ok := d.kids[base]; ok {
		return r.fail(i, perr("mkdir", name, fs.ErrExist))
	}
	n := r.newInode(true)
	d.kids[base] = n
	r.emit(event{kind: evEntry, call: i, key: entKey{d, base}, val: n})
	return nil
}

// MkdirPrivate implements seam.PrivateDirMaker: Mkdir, the directory
// with mode 0700 (setgid kept, as the kernel FS keeps a setgid parent's).
func (r *Recorder) MkdirPrivate(name string) error {
	if err := r.Mkdir(name); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, err := r.lookup(name); err == nil {
		n.mode = n.mode&syscall.S_ISGID | 0o700
	}
	return nil
}

// SyncDir implements seam.FS.
func (r *Recorder) SyncDir(name string) error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpSyncDir, name)
	d, err := r.lookup(name)
	if err != nil {
		return r.fail(i, perr("fsync", name, err))
	}
	if !d.dir {
		return r.fail(i, perr("fsync", name, errors.New("not a directory")))
	}
	r.emit(event{kind: evSyncDir, call: i, node: d})
	return nil
}

// SyncFile implements seam.FS: the file's data is durable from here.
func (r *Recorder) SyncFile(name string) error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpFsync, name)
	n, err := r.lookup(name)
	if err != nil {
		return r.fail(i, perr("open", name, err))
	}
	if n.dir {
		return r.fail(i, perr("open", name, seam.ErrNotRegular))
	}
	r.emit(event{kind: evFsync, call: i, node: n})
	return nil
}

// ReadDir implements seam.FS, sorted by name.
func (r *Recorder) ReadDir(name string) ([]fs.DirEntry, error) {
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
	out := make([]fs.DirEntry, 0, len(d.kids))
	for n, c := range d.kids {
		out = append(out, fs.FileInfoToDirEntry(infoOf(n, c)))
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name() < out[b].Name() })
	return out, nil
}

// Lstat implements seam.FS.
func (r *Recorder) Lstat(name string) (fs.FileInfo, error) {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(seam.OpLstat, name)
	n, err := r.lookup(name)
	if err != nil {
		return nil, r.fail(i, perr("lstat", name, err))
	}
	return infoOf(path.Base("/"+name), n), nil
}
