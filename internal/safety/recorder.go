package safety

import (
	"bytes"
	"errors"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leasetool/lease/commit"
)

// Recorder is a commit.FS in memory that logs every call made through it
// and every effect of those calls on the namespace and on file data, so
// that the states a crash could leave can be built afterwards.
//
// The persistence model (what a crash after call c may leave):
//
//   - A directory entry (the value of one name in one directory) is durable
//     as of the last fsync of that directory before c. After a crash the
//     name holds its durable value or any later value it took before c,
//     chosen independently of every other name: an unsynced create, mkdir,
//     rename or remove may be undone, one name at a time.
//   - Renames are atomic in one direction only: a crash state in which a
//     rename's source entry is gone also holds its destination entry (every
//     journaled Linux filesystem gives at least that). Its destination may
//     persist while the source also survives (the file under both names).
//   - File data is durable as of the file's last fsync before c. Data
//     written since may be lost or torn: a file holds its durable content,
//     any complete version written since, or a torn version of the last
//     one (the first byte, half, all but the last byte, the full length of
//     zeros, or half followed by zeros).
//   - A file or directory is in the crash state only if its name is; a
//     directory whose own entry was undone takes its whole subtree with it.
//   - The starting state (a Tree) is durable.
//
// What it does not model: reordering that the hardware does below the
// filesystem after an fsync returned (fsync is trusted), metadata other than
// names and data (modes, times), and symbolic links (security tests use the
// kernel filesystem for those). Locks are byte-range locks between callers
// of the same Recorder.
type Recorder struct {
	mu       sync.Mutex
	root     *inode
	nextIno  int
	baseEnt  map[entKey]*inode // durable entries of the starting state
	baseData map[*inode][]byte // durable data of the starting state's files
	baseDir  map[*inode][]string
	log      []event
	calls    []Call
	renames  int
	locks    *byteLocks
	// Yield, when set, is called before every call: runtime.Gosched makes
	// concurrent writers interleave call by call, which calls this fast
	// otherwise never do.
	Yield func()
}

func (r *Recorder) yield() {
	if r.Yield != nil {
		r.Yield()
	}
}

// Call is one call through the seam, in the order the Recorder served it.
type Call struct {
	Op   commit.Op
	Name string
	Err  error
	// Injected is set for a call a hook failed before it reached the FS.
	Injected bool
}

type inode struct {
	ino  int
	dir  bool
	data []byte
	kids map[string]*inode
}

type entKey struct {
	dir  *inode
	name string
}

type evKind int

const (
	evEntry   evKind = iota // a directory entry changed
	evData                  // a file's data changed
	evFsync                 // a file's data was made durable
	evSyncDir               // a directory's entries were made durable
)

type event struct {
	kind   evKind
	call   int
	key    entKey // evEntry
	val    *inode // evEntry: the new value, nil when removed
	node   *inode // evData, evFsync, evSyncDir
	data   []byte // evData: the file's whole content after the write
	rename int    // evEntry: >0 for the two halves of one rename
	dst    bool   // evEntry: the destination half of a rename
}

// NewRecorder returns a Recorder whose durable starting state is t (an
// empty root when t is nil).
func NewRecorder(t *Tree) *Recorder {
	r := &Recorder{baseEnt: map[entKey]*inode{}, baseData: map[*inode][]byte{},
		baseDir: map[*inode][]string{}, locks: newByteLocks()}
	if t == nil {
		t = &Tree{root: &tnode{dir: true, kids: map[string]*tnode{}}}
	}
	r.root = r.build(t.root, map[*tnode]*inode{})
	return r
}

func (r *Recorder) newInode(dir bool) *inode {
	r.nextIno++
	n := &inode{ino: r.nextIno, dir: dir}
	if dir {
		n.kids = map[string]*inode{}
	}
	return n
}

// build makes the inodes of t; a file node met twice (a file with two
// names) becomes one inode.
func (r *Recorder) build(t *tnode, seen map[*tnode]*inode) *inode {
	if n, ok := seen[t]; ok && !t.dir {
		return n
	}
	n := r.newInode(t.dir)
	if !t.dir {
		n.data = bytes.Clone(t.data)
		r.baseData[n] = n.data
		seen[t] = n
		return n
	}
	for name, k := range t.kids {
		c := r.build(k, seen)
		n.kids[name] = c
		r.baseEnt[entKey{n, name}] = c
		r.baseDir[n] = append(r.baseDir[n], name)
	}
	return n
}

// Calls returns the calls served so far.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// NumCalls is the number of calls served so far.
func (r *Recorder) NumCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// Written returns every complete content a file was given by a write, in
// the order written: the versions a reader may legitimately see.
func (r *Recorder) Written() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for _, e := range r.log {
		if e.kind == evData {
			out = append(out, e.data)
		}
	}
	return out
}

// Injected logs a call that a hook failed with err before it reached the
// Recorder, so the call log shows every attempt in order.
func (r *Recorder) Injected(op commit.Op, name string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, Call{Op: op, Name: name, Err: err, Injected: true})
}

func (r *Recorder) call(op commit.Op, name string) int {
	r.calls = append(r.calls, Call{Op: op, Name: name})
	return len(r.calls) - 1
}

func (r *Recorder) fail(i int, err error) error {
	r.calls[i].Err = err
	return err
}

func (r *Recorder) emit(e event) { r.log = append(r.log, e) }

func splitName(name string) ([]string, error) {
	name = strings.Trim(name, "/")
	if name == "" || name == "." {
		return nil, nil
	}
	parts := strings.Split(name, "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return nil, fs.ErrInvalid
		}
	}
	return parts, nil
}

// lookup resolves name to its inode (the root for "").
func (r *Recorder) lookup(name string) (*inode, error) {
	parts, err := splitName(name)
	if err != nil {
		return nil, err
	}
	n := r.root
	for _, p := range parts {
		if !n.dir {
			return nil, errors.New("not a directory")
		}
		c, ok := n.kids[p]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = c
	}
	return n, nil
}

// parent resolves the directory of name and returns it with the base name.
func (r *Recorder) parent(name string) (*inode, string, error) {
	parts, err := splitName(name)
	if err != nil {
		return nil, "", err
	}
	if len(parts) == 0 {
		return nil, "", fs.ErrInvalid
	}
	d, err := r.lookup(strings.Join(parts[:len(parts)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !d.dir {
		return nil, "", errors.New("not a directory")
	}
	return d, parts[len(parts)-1], nil
}

func perr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// ReadFile implements commit.FS.
func (r *Recorder) ReadFile(name string, max int) ([]byte, error) {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(commit.OpRead, name)
	n, err := r.lookup(name)
	if err != nil {
		return nil, r.fail(i, perr("open", name, err))
	}
	if n.dir {
		return nil, r.fail(i, perr("open", name, commit.ErrNotRegular))
	}
	d := n.data
	if len(d) > max+1 {
		d = d[:max+1]
	}
	return bytes.Clone(d), nil
}

// CreateExcl implements commit.FS.
func (r *Recorder) CreateExcl(name string) (commit.File, error) {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(commit.OpCreate, name)
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

func (r *Recorder) rename(op commit.Op, oldname, newname string, replace bool) error {
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

// Rename implements commit.FS.
func (r *Recorder) Rename(oldname, newname string) error {
	return r.rename(commit.OpRename, oldname, newname, true)
}

// RenameNoReplace implements commit.FS (renameat2 RENAME_NOREPLACE).
func (r *Recorder) RenameNoReplace(oldname, newname string) error {
	return r.rename(commit.OpRenameNoReplace, oldname, newname, false)
}

// Remove implements commit.FS.
func (r *Recorder) Remove(name string) error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(commit.OpRemove, name)
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

// Mkdir implements commit.FS.
func (r *Recorder) Mkdir(name string) error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(commit.OpMkdir, name)
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

// SyncDir implements commit.FS.
func (r *Recorder) SyncDir(name string) error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(commit.OpSyncDir, name)
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

// SyncFile implements commit.FS: the file's data is durable from here.
func (r *Recorder) SyncFile(name string) error {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(commit.OpFsync, name)
	n, err := r.lookup(name)
	if err != nil {
		return r.fail(i, perr("open", name, err))
	}
	if n.dir {
		return r.fail(i, perr("open", name, commit.ErrNotRegular))
	}
	r.emit(event{kind: evFsync, call: i, node: n})
	return nil
}

// ReadDir implements commit.FS, sorted by name.
func (r *Recorder) ReadDir(name string) ([]fs.DirEntry, error) {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(commit.OpReadDir, name)
	d, err := r.lookup(name)
	if err != nil {
		return nil, r.fail(i, perr("open", name, err))
	}
	if !d.dir {
		return nil, r.fail(i, perr("open", name, errors.New("not a directory")))
	}
	out := make([]fs.DirEntry, 0, len(d.kids))
	for n, c := range d.kids {
		out = append(out, fs.FileInfoToDirEntry(info{n, c.dir, int64(len(c.data)), c.ino}))
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name() < out[b].Name() })
	return out, nil
}

// Lstat implements commit.FS.
func (r *Recorder) Lstat(name string) (fs.FileInfo, error) {
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(commit.OpLstat, name)
	n, err := r.lookup(name)
	if err != nil {
		return nil, r.fail(i, perr("lstat", name, err))
	}
	return info{path.Base("/" + name), n.dir, int64(len(n.data)), n.ino}, nil
}

// Lock implements commit.FS: the lock file is created when missing.
func (r *Recorder) Lock(name string, off int64, timeout time.Duration) (func(), error) {
	r.yield()
	r.mu.Lock()
	i := r.call(commit.OpLock, name)
	d, base, err := r.parent(name)
	if err != nil {
		err = r.fail(i, perr("open", name, err))
		r.mu.Unlock()
		return nil, err
	}
	n, ok := d.kids[base]
	switch {
	case ok && n.dir:
		err = r.fail(i, perr("open", name, commit.ErrNotRegular))
		r.mu.Unlock()
		return nil, err
	case !ok:
		n = r.newInode(false)
		d.kids[base] = n
		r.emit(event{kind: evEntry, call: i, key: entKey{d, base}, val: n})
	}
	r.mu.Unlock()
	unlock, err := r.locks.lock(n, off, timeout)
	if err != nil {
		r.mu.Lock()
		r.fail(i, err)
		r.mu.Unlock()
		return nil, perr("Lock", name, err)
	}
	return unlock, nil
}

type recFile struct {
	r      *Recorder
	n      *inode
	name   string
	closed bool
}

func (f *recFile) Write(p []byte) (int, error) {
	r := f.r
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(commit.OpWrite, f.name)
	if f.closed {
		return 0, r.fail(i, perr("write", f.name, fs.ErrClosed))
	}
	f.n.data = append(bytes.Clone(f.n.data), p...)
	r.emit(event{kind: evData, call: i, node: f.n, data: f.n.data})
	return len(p), nil
}

func (f *recFile) Sync() error {
	r := f.r
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(commit.OpFsync, f.name)
	if f.closed {
		return r.fail(i, perr("fsync", f.name, fs.ErrClosed))
	}
	r.emit(event{kind: evFsync, call: i, node: f.n})
	return nil
}

func (f *recFile) Close() error {
	r := f.r
	r.yield()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.call(commit.OpClose, f.name)
	if f.closed {
		return r.fail(i, perr("close", f.name, fs.ErrClosed))
	}
	f.closed = true
	return nil
}

type info struct {
	name string
	dir  bool
	size int64
	ino  int
}

func (i info) Name() string { return i.name }
func (i info) Size() int64  { return i.size }
func (i info) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o777
	}
	return 0o666
}
func (i info) ModTime() time.Time { return time.Time{} }
func (i info) IsDir() bool        { return i.dir }

// Sys gives the inode number, so that a file with two names (a rename
// whose source reappeared after a crash) reads as one file, as on disk.
func (i info) Sys() any { return &syscall.Stat_t{Dev: 1, Ino: uint64(i.ino)} }

// byteLocks is a table of held (file, byte) locks with bounded waits.
type byteLocks struct {
	mu   sync.Mutex
	held map[lockKey]bool
}

type lockKey struct {
	n   *inode
	off int64
}

func newByteLocks() *byteLocks { return &byteLocks{held: map[lockKey]bool{}} }

func (l *byteLocks) lock(n *inode, off int64, timeout time.Duration) (func(), error) {
	k := lockKey{n, off}
	deadline := time.Now().Add(timeout)
	backoff := 50 * time.Microsecond
	for {
		l.mu.Lock()
		if !l.held[k] {
			l.held[k] = true
			l.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					l.mu.Lock()
					delete(l.held, k)
					l.mu.Unlock()
				})
			}, nil
		}
		l.mu.Unlock()
		if !time.Now().Before(deadline) {
			return nil, commit.ErrLockTimeout
		}
		time.Sleep(backoff)
		if backoff < 5*time.Millisecond {
			backoff *= 2
		}
	}
}
