// Package userfile opens and reads the files a user names to lease (the
// configuration, a watched input, the stderr file of release, a content
// file) the one safe way: without blocking on a FIFO or a device at open,
// regular files only (checked on the descriptor, after the open, so a
// name swapped between a check and the open changes nothing), and read
// whole only up to a bound, so that /dev/zero or a 100 MB file named by
// mistake or by a hostile user gives a clear error instead of a hang or
// an unbounded allocation.
//
// Files found inside a table go through commit/seam instead, which reads
// them the same way below a directory descriptor and never follows a link.
package userfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is the cause when the name is not a regular file (a FIFO,
// a device, a directory, a socket).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is the cause when a file read whole is over its bound.
var ErrTooLarge = errors.New("too large")

// Open opens the regular file name for reading. The open does not block
// (O_NONBLOCK: a FIFO with no writer would otherwise hang it), and the
// type is checked on the descriptor; the file's info is returned with it.
// Errors are *fs.PathError naming name.
func Open(name string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%s)", ErrNotRegular, TypeName(fi.Mode()))}
	}
	return f, fi, nil
}

// OpenReader is Open for a caller that only reads (commit.Content.Open).
func OpenReader(name string) (io.ReadCloser, error) {
	f, _, err := Open(name)
	if err != nil {
		return nil, err // not a nil *os.File in a non-nil interface
	}
	return f, nil
}

// Read reads the regular file name whole, at most max bytes; a longer
// file is refused with ErrTooLarge (the read stops at max+1 bytes, so a
// file that grows while it is read is refused too). Errors are
// *fs.PathError naming name.
func Read(name string, max int64) ([]byte, error) {
	f, fi, err := Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrTooLarge, fi.Size(), max)}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	if int64(len(data)) > max {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: more than the %d bytes allowed", ErrTooLarge, max)}
	}
	return data, nil
}

// TypeName names the type of a file, for messages: "a FIFO", "a
// directory", ... (lease fsck names what it finds with it too).
func TypeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsRegular():
		return "a regular file"
	}
	return "not a regular file"
}
