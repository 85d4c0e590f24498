package leases_test

// Table.KeepAlive keeps a lease as lease run does (one keeper, package
// keepalive): a lease revoked from outside ends it within about a poll
// interval, and a renewal whose record lock another process holds waits
// no longer than the lease allows.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/leases"
)

// holdLockEnv makes the test binary hold a record's lock when run with it
// set to "ROOT ID": it prints "locked" and holds the lock until its stdin
// ends.
const holdLockEnv = "LEASES_TEST_HOLD_LOCK"

func init() {
	v := os.Getenv(holdLockEnv)
	if v == "" {
		return
	}
	root, id, _ := strings.Cut(v, " ")
	st, err := commit.Open(root, commit.Options{})
	if err == nil {
		var unlock func()
		if unlock, err = st.Lock(context.Background(), leasefmt.Work, leasefmt.ID(id)); err == nil {
			os.Stdout.WriteString("locked\n")
			io.Copy(io.Discard, os.Stdin)
			unlock()
			os.Exit(0)
		}
	}
	os.Stderr.WriteString(err.Error() + "\n")
	os.Exit(1)
}

// holdRecordLock starts a process that holds id's record lock until the test
// ends, or until the function it returns is called.
func holdRecordLock(t *testing.T, root, id string) (release func()) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), holdLockEnv+"="+root+" "+id)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { stdin.Close(); cmd.Wait() }) }
	t.Cleanup(release)
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("the lock holder said %q (%v): %s", line, err, errb.String())
	}
	return release
}

// keepTable is a new table whose clocks agree within 0.1 s (one host).
func keepTable(t *testing.T, opts ...leases.Option) *leases.Table {
	t.Helper()
	opts = append([]leases.Option{leases.WithOwner("keeper"), leases.WithShards(4, 4), leases.WithClockSkew(100 * time.Millisecond)}, opts...)
	tb, err := leases.Create(filepath.Join(t.TempDir(), "table"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb
}

func claimOne(t *testing.T, tb *leases.Table, ttl time.Duration, item string) leases.Lease {
	t.Helper()
	res, err := tb.Claim(context.Background(), ttl, item)
	if err != nil || res[0].Err() != nil {
		t.Fatalf("claim: %v %v", err, res[0].Err())
	}
	return res[0].Lease
}

// keepAlive runs KeepAlive in the background; the returned function waits
// for its error, at most limit (a bound against a keeper that never ends,
// not a timing assertion).
func keepAlive(tb *leases.Table, ctx context.Context, l leases.Lease, interval time.Duration) func(t *testing.T, limit time.Duration, why string) error {
	errc := make(chan error, 1)
	go func() { errc <- tb.KeepAlive(ctx, l, interval) }()
	return func(t *testing.T, limit time.Duration, why string) error {
		t.Helper()
		select {
		case err := <-errc:
			return err
		case <-time.After(limit):
			t.Fatalf("KeepAlive had not returned after %v: %s", limit, why)
		}
		return nil
	}
}

// TestKeepAliveEndsOnRevoke: `lease revoke` of a lease a Go program keeps
// alive ends KeepAlive with ErrLost within about a poll interval, long
// before its next renewal, so the program stops working on an item that
// can be claimed again.
func TestKeepAliveEndsOnRevoke(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	tb := keepTable(t)
	item := id("revoked")
	l := claimOne(t, tb, 10*time.Minute, item)
	wait := keepAlive(tb, context.Background(), l, 5*time.Minute)
	var out, errb bytes.Buffer
	if code := commands.Run([]string{"lease", "revoke", "--root", tb.Root(), item}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("lease revoke: exit %d: %s", code, errb.String())
	}
	took := time.Now()
	err := wait(t, 30*time.Second, "it keeps renewing (every 5 minutes) a lease lease revoke ended")
	if !errors.Is(err, leases.ErrLost) || !errors.Is(err, leases.ErrReleased) {
		t.Fatalf("KeepAlive of a revoked lease: %v, want ErrLost and ErrReleased", err)
	}
	t.Logf("KeepAlive returned %v after the revoke: %v", time.Since(took).Round(time.Millisecond), err)
}

// TestKeepAliveBoundsLockWait: while another process holds the record's
// lock, a renewal waits at most what the lease leaves (not the hour of
// WithLockTimeout), and KeepAlive returns ErrLost at the lease's lost
// point instead of renewing too late.
func TestKeepAliveBoundsLockWait(t *testing.T) {
	t.Parallel()
	tb := keepTable(t, leases.WithLockTimeout(time.Hour))
	item := id("locked")
	l := claimOne(t, tb, 3*time.Second, item)
	holdRecordLock(t, tb.Root(), item)
	wait := keepAlive(tb, context.Background(), l, 500*time.Millisecond)
	err := wait(t, 60*time.Second, "its renewal still waits for the record lock another process holds, long after the 3 s lease ran out")
	if !errors.Is(err, leases.ErrLost) || !errors.Is(err, leases.ErrLockTimeout) {
		t.Fatalf("KeepAlive with the lock held elsewhere: %v, want ErrLost for a lock timeout", err)
	}
	t.Logf("KeepAlive: %v", err)
}

// TestKeepAliveKeepsAndStops: KeepAlive renews past the claim's TTL, and
// its context ends it with nil; a lease completed meanwhile ends it with
// ErrDone.
func TestKeepAliveKeepsAndStops(t *testing.T) {
	tb := keepTable(t)
	item := id("kept")
	// A 4 s claim renewed every 200 ms: the renewals move its expiry on,
	// 1 s past the claim's own within about 1.2 s, and it stays live. Only
	// a 4 s stall of every renewal (a machine far beyond loaded) could
	// lose it.
	l := claimOne(t, tb, 4*time.Second, item)
	ctx, cancel := context.WithCancel(context.Background())
	wait := keepAlive(tb, ctx, l, 200*time.Millisecond)
	var live leases.Result
	testenv.WaitFor(t, "the kept lease's expiry 1 s past its 4 s claim's", time.Minute, func() bool {
		res, err := tb.Verify(context.Background(), l)
		if err != nil || res[0].Err() != nil {
			t.Fatalf("the kept lease is not live: %v %v", err, res[0].Err())
		}
		live = res[0]
		return !live.Expires.Before(l.Expires.Add(time.Second))
	})
	if live.Token != l.Token {
		t.Fatalf("the kept lease has token %d, claimed with %d", live.Token, l.Token)
	}
	cancel()
	if err := wait(t, 30*time.Second, "its context was cancelled"); err != nil {
		t.Fatalf("KeepAlive after cancel: %v, want nil", err)
	}

	done := id("done")
	l = claimOne(t, tb, time.Minute, done)
	wait = keepAlive(tb, context.Background(), l, time.Minute)
	if res, _ := tb.Complete(context.Background(), l); res[0].Err() != nil {
		t.Fatal(res[0].Err())
	}
	if err := wait(t, 30*time.Second, "the lease was completed"); !errors.Is(err, leases.ErrDone) {
		t.Fatalf("KeepAlive of a completed lease: %v, want ErrDone", err)
	}
}
