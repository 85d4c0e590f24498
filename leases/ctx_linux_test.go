package leases_test

// The context of a call bounds its lock waits: a Claim of a record whose
// lock another process holds returns when the context is done, not when
// the table's lock timeout runs out. The other process is this test binary
// run again as the lock holder (holdRecordLock).

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasetool/lease/leases"
)

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
	holdRecordLock(t, root, item)
	return root
}

// TestLockWaitEndsWithContext: with a lock timeout of an hour, a Claim of a
// record another process holds the lock of returns once its context's
// deadline passes, or once its context is cancelled, with a result that
// wraps ErrLockTimeout and the context's error.
func TestLockWaitEndsWithContext(t *testing.T) {
	t.Parallel()
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
