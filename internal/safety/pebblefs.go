package safety

// Mem, its crash clones, its path and error mapping, and the loading and
// reading back of a Tree; its seam.FS methods are in pebblefs_fs.go,
// its file handles in pebblefs_file.go, its byte locks in
// pebblefs_locks.go, and ExplorePebble in explore_pebble.go.

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/leasetool/lease/commit/seam"
)

// Mem is a seam.FS in memory over Pebble's crash-simulating vfs.MemFS, for
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
// Mem has no symbolic links and no other processes: Lock excludes other
// callers of the same Mem (and of nothing else), with the byte-range
// semantics of FS.Lock. It has every capability of the kernel FS
// (pebblefs_caps.go), modes included, which a crash clone does not keep.
type Mem struct {
	fs    *vfs.MemFS
	mu    sync.Mutex // makes the check-then-act of CreateExcl, Mkdir and renames atomic
	locks *keyLocks[memLockKey]
	// modes are those SetSharing and FixPerm gave, by memfs path (Pebble's
	// MemFS keeps none); share is SetSharing's.
	modeMu sync.Mutex
	modes  map[string]uint32
	share  *seam.Sharing
}

// NewMem returns an empty crashable memory FS.
func NewMem() *Mem { return MemOver(vfs.NewCrashableMem()) }

// MemOver returns an FS over m, which should come from
// vfs.NewCrashableMem for CrashClone to work.
func MemOver(m *vfs.MemFS) *Mem {
	return &Mem{fs: m, locks: newKeyLocks[memLockKey](), modes: map[string]uint32{}}
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
		var f seam.File
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
