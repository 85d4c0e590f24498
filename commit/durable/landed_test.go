//go:build linux

package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit/seam"
)

// resentRename is an FS whose renames answer ENOENT as an NFS server
// booted again without its reply cache answers a resent RENAME: after
// renaming (done), or without renaming (the temp file really is gone);
// then, with after set, something else is written at the new name.
type resentRename struct {
	seam.FS
	done  bool
	after []byte
	mu    sync.Mutex
	syncs map[string]int // directory fsyncs per directory
}

func (r *resentRename) rename(o, n string, do func(o, n string) error) error {
	if r.done {
		if err := do(o, n); err != nil {
			return err
		}
	} else if err := r.FS.Remove(o); err != nil {
		return err
	}
	if r.after != nil {
		f, err := r.FS.CreateExcl(n + ".other")
		if err != nil {
			return err
		}
		f.Write(r.after)
		f.Close()
		if err := r.FS.Rename(n+".other", n); err != nil {
			return err
		}
	}
	return &fs.PathError{Op: "rename", Path: n, Err: unix.ENOENT}
}

func (r *resentRename) Rename(o, n string) error { return r.rename(o, n, r.FS.Rename) }
func (r *resentRename) RenameNoReplace(o, n string) error {
	return r.rename(o, n, r.FS.RenameNoReplace)
}

func (r *resentRename) SyncDir(name string) error {
	r.mu.Lock()
	r.syncs[name]++
	r.mu.Unlock()
	return r.FS.SyncDir(name)
}

// TestPutResentRename: a rename that answers ENOENT although it was made
// (a RENAME resent to an NFS server that restarted) is a success when the
// record holds exactly the bytes written, and the directory is still
// fsynced; when the record is missing, holds other bytes, or is a
// symbolic link to our bytes, the error stands.
func TestPutResentRename(t *testing.T) {
	ours := []byte(`{"token":7,"owner":"w1"}` + "\n")
	for _, tc := range []struct {
		name    string
		done    bool   // the rename was made before the ENOENT
		old     []byte // the record before the Put (nil: none)
		after   []byte // written at the record's name after the rename
		symlink bool   // the record is then a symbolic link to our bytes
		create  bool
		ok      bool
	}{
		{name: "made, replace", done: true, old: []byte("old\n"), ok: true},
		{name: "made, create", done: true, create: true, ok: true},
		{name: "not made, old record", old: []byte("old\n")},
		{name: "not made, no record"},
		{name: "not made, no record, create", create: true},
		{name: "made, then replaced by other bytes", done: true, after: []byte(`{"token":8,"owner":"w2"}` + "\n")},
		{name: "made, then a longer record", done: true, after: append(append([]byte{}, ours...), 'x')},
		{name: "not made, a symbolic link to our bytes", symlink: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.Mkdir(filepath.Join(root, "s"), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.old != nil {
				if err := os.WriteFile(filepath.Join(root, "s", "r"), tc.old, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.symlink {
				if err := os.WriteFile(filepath.Join(root, "elsewhere"), ours, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("../elsewhere", filepath.Join(root, "s", "r")); err != nil {
					t.Fatal(err)
				}
			}
			base, err := seam.OS(root)
			if err != nil {
				t.Fatal(err)
			}
			f := &resentRename{FS: base, done: tc.done, after: tc.after, syncs: map[string]int{}}
			d := New(f, root, new(Counts))
			b := d.Batch()
			err = d.Put(b, "s/r", ours, tc.create)
			if ferr := b.Flush(); ferr != nil {
				t.Fatalf("Flush: %v", ferr)
			}
			if tc.ok {
				if err != nil {
					t.Fatalf("Put: %v, want success (the record holds our bytes)", err)
				}
				if f.syncs["s"] != 1 {
					t.Errorf("directory s fsynced %d times, want 1", f.syncs["s"])
				}
			} else if err == nil || !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Put: %v, want the rename's ENOENT", err)
			}
			ents, err := os.ReadDir(filepath.Join(root, "s"))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if e.Name() != "r" {
					t.Errorf("left in the directory: %s", e.Name())
				}
			}
		})
	}
}

// unreachable is an FS whose renames and removes fail with EIO, as an NFS
// soft mount's calls do once the server is away.
type unreachable struct{ seam.FS }

func (u unreachable) Rename(o, n string) error {
	return &fs.PathError{Op: "rename", Path: n, Err: unix.EIO}
}
func (u unreachable) Remove(name string) error {
	return &fs.PathError{Op: "remove", Path: name, Err: unix.EIO}
}

// TestPutSaysTempLeft: when the rename into place fails and so does the
// removal of the temp file, the error says the temp file was left for
// lease fsck --repair (before, it said the temp file was removed).
func TestPutSaysTempLeft(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "s"), 0o755); err != nil {
		t.Fatal(err)
	}
	base, err := seam.OS(root)
	if err != nil {
		t.Fatal(err)
	}
	d := New(unreachable{base}, root, new(Counts))
	b := d.Batch()
	err = d.Put(b, "s/r", []byte("{}\n"), false)
	b.Flush()
	if err == nil || !errors.Is(err, unix.EIO) || strings.Contains(err.Error(), "was removed") || !strings.Contains(err.Error(), "could not be removed either; lease fsck --repair removes it") {
		t.Fatalf("Put: %v; want the rename's EIO, saying the temp file was left for lease fsck --repair", err)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "s"))
	if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), ".r.tmp.") {
		t.Errorf("in the directory: %v; want the temp file left", ents)
	}
}
