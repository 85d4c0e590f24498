package commit

import (
	"errors"
	"io"
	"io/fs"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
)

// listChunk is how many names a listing reads from a directory at once.
const listChunk = 4096

// ListNames calls fn with every name of directory dir (none when it does
// not exist), read in chunks.
func (s *Store) ListNames(dir string, fn func(name string)) error {
	d, err := seam.OpenDir(s.fs, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &durable.OpError{Op: "list", Path: s.Abs(dir), Err: err}
	}
	defer d.Close()
	for {
		names, err := d.ReadNames(listChunk)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &durable.OpError{Op: "list", Path: s.Abs(dir), Err: err}
		}
		for _, n := range names {
			fn(n)
		}
	}
}

// ScanDir calls fn with every name of directory dir and its inode number
// (0 when the FS gives none), names only valid during the call (none when
// the directory does not exist).
func (s *Store) ScanDir(dir string, fn func(name []byte, ino uint64)) error {
	d, err := seam.OpenDir(s.fs, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &durable.OpError{Op: "list", Path: s.Abs(dir), Err: err}
	}
	defer d.Close()
	if sc, ok := d.(seam.DirentScanner); ok {
		if err := sc.ScanDirents(fn); err != nil {
			return &durable.OpError{Op: "list", Path: s.Abs(dir), Err: err}
		}
		return nil
	}
	for {
		names, err := d.ReadNames(listChunk)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &durable.OpError{Op: "list", Path: s.Abs(dir), Err: err}
		}
		for _, n := range names {
			fn([]byte(n), 0)
		}
	}
}
