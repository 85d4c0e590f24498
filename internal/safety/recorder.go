package safety

// Recorder, its call log and event log, and how it resolves names; its
// seam.FS methods are in recorder_fs.go, its file handles in
// recorder_file.go and its byte locks in recorder_locks.go.

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"sync"

	"github.com/leasetool/lease/commit/seam"
)

// Recorder is a seam.FS in memory that logs every call made through it
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
	share    *seam.Sharing // SetSharing
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
	Op   seam.Op
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
	// mode and gid are what Lstat reports (SetSharing, FixPerm); they are
	// not part of the crash model.
	mode uint32
	gid  int
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

func (r *Recorder) newInode(dir bool) *inode { return r.newInodeMode(dir, false) }

// newInodeMode is newInode for a file that must be writable by the group
// of a shared table (a lock file). Modes are those the kernel FS creates
// before any umask (0666, 0777), or the shared ones after SetSharing.
func (r *Recorder) newInodeMode(dir, writable bool) *inode {
	r.nextIno++
	n := &inode{ino: r.nextIno, dir: dir, mode: 0o666}
	if dir {
		n.kids = map[string]*inode{}
		n.mode = 0o777
	}
	if r.share != nil {
		if dir {
			n.mode = r.share.DirMode(n.mode)
		} else {
			n.mode = r.share.FileMode(n.mode, writable)
		}
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
func (r *Recorder) Injected(op seam.Op, name string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, Call{Op: op, Name: name, Err: err, Injected: true})
}

func (r *Recorder) call(op seam.Op, name string) int {
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
