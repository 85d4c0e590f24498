//go:build linux

package hostile_test

// Case 2 of issue 38: lease fsck --repair changes modes only through a
// descriptor of the entry it checked, never through a link swapped in.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/internal/hostile"
)

func init() {
	// swap exchanges the names args[0] (a lock file of the table) and
	// args[1] (a link to a private file, args[2], in the swapper's own
	// directory) with renameat2(RENAME_EXCHANGE) until it is killed; when
	// a repair moved the table's name away it makes both again: the link,
	// and a lock file of its own with mode 0600 that the repair wants to
	// give the group's bits.
	hostile.Register("swap", func(args []string) int {
		lock, link, target := args[0], args[1], args[2]
		for {
			err := unix.Renameat2(unix.AT_FDCWD, link, unix.AT_FDCWD, lock, unix.RENAME_EXCHANGE)
			if errors.Is(err, unix.ENOENT) {
				os.Remove(link)
				if err := os.Symlink(target, link); err != nil {
					return fail(err)
				}
				if f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
					f.Close()
				}
			} else if err != nil {
				return fail(err)
			}
		}
	})
}

// TestFsckRepairSwappedLockLink (case 2): B swaps a shard's lock file (its
// own, mode 0600, so that the repair wants to chmod it) with a link to a
// private file outside the table, in a loop, while lease fsck --repair
// runs again and again: as A, a member, the link points at A's private
// file; as root, at a private file of root's. The link is there before
// the first repair starts. The private file never changes.
func TestFsckRepairSwappedLockLink(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		uid  int
	}{{"member", hostile.A}, {"root", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := hostile.New(t)
			root := e.Table()
			canary := e.Canary(tc.uid, "private", 0o600)
			locks, _ := filepath.Glob(filepath.Join(root, "work", "*", ".lock"))
			if len(locks) == 0 {
				t.Fatalf("no lock file in %s/work", root)
			}
			lock := locks[0]
			// B's lock file, in B's own directory for now; the link at
			// the lock's name.
			mine := filepath.Join(e.Home(hostile.B), "lock")
			for _, step := range []error{
				os.Remove(lock),
				os.WriteFile(mine, nil, 0o600),
				os.Chown(mine, hostile.B, hostile.Group), // as if made in the shard
				os.Symlink(canary, lock),
				os.Lchown(lock, hostile.B, hostile.B),
			} {
				if step != nil {
					t.Fatal(step)
				}
			}
			ctx, stop := context.WithCancel(context.Background())
			swap := e.Step(ctx, hostile.B, "swap", lock, mine, canary)
			if err := swap.Start(); err != nil {
				t.Fatal(err)
			}
			runs := 0
			for ; runs < repairs; runs++ {
				e.Run(tc.uid, "", "fsck", "--root", root, "--repair")
				if fi, err := os.Stat(canary); err != nil || fi.Mode().Perm() != 0o600 {
					break
				}
			}
			stop()
			swap.Wait()
			t.Logf("%d repairs", runs)
		})
	}
}

// repairs is how many repairs each variant runs (LEASE_HOSTILE_REPAIRS
// sets it). On the code before the fix, 6 runs of a variant on 2 cores
// saw the link followed after 0, 0, 1, 2, 8 and 19 repairs that did not
// follow it: 60 is three times the most seen.
var repairs = func() int {
	if n, err := strconv.Atoi(os.Getenv("LEASE_HOSTILE_REPAIRS")); err == nil {
		return n
	}
	return 60
}()
