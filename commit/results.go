package commit

// Whole results (docs/lease-format.md, Staging): a published result is a
// regular file or a directory tree of regular files, moved into public/ by
// one rename that never replaces. "publish":"NAME" moves
// stage/ID.TOKEN/NAME to public/NAME; "publish":"." moves the staging
// directory stage/ID.TOKEN itself to public/ID, a name no other item's
// result can take. Before the move every file of the result is fsynced and
// every directory of it too (deepest first), so the tree that appears in
// public/ is whole; after it public/ is fsynced, then the directory the
// result left (G8).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
	"golang.org/x/sys/unix"
)

// maxResultDepth bounds the depth of a directory published as a result.
const maxResultDepth = 32

// sameTree reports whether the directories a and b hold the same tree:
// the same names, types and file bytes (at most maxCompare bytes in all
// are compared). A crash can show a directory result under both names of
// the rename that published it; publishing it again would change nothing.
func (s *Store) sameTree(a, b string) bool {
	budget := int64(maxCompare)
	var same func(a, b string, depth int) bool
	same = func(a, b string, depth int) bool {
		if depth > maxResultDepth {
			return false
		}
		ea, err1 := s.fs.ReadDir(a)
		eb, err2 := s.fs.ReadDir(b)
		if err1 != nil || err2 != nil || len(ea) != len(eb) {
			return false
		}
		names := map[string]fs.FileMode{}
		for _, e := range eb {
			names[e.Name()] = e.Type()
		}
		for _, e := range ea {
			t, ok := names[e.Name()]
			if !ok || t.Type() != e.Type().Type() {
				return false
			}
			pa, pb := path.Join(a, e.Name()), path.Join(b, e.Name())
			switch {
			case e.IsDir():
				if !same(pa, pb, depth+1) {
					return false
				}
			case e.Type().IsRegular():
				fa, err1 := s.fs.Lstat(pa)
				fb, err2 := s.fs.Lstat(pb)
				if err1 != nil || err2 != nil || fa.Size() != fb.Size() {
					return false
				}
				if budget -= fa.Size(); budget < 0 {
					return false
				}
				da, err1 := s.fs.ReadFile(pa, int(fa.Size()))
				db, err2 := s.fs.ReadFile(pb, int(fb.Size()))
				if err1 != nil || err2 != nil || string(da) != string(db) {
					return false
				}
			default:
				return false
			}
		}
		return true
	}
	return same(a, b, 0)
}

// syncResult makes the staged result at name durable before it is
// published: a regular file is fsynced; a directory is walked, every
// regular file in it fsynced and every directory of it fsynced after its
// entries (deepest first, the result's own directory last). Anything but
// regular files and directories (a symbolic link, a FIFO), an entry owned
// by another account or a file with more than one link is refused with
// ErrStaged, before anything is written or any mode changed: a result is
// data its publisher staged, and links are never followed in a table. In
// a shared table every file and directory of it gets the group's modes on
// the way (shareResult).
func (s *Store) syncResult(name string) error {
	fi, err := s.fs.Lstat(name)
	if err != nil {
		return err
	}
	if err := s.checkStaged(name, fi); err != nil {
		return err
	}
	if fi.Mode().IsRegular() {
		if err := s.shareResult(name, fi); err != nil {
			return err
		}
		if err := s.fs.SyncFile(name); err != nil {
			return err
		}
		s.stats.FileSyncs.Add(1)
		return nil
	}
	if err := s.checkResultTree(name, 0); err != nil {
		return err
	}
	return s.syncTree(name, fi)
}

// checkResultTree refuses a staged directory holding anything but regular
// files and directories, entries checkStaged refuses, or nested deeper
// than maxResultDepth.
func (s *Store) checkResultTree(dir string, depth int) error {
	if depth > maxResultDepth {
		return fmt.Errorf("%w %s: nested more than %d directories deep", ErrStaged, s.Abs(dir), maxResultDepth)
	}
	ents, err := s.fs.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := path.Join(dir, e.Name())
		switch t := e.Type(); {
		case t.IsDir(), t.IsRegular():
			fi, err := s.fs.Lstat(p)
			if err != nil {
				return err
			}
			if fi.Mode().Type() != t.Type() {
				return fmt.Errorf("%w %s: changed while it was checked", ErrStaged, s.Abs(p))
			}
			if err := s.checkStaged(p, fi); err != nil {
				return err
			}
			if t.IsDir() {
				if err := s.checkResultTree(p, depth+1); err != nil {
					return err
				}
			}
		case t&fs.ModeSymlink != 0:
			return fmt.Errorf("%w %s: a symbolic link (a result holds regular files and directories only; links are never followed)", ErrStaged, s.Abs(p))
		default:
			return fmt.Errorf("%w %s: not a regular file or a directory", ErrStaged, s.Abs(p))
		}
	}
	return nil
}

// syncTree fsyncs every file below dir (fi its Lstat), then each
// directory after its entries, dir itself last, giving each the modes of
// a shared table first.
func (s *Store) syncTree(dir string, fi fs.FileInfo) error {
	ents, err := s.fs.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := path.Join(dir, e.Name())
		efi, err := s.fs.Lstat(p)
		if err != nil {
			return err
		}
		if efi.IsDir() {
			if err := s.syncTree(p, efi); err != nil {
				return err
			}
			continue
		}
		if err := s.shareResult(p, efi); err != nil {
			return err
		}
		if err := s.fs.SyncFile(p); err != nil {
			return err
		}
		s.stats.FileSyncs.Add(1)
	}
	if err := s.shareResult(dir, fi); err != nil {
		return err
	}
	if err := s.fs.SyncDir(dir); err != nil {
		return err
	}
	s.stats.DirectorySyncs.Add(1)
	return nil
}

// CompleteStage completes one lease and publishes its whole staging
// directory stage/ID.TOKEN/ as public/ID/ (lease run --complete with a
// non-empty LEASE_STAGE): CompletePublish with leasefmt.PublishStage.
func (s *Store) CompleteStage(ctx context.Context, it Item) (Result, error) {
	return s.CompletePublish(ctx, it, leasefmt.PublishStage)
}

// RemoveEmptyStage removes the staging directory of token of id when it
// is empty, and reports whether it was empty (or missing): one rmdir
// answers both, where listing it first and removing it after cost an
// open, two getdents and a close more an item. A directory with anything
// in it stays (ENOTEMPTY, or EEXIST as POSIX allows). Any other error of
// the rmdir (a filesystem that refuses it) leaves the answer to a listing.
func (s *Store) RemoveEmptyStage(id leasefmt.ID, token int64) (bool, error) {
	rel := layout.StagePath(id, token)
	err := s.fs.Remove(rel)
	switch {
	case err == nil, errors.Is(err, fs.ErrNotExist):
		return true, nil
	case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
		return false, nil
	}
	ents, err := s.fs.ReadDir(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	return len(ents) == 0, err
}
