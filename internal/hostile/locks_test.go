package hostile_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/hostile"
)

func init() {
	// readlock ROOT: a stranger takes a read lock (a traditional POSIX
	// one, on the whole file) on every work shard lock file it can open
	// for reading, prints "locked N" and holds them until its stdin
	// closes.
	hostile.Register("readlock", func(args []string) int {
		locks, _ := filepath.Glob(filepath.Join(args[0], "work", "*", ".lock"))
		var held []*os.File
		for _, p := range locks {
			f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				continue
			}
			lk := syscall.Flock_t{Type: syscall.F_RDLCK}
			if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
				f.Close()
				continue
			}
			held = append(held, f)
		}
		fmt.Printf("locked %d\n", len(held))
		io.Copy(io.Discard, os.Stdin)
		return 0
	})
}

// holdReadLocks runs readlock as C on root and returns how many lock files
// it holds a read lock on, and the function that ends it.
func holdReadLocks(t *testing.T, e *hostile.Env, root string) (int, func()) {
	t.Helper()
	cmd := e.Step(context.Background(), hostile.C, "readlock", root)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() { in.Close(); cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	var n int
	if _, serr := fmt.Sscanf(line, "locked %d", &n); err != nil || serr != nil {
		stop()
		t.Fatalf("readlock: %q %v", line, err)
	}
	return n, stop
}

// runGuarded is Env.Run with a guard: a lease still running after 20 s
// is killed, and killed says so. No timing is asserted: the guard only
// ends a wait that must not happen at all.
func runGuarded(t *testing.T, e *hostile.Env, uid int, args ...string) (r hostile.Result, killed bool) {
	t.Helper()
	cmd := e.Command(uid, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	guard := time.AfterFunc(20*time.Second, func() {
		mu.Lock()
		killed = true
		mu.Unlock()
		cmd.Process.Kill()
	})
	cmd.Wait()
	guard.Stop()
	mu.Lock()
	defer mu.Unlock()
	return hostile.Result{Code: cmd.ProcessState.ExitCode(), Out: out.String(), ErrOut: errb.String()}, killed
}

// sharedAll makes a table shared with everyone (--shared all, umask 022)
// as A, with two queued items, and returns its root.
func sharedAll(t *testing.T, e *hostile.Env) string {
	t.Helper()
	root := filepath.Join(e.Campaign, "table")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(root, hostile.A, hostile.Group); err != nil {
		t.Fatal(err)
	}
	e.Must(0, hostile.A, "", "init", "--root", root, "--shared", "all", "--shards", "4")
	e.Must(0, hostile.A, strings.Repeat("0", 63)+"5\n"+strings.Repeat("0", 63)+"6\n", "add", "--root", root)
	return root
}

// TestStrangerCannotHoldLocks (case 5 of issue 38): in a table shared
// with everyone for reading (--shared all, made under umask 022), a
// stranger (C, outside the group) cannot open a shard lock file, so it
// cannot take the read lock that would stop the owner's claim --next. On
// main the lock files are 0664: C read-locks every one, and A's claim
// --next waits out its lock timeout on each item and says "busy: ... all
// held".
func TestStrangerCannotHoldLocks(t *testing.T) {
	t.Parallel()
	e := hostile.New(t)
	root := sharedAll(t, e)
	n, stop := holdReadLocks(t, e, root)
	defer stop()
	if n != 0 {
		t.Errorf("C, outside the group, read-locked %d lock files", n)
	}
	r := e.Run(hostile.A, "", "claim", "--root", root, "--next", "1", "--lock-timeout", "1")
	if r.Code != 0 {
		t.Errorf("A's claim --next while C holds what it could: %s", r)
	}
	// C still reads what --shared all lets it read.
	e.Must(0, hostile.C, "", "status", "--root", root)
}

// TestReadLockReported (case 5 of issue 38): a table made before lock
// files were kept from readers (their mode 0664) has a stranger's read
// locks on its lock files. A's claim --next does not wait for them (a read
// lock is no lease's: waiting helps nothing) and says what holds them,
// not "all held"; lease status warns of them; fsck reports the read locks and the lock files' modes;
// fsck --repair narrows the modes, after which the stranger cannot open
// the lock files again.
func TestReadLockReported(t *testing.T) {
	t.Parallel()
	e := hostile.New(t)
	root := sharedAll(t, e)
	locks, _ := filepath.Glob(filepath.Join(root, "work", "*", ".lock"))
	for _, p := range locks {
		if err := os.Chmod(p, 0o664); err != nil { // what lease made before
			t.Fatal(err)
		}
	}
	n, stop := holdReadLocks(t, e, root)
	if n != len(locks) {
		stop()
		t.Fatalf("C read-locked %d of %d lock files of mode 0664", n, len(locks))
	}
	// A lock timeout far beyond the test's: claim --next must not wait
	// for a read lock at all.
	r, killed := runGuarded(t, e, hostile.A, "claim", "--root", root, "--next", "1", "--lock-timeout", "3600")
	if killed {
		t.Errorf("A's claim --next had not exited after 20 s behind C's read locks (killed): %s", r)
	} else if r.Code == 0 || strings.Contains(r.ErrOut, "all held") || !strings.Contains(r.Out+r.ErrOut, "read lock") {
		t.Errorf("A's claim --next behind C's read locks: %s", r)
	}
	if r := e.Run(hostile.A, "", "status", "--root", root); !strings.Contains(r.ErrOut, "held by a read lock") {
		t.Errorf("lease status does not warn of the read locks: %s", r)
	}
	fsck := e.Run(hostile.A, "", "fsck", "--root", root)
	if fsck.Code&4 == 0 || !strings.Contains(fsck.Out, "held by a read lock") || !strings.Contains(fsck.Out, "lock file mode 0664") {
		t.Errorf("fsck does not report the read locks and the modes: %s", fsck)
	}
	stop()
	e.Must(1, hostile.A, "", "fsck", "--root", root, "--repair")
	if n, stop := holdReadLocks(t, e, root); n != 0 {
		stop()
		t.Fatalf("after fsck --repair, C still read-locks %d lock files", n)
	} else {
		stop()
	}
	e.Must(0, hostile.A, "", "claim", "--root", root, "--next", "1")
}
