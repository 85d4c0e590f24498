package safety

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/leasetool/lease/commit"
)

// Mem is a commit.FS in memory over Pebble's crash-simulating vfs.MemFS, for
// crash tests: CrashClone returns the table as a crash at this moment
// could leave it.
//
// Pebble's crash model, which Mem inherits (pebble/v2 v2.1.7, vfs/mem_fs.go):
//   - a directory keeps the entries it had at its last fsync; each entry
//     changed since (created, renamed in or out, removed) independently
//     keeps its new value or reverts to the synced one, with probability
//     UnsyncedDataPercent. A rename not covered by a directory fsync can
//     therefore be undone, and a cross-directory rename can show the file
//     under both names (the source entry reverts, the destination stays),
//     but never under neither when the source was durable.
//   - a file keeps the data it had at its last fsync; each 4 KiB block
//     written since independently persists or not, and a persisted block
//     past the synced length grows the file with zeros. A write is never
//     torn inside a block, so a record (at most 4 KiB) is all or nothing.
//   - states are sampled at random, not enumerated.
//
// That is enough to undo unsynced renames and lose unsynced data, but not
// to tear a record or to enumerate every state; the crash tests in
// package safety use their own recording FS for those and Mem as an
// independent second opinion.
//
// Mem lives here and not in package commit on purpose: importing Pebble's
// vfs links cockroachdb/errors (and through it sentry and gogo/protobuf)
// into every lease binary, measured at 7.2 -> 13.1 MB and 2.9 -> 5.7 ms per
// process start, a cost every renew-batch would pay for a test helper.
//
// Mem has no symbolic links, no permission bits and no other processes:
// Lock excludes other callers of the same Mem (and of nothing else), with
// the byte-range semantics of FS.Lock.
type Mem struct {
	fs    *vfs.MemFS
	mu    sync.Mutex // makes the check-then-act of CreateExcl, Mkdir and renames atomic
	locks *memLocks
}

// NewMem returns an empty crashable memory FS.
func NewMem() *Mem { return MemOver(vfs.NewCrashableMem()) }

// MemOver returns an FS over m, which should come from
// vfs.NewCrashableMem for CrashClone to work.
func MemOver(m *vfs.MemFS) *Mem {
	return &Mem{fs: m, locks: &memLocks{held: map[memLockKey]bool{}}}
}

// VFS is the underlying Pebble filesystem.
func (m *Mem) VFS() *vfs.MemFS { return m.fs }

// CrashClone returns a new Mem holding a state a crash now could leave: the
// synced state plus, per unsynced entry or block, a cfg.UnsyncedDataPercent
// chance of the newer one. It holds no locks.
func (m *Mem) CrashClone(cfg vfs.CrashCloneCfg) *Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MemOver(m.fs.CrashClone(cfg))
}

// memPath maps a table-relative name to a Pebble path, refusing names
// that would leave the root.
func memPath(op, name string) (string, error) {
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
		}
	}
	return path.Clean("/" + name), nil
}

func memErr(op, name string, err error) error {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	case errors.Is(err, fs.ErrExist):
		return &fs.PathError{Op: op, Path: name, Err: fs.ErrExist}
	case errors.As(err, &pe):
		return &fs.PathError{Op: op, Path: name, Err: errors.New(pe.Err.Error())}
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// stat is Stat with the error mapped; ok is false when name is missing.
func (m *Mem) stat(p string) (vfs.FileInfo, bool, error) {
	fi, err := m.fs.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return fi, true, nil
}

// parentDir checks that the directory of p exists.
func (m *Mem) parentDir(op, name, p string) error {
	fi, ok, err := m.stat(path.Dir(p))
	if err != nil {
		return memErr(op, name, err)
	}
	if !ok {
		return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	if !fi.IsDir() {
		return &fs.PathError{Op: op, Path: name, Err: errors.New("not a directory")}
	}
	return nil
}

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
		return nil, &fs.PathError{Op: "open", Path: name, Err: commit.ErrNotRegular}
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
func (m *Mem) CreateExcl(name string) (commit.File, error) {
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
	return &memFile{f: f, name: name}, nil
}

// Rename implements FS.
func (m *Mem) Rename(oldname, newname string) error {
	op, err := memPath("rename", oldname)
	if err != nil {
		return err
	}
	np, err := memPath("rename", newname)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Pebble unlinks the source before it resolves the destination: check
	// both first so a failed rename loses nothing.
	if _, ok, err := m.stat(op); err != nil || !ok {
		if err == nil {
			err = fs.ErrNotExist
		}
		return memErr("rename", oldname, err)
	}
	if err := m.parentDir("rename", newname, np); err != nil {
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

// RenameNoReplace implements FS as link then unlink, like the NFS
// fallback of the kernel FS: the link fails when newname exists.
func (m *Mem) RenameNoReplace(oldname, newname string) error {
	op, err := memPath("rename", oldname)
	if err != nil {
		return err
	}
	np, err := memPath("rename", newname)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok, err := m.stat(op); err != nil || !ok {
		if err == nil {
			err = fs.ErrNotExist
		}
		return memErr("rename", oldname, err)
	}
	if err := m.parentDir("rename", newname, np); err != nil {
		return err
	}
	if err := m.fs.Link(op, np); err != nil {
		return memErr("rename", newname, err)
	}
	if err := m.fs.Remove(op); err != nil {
		return memErr("rename", oldname, err)
	}
	return nil
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
		err = commit.ErrNotRegular
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
		out = append(out, fs.FileInfoToDirEntry(memInfo{n, fi}))
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
	return memInfo{path.Base(p), fi}, nil
}

// Lock implements FS: the lock file is created when missing (never
// truncated) and byte off is taken in this Mem's lock table.
func (m *Mem) Lock(name string, off int64, timeout time.Duration) (func(), error) {
	p, err := memPath("open", name)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if err := m.parentDir("open", name, p); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	fi, ok, err := m.stat(p)
	switch {
	case err != nil:
		m.mu.Unlock()
		return nil, memErr("open", name, err)
	case ok && fi.IsDir():
		m.mu.Unlock()
		return nil, &fs.PathError{Op: "open", Path: name, Err: commit.ErrNotRegular}
	case !ok:
		f, err := m.fs.OpenReadWrite(p, vfs.WriteCategoryUnspecified)
		if err != nil {
			m.mu.Unlock()
			return nil, memErr("open", name, err)
		}
		f.Close()
	}
	m.mu.Unlock()
	return m.locks.lock(memLockKey{p, off}, name, timeout)
}

// memLocks is a table of held (file, byte) locks with bounded waits.
type memLocks struct {
	mu   sync.Mutex
	held map[memLockKey]bool
}

type memLockKey struct {
	name string
	off  int64
}

func (l *memLocks) lock(k memLockKey, name string, timeout time.Duration) (func(), error) {
	deadline := time.Now().Add(timeout)
	backoff := 100 * time.Microsecond
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
			return nil, &fs.PathError{Op: "Lock", Path: name, Err: commit.ErrLockTimeout}
		}
		time.Sleep(backoff)
		if backoff < 5*time.Millisecond {
			backoff *= 2
		}
	}
}

type memFile struct {
	f    vfs.File
	name string
}

func (f *memFile) Write(p []byte) (int, error) {
	n, err := f.f.Write(p)
	if err != nil {
		return n, memErr("write", f.name, err)
	}
	return n, nil
}

func (f *memFile) Sync() error {
	if err := f.f.Sync(); err != nil {
		return memErr("fsync", f.name, err)
	}
	return nil
}

func (f *memFile) Close() error {
	if err := f.f.Close(); err != nil {
		return memErr("close", f.name, err)
	}
	return nil
}

// memInfo gives a Pebble FileInfo its entry name and the modes the kernel
// FS would create (0666 files, 0777 directories, before any umask).
type memInfo struct {
	name string
	fi   vfs.FileInfo
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.fi.Size() }
func (i memInfo) Mode() fs.FileMode {
	if i.fi.IsDir() {
		return fs.ModeDir | 0o777
	}
	return 0o666
}
func (i memInfo) ModTime() time.Time { return i.fi.ModTime() }
func (i memInfo) IsDir() bool        { return i.fi.IsDir() }
func (i memInfo) Sys() any           { return nil }

// String dumps the tree, for test failures.
func (m *Mem) String() string { return fmt.Sprint(m.fs) }

// load writes t into m and syncs every file and directory: a durable
// starting state.
func (m *Mem) load(t *Tree) error {
	var err error
	t.Walk(func(p string, dir bool, data []byte) {
		if err != nil {
			return
		}
		if dir {
			err = m.Mkdir(p)
			return
		}
		var f commit.File
		if f, err = m.CreateExcl(p); err != nil {
			return
		}
		if _, err = f.Write(data); err == nil {
			err = f.Sync()
		}
		f.Close()
	})
	if err != nil {
		return err
	}
	dirs := []string{""}
	t.Walk(func(p string, dir bool, _ []byte) {
		if dir {
			dirs = append(dirs, p)
		}
	})
	for _, d := range dirs {
		if err := m.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// tree reads m back as a Tree.
func (m *Mem) tree() (*Tree, error) {
	var conv func(name string) (*tnode, error)
	conv = func(name string) (*tnode, error) {
		ents, err := m.ReadDir(name)
		if err != nil {
			return nil, err
		}
		n := &tnode{dir: true, kids: map[string]*tnode{}}
		for _, e := range ents {
			p := path.Join(name, e.Name())
			if e.IsDir() {
				c, err := conv(p)
				if err != nil {
					return nil, err
				}
				n.kids[e.Name()] = c
				continue
			}
			fi, err := m.Lstat(p)
			if err != nil {
				return nil, err
			}
			data, err := m.ReadFile(p, int(fi.Size()))
			if err != nil {
				return nil, err
			}
			n.kids[e.Name()] = &tnode{data: data}
		}
		return n, nil
	}
	root, err := conv("")
	if err != nil {
		return nil, err
	}
	return &Tree{root: root}, nil
}

// capture remembers every content written through it.
type capture struct {
	commit.FS
	mu      sync.Mutex
	written [][]byte
}

func (c *capture) CreateExcl(name string) (commit.File, error) {
	f, err := c.FS.CreateExcl(name)
	if err != nil {
		return nil, err
	}
	return &captureFile{File: f, c: c}, nil
}

type captureFile struct {
	commit.File
	c    *capture
	data []byte
}

func (f *captureFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.data = append(f.data, p[:n]...)
	f.c.mu.Lock()
	f.c.written = append(f.c.written, bytes.Clone(f.data))
	f.c.mu.Unlock()
	return n, err
}

// ExplorePebble runs sc on a Mem over Pebble's crash-simulating vfs and,
// before every call and after the last, takes samples crash clones (one
// with only synced data, one with everything, the rest at random with half
// of the unsynced entries and blocks) and checks each distinct one like
// Explore does.
func (x *Explorer) ExplorePebble(sc *Scenario, samples int) (*Result, error) {
	base, err := Base(sc)
	if err != nil {
		return nil, err
	}
	m := NewMem()
	if err := m.load(base); err != nil {
		return nil, fmt.Errorf("load %s: %w", sc.Name, err)
	}
	type point struct {
		call int
		t    *Tree
	}
	var (
		mu     sync.Mutex
		calls  []Call
		points []point
		rng    = rand.New(rand.NewPCG(x.Seed, 7))
		cerr   error
	)
	clone := func() {
		for i := 0; i < samples; i++ {
			cfg := vfs.CrashCloneCfg{}
			switch {
			case i == 1:
				cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rng}
			case i > 1:
				cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rng}
			}
			t, err := m.CrashClone(cfg).tree()
			if err != nil && cerr == nil {
				cerr = err
			}
			if t != nil {
				points = append(points, point{len(calls), t})
			}
		}
	}
	cap := &capture{FS: m}
	hooked := commit.WithHook(cap, func(op commit.Op, name string) error {
		mu.Lock()
		defer mu.Unlock()
		clone()
		calls = append(calls, Call{Op: op, Name: name})
		return nil
	})
	run := &Run{FS: hooked, calls: func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(calls)
	}, state: func() *Tree {
		t, err := m.tree()
		if err != nil {
			panic(err)
		}
		return t
	}}
	if err := run.start(sc); err != nil {
		return nil, err
	}
	mu.Lock()
	clone()
	mu.Unlock()
	if cerr != nil {
		return nil, cerr
	}
	res := &Result{Scenario: sc.Name, Calls: len(calls), CrashPoints: len(calls) + 1, Acks: len(run.acks)}
	chk := newChecker(x, sc, base, run.acks, cap.written, calls)
	seen := map[[32]byte]bool{}
	for _, p := range points {
		h := p.t.Hash()
		res.Checked++
		if seen[h] && !chk.acksAt(p.call) {
			continue
		}
		if !seen[h] {
			seen[h] = true
			res.States++
		}
		for _, v := range chk.check(p.t, p.call, false) {
			res.Violations = append(res.Violations, fmt.Sprintf("%s (pebble): crash after call %d/%d (%s): %s", sc.Name, p.call, res.Calls, chk.callName(p.call), v))
		}
	}
	sort.Strings(res.Violations)
	return res, nil
}
