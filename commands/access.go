package commands

// Permission errors: a table this process may not write (another
// account's, not shared with its group) is a configuration error, exit 2,
// named with the path and the fix, when nothing was written; one on a
// read-only filesystem is the machine's state, exit 4 like any I/O error
// (docs/design.md#cli), with the same words. commit finds both out before
// a batch writes (its *AccessError).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
)

// accessFailure returns the *AccessError of a batch that could not start
// (every result not attempted because of it), nil otherwise.
func accessFailure(res []commit.Result) *commit.AccessError {
	var ae *commit.AccessError
	for _, r := range res {
		if r.Outcome == commit.OK {
			return nil
		}
		var e *commit.AccessError
		if !errors.As(r.Cause, &e) {
			return nil
		}
		ae = e
	}
	return ae
}

// accessError is the exit 2 of an access failure at path (met writing,
// or reading): the error line and a hint line with the fix, written to
// errw.
func (e *env) accessError(cmd string, path string, cause error, writing bool) error {
	fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease %s: %s", cmd, accessText(path, cause, writing))))
	fmt.Fprintln(e.errw, leasefmt.Bound("lease "+cmd+": hint: "+accessHint(e.root(), cause)))
	return cli.Exit("", accessExit(cause))
}

// accessExit is the exit status of an access failure: 4 for a read-only
// filesystem (the machine's state, which a script retries), 2 for a
// permission denied (the caller's configuration).
func accessExit(cause error) int {
	if errors.Is(cause, unix.EROFS) {
		return exitcode.IO
	}
	return exitcode.Usage
}

// accessText says what could not be used, by whom, and that nothing was
// written.
func accessText(path string, cause error, writing bool) string {
	if errors.Is(cause, unix.EROFS) {
		return fmt.Sprintf("read-only filesystem: %s cannot be written; nothing was written", path)
	}
	who := strconv.Itoa(os.Geteuid())
	if u, err := user.Current(); err == nil {
		who = u.Username + " (uid " + who + ")"
	}
	how := "read"
	if writing {
		how = "opened for writing"
	}
	return fmt.Sprintf("permission denied: %s%s cannot be %s by %s; nothing was written", path, describeOwner(path), how, who)
}

// accessHint is the fix of an access failure.
func accessHint(root string, cause error) string {
	if errors.Is(cause, unix.EROFS) {
		return "the table's filesystem is mounted read-only: remount it read-write; lease status and lease verify read a table without writing"
	}
	return "a table used by several accounts must be shared by a group they are in: lease init --shared group makes one; " +
		"to share this one, its owner (or root) runs: chgrp -R GROUP " + root + " && chmod -R g+rwX " + root +
		" && find " + root + " -type d -exec chmod g+s {} + (then lease fsck checks it)"
}

// describeOwner is " (owner alice, group campaign, mode 0644)" for path,
// "" when it cannot be read.
func describeOwner(path string) string {
	fi, err := os.Lstat(path)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	owner, group := strconv.Itoa(int(st.Uid)), strconv.Itoa(int(st.Gid))
	if u, err := user.LookupId(owner); err == nil {
		owner = u.Username
	}
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	return fmt.Sprintf(" (owner %s, group %s, mode %04o)", owner, group, st.Mode&0o7777)
}

// isAccess reports whether err is permission denied or a read-only
// filesystem.
func isAccess(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS)
}

// accessPath is the path of err (a *fs.PathError's), else fallback.
func accessPath(err error, fallback string) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path
	}
	return fallback
}
