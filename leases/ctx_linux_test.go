package leases_test

// The context of a call bounds its lock waits: a Claim of a record whose
// lock another process holds returns when the context is done, not when
// the table's lock timeout runs out. The other process is this test binary
// run again as the lock holder (as the lock tests of package commit and Go's
// cmd/go/internal/lockedfile do).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/leases"
)

// holderEnv holds "ROOT ID": the helper takes the lock of work record ID
// of the table of 4 work shards at ROOT as any program may (an OFD write
// lock on the record's byte of its shard's .lock file: docs/lease-format.md),
// prints "locked" and holds it until its stdin closes.
const holderEnv = "LEASE_LEASES_TEST_LOCK_HOLDER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(holderEnv); spec != "" {
		os.Exit(holdLock(spec))
	}
	os.Exit(m.Run())
}

func holdLock(spec string) int {
	root, s, _ := strings.Cut(spec, " ")
	id := leasefmt.ID(s)
	name := filepath.Join(root, leasefmt.Work.Dir(), leasefmt.ShardDirName(id.Shard(4), 4), ".lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: id.LockOffset(), Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// lockedTable makes a table whose record of id another process holds the
// lock of, for the rest of the test.
func lockedTable(t *testing.T, item string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "table")
	tb, err := leases.Create(root, leases.WithShards(4, 4))
	if err != nil {
		t.Fatal(err)
	}
	tb.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+root+" "+item)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("lock holder: %q, %v", line, err)
	}
	return root
}

// TestLockWaitEndsWithContext: with a lock timeout of an hour, a Claim of a
// record another process holds the lock of returns once its context's
// deadline passes, or once its context is cancelled, with a result that
// wraps ErrLockTimeout and the context's error.
func TestLockWaitEndsWithContext(t *testing.T) {
	item := id("held-by-another-process")
	root := lockedTable(t, item)
	tb, err := leases.Open(root, leases.WithLockTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			type claimed struct {
				res []leases.Result
				err error
			}
			done := make(chan claimed, 1)
			go func() {
				res, err := tb.Claim(ctx, time.Minute, item)
				done <- claimed{res, err}
			}()
			// Not a timing assertion: a liveness bound far above the
			// context's 200 ms and far below the lock timeout of an hour.
			var c claimed
			select {
			case c = <-done:
			case <-time.After(time.Minute):
				t.Fatal("Claim still waiting for the lock a minute after its context ended")
			}
			if c.err != nil {
				t.Fatalf("Claim: %v", c.err)
			}
			if err := c.res[0].Err(); !errors.Is(err, leases.ErrLockTimeout) || !errors.Is(err, tc.want) {
				t.Fatalf("Claim result: %v; want an error wrapping ErrLockTimeout and %v", err, tc.want)
			}
		})
	}
	// A context done before the call: nothing is tried.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tb.Claim(ctx, time.Minute, item); !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim with a cancelled context: %v, want context.Canceled", err)
	}
}
