package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// OpError is an I/O error of one step of an operation on a record. Its text
// names the step, the file when it is not the record itself (which the
// caller's report names), and the cause, with a hint for the causes an
// operator can do something about: a full or read-only filesystem, missing
// permissions, a stale NFS handle.
type OpError struct {
	// Op is the step, as a phrase: "cannot lock the record".
	Op string
	// Path is the file of the step when it is worth naming; "" otherwise.
	Path string
	Err  error
}

// Error reads "OP PATH: cause", with a hint for errors an operator can fix.
func (e *OpError) Error() string {
	msg := e.Op
	if e.Path != "" {
		msg += " " + e.Path
	}
	return msg + ": " + Describe(e.Err)
}

// Unwrap returns the system call's error, for errors.Is(err, syscall.ENOSPC).
func (e *OpError) Unwrap() error { return e.Err }

// Describe renders err for a report: a path error keeps its operation and
// path, and an errno the operator can fix gets a hint.
func Describe(err error) string {
	if err == nil {
		return ""
	}
	var oe *OpError
	if errors.As(err, &oe) && oe == err {
		return oe.Error()
	}
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Op + " " + pe.Path + ": " + pe.Err.Error()
	}
	if h := hint(err); h != "" {
		msg += " (" + h + ")"
	}
	return msg
}

// hint says what an errno means for the table, or "".
func hint(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return ""
	}
	switch errno {
	case unix.EROFS:
		return "the table's filesystem is mounted read-only; nothing was written"
	case unix.ENOSPC:
		return "the table's filesystem is full; the record is unchanged and the temp file removed"
	case unix.EDQUOT:
		return "the disk quota of the table's filesystem is exhausted; the record is unchanged"
	case unix.EACCES, unix.EPERM:
		return "permission denied: check the owner and modes of the table (lease init --shared for a table shared by a group)"
	case unix.ESTALE:
		return "stale file handle: the file was replaced on another client of a network filesystem"
	case unix.EIO:
		return "the storage reported an I/O error"
	}
	return ""
}

// Bare is the cause of a path error without its path: for a temp file that
// is gone by the time the error is read.
func Bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
