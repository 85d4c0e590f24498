package leases_test

// Table.Work follows lease work's rules: a lease lost while the function
// runs cancels its context and is no attempt; ctx ends Work releasing the
// item with no attempt; a busy queue is waited for without losing the
// lease then granted; a result that cannot be published never makes the
// item done; a command's exit status is recorded; the table's errors end
// Work with an error that says which.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/leases"
)

func workTable(t *testing.T) (*leases.Table, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "table")
	tb, err := leases.Create(root, leases.WithShards(4, 4), leases.WithClockSkew(100*time.Millisecond), leases.WithOwner("test/work"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb, root
}

// workRecord reads the work record of id.
func workRecord(t *testing.T, root, id string) *leasefmt.Record {
	t.Helper()
	st, err := commit.Open(root, commit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.Read(context.Background(), leasefmt.Work, leasefmt.ID(id))
	if err != nil || rec == nil {
		t.Fatalf("record of %s: %v", id, err)
	}
	return rec
}

// TestWorkLostLeaseIsNoAttempt: a lease released from outside while the
// function runs cancels the function's context with a cause wrapping
// ErrLost; that run counts no attempt, and Work goes on (it claims the
// item again and finishes it).
func TestWorkLostLeaseIsNoAttempt(t *testing.T) {
	t.Parallel()
	tb, root := workTable(t)
	ctx := context.Background()
	res, _ := tb.AddContent(ctx, []byte("lost"))
	id := res[0].ID
	other, _ := leases.Open(root)
	defer other.Close()
	var causes []error
	runs := 0
	stats, err := tb.Work(ctx, func(ctx context.Context, it leases.Item) error {
		runs++
		if runs > 1 {
			return nil
		}
		other.Release(context.Background(), it.Lease) // another process with the token gives it up
		<-ctx.Done()
		causes = append(causes, context.Cause(ctx))
		return ctx.Err()
	}, leases.WorkOptions{MaxAttempts: 1, TTL: 10 * time.Second, Interval: time.Second})
	if err != nil || stats.Items != 2 || stats.Finishes["lost"] != 1 || stats.Finishes["done"] != 1 {
		t.Fatalf("Work: %+v, %v; want a lost run, then done (max_attempts 1: a lost run counted would fail it)", stats, err)
	}
	if len(causes) != 1 || !errors.Is(causes[0], leases.ErrLost) {
		t.Errorf("the function's context ended with %v, want a cause wrapping ErrLost", causes)
	}
	if rec := workRecord(t, root, id); rec.Status != leasefmt.Done || rec.Attempts != 0 || rec.Token != 2 {
		t.Errorf("record %+v, want done with token 2, no attempt", rec)
	}
}

// TestWorkStopsOnContext: ctx ending while the function runs ends Work
// with ctx's error; the item is released with no attempt counted.
func TestWorkStopsOnContext(t *testing.T) {
	t.Parallel()
	tb, root := workTable(t)
	res, _ := tb.AddContent(context.Background(), []byte("stopped"))
	ctx, cancel := context.WithCancel(context.Background())
	_, err := tb.Work(ctx, func(fctx context.Context, it leases.Item) error {
		cancel()
		<-fctx.Done()
		return errors.New("interrupted")
	}, leases.WorkOptions{MaxAttempts: 1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Work: %v, want context.Canceled", err)
	}
	if rec := workRecord(t, root, res[0].ID); rec.Status != leasefmt.Released || rec.Attempts != 0 {
		t.Errorf("record %+v, want released with no attempt", rec)
	}
}

// TestWorkWaitsForBusyQueue: the only item is held by another lease for
// longer than Work's ttl - skew - grace; Work waits, takes it once the
// holder releases it, and keeps it: the lost point counts from the claim
// that granted it.
func TestWorkWaitsForBusyQueue(t *testing.T) {
	t.Parallel()
	tb, root := workTable(t)
	ctx := context.Background()
	id := leases.IDOf([]byte("busy"))
	tb.Add(ctx, id)
	other, _ := leases.Open(root, leases.WithClockSkew(100*time.Millisecond))
	defer other.Close()
	held, _ := other.Claim(ctx, 10*time.Minute, id)
	if held[0].Err() != nil {
		t.Fatal(held[0].Err())
	}
	// Work's lease is told to stop ttl - skew - grace = 20 - 0.1 - 8 =
	// 11.9 s after the claim (or renewal, every 0.5 s) that began it: not
	// reached by accident once granted. The item stays held until released
	// here, past that point counted from before the wait (a lower bound on
	// the wait, not a timing assertion).
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(13 * time.Second)
		if res, _ := other.Release(ctx, held[0].Lease); res[0].Err() != nil {
			t.Errorf("release of the holder's lease: %v", res[0].Err())
		}
	}()
	expires := func(id string) float64 {
		st, err := commit.Open(root, commit.Options{})
		if err != nil {
			return 0
		}
		defer st.Close()
		rec, err := st.Read(context.Background(), leasefmt.Work, leasefmt.ID(id))
		if err != nil || rec == nil {
			return 0
		}
		return rec.ExpiresAt
	}
	stats, err := tb.Work(ctx, func(ctx context.Context, it leases.Item) error {
		// Done once a renewal has moved the record's expires_at: a lease
		// declared lost instead ends ctx.
		granted := expires(it.ID)
		for expires(it.ID) <= granted {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(20 * time.Millisecond):
			}
		}
		return nil
	}, leases.WorkOptions{TTL: 20 * time.Second, Interval: 500 * time.Millisecond, Grace: 8 * time.Second})
	<-released
	if err != nil || stats.Finishes["done"] != 1 || stats.Items != 1 {
		t.Fatalf("Work: %+v, %v; want the item taken after the wait and done", stats, err)
	}
	if rec := workRecord(t, root, id); rec.Token != 2 {
		t.Errorf("token %d, want 2", rec.Token)
	}
}

// TestWorkPublishRefusedAndExitStatus: a result that cannot be published
// (public/ID is taken) leaves the item not done with an attempt counted
// and what was staged in place; a command's exit status is recorded.
func TestWorkPublishRefusedAndExitStatus(t *testing.T) {
	t.Parallel()
	tb, root := workTable(t)
	ctx := context.Background()
	res, _ := tb.AddContent(ctx, []byte("taken"), []byte("exit 7"))
	taken, seven := res[0].ID, res[1].ID
	os.MkdirAll(filepath.Join(root, "public", taken), 0o755)
	stats, err := tb.Work(ctx, func(ctx context.Context, it leases.Item) error {
		if it.ID == seven {
			return exec.CommandContext(ctx, "sh", "-c", "exit 7").Run()
		}
		return os.WriteFile(filepath.Join(it.Stage, "crash"), []byte("finding\n"), 0o644)
	}, leases.WorkOptions{MaxAttempts: 1})
	if err != nil || stats.Finishes["publish-refused"] != 1 || stats.Finishes["failed"] != 1 {
		t.Fatalf("Work: %+v, %v", stats, err)
	}
	if rec := workRecord(t, root, taken); rec.Status != leasefmt.Failed || rec.Attempts != 1 {
		t.Errorf("the item whose publish was refused: %+v", rec)
	}
	if got, err := os.ReadFile(filepath.Join(root, "stage", taken+".1", "crash")); err != nil || string(got) != "finding\n" {
		t.Errorf("what was staged: %q, %v", got, err)
	}
	if rec := workRecord(t, root, seven); rec.Status != leasefmt.Failed || rec.ExitStatus != 7 {
		t.Errorf("the item whose command exited 7: %+v", rec)
	}
}

// TestWorkTableError: only a corrupt record left to claim ends Work with
// an error wrapping ErrCorrupt.
func TestWorkTableError(t *testing.T) {
	t.Parallel()
	tb, root := workTable(t)
	ctx := context.Background()
	id := leases.IDOf([]byte("corrupt"))
	tb.Add(ctx, id)
	shard := filepath.Join(root, "work", leasefmt.ShardDirName(leasefmt.ID(id).Shard(4), 4))
	os.MkdirAll(shard, 0o755)
	os.WriteFile(filepath.Join(shard, id+".json"), []byte("{torn"), 0o644)
	_, err := tb.Work(ctx, func(context.Context, leases.Item) error { return nil }, leases.WorkOptions{})
	if !errors.Is(err, leases.ErrCorrupt) {
		t.Fatalf("Work: %v, want an error wrapping ErrCorrupt", err)
	}
}

// TestDefaultOwnerIsWorkers: without WithOwner a table's leases carry
// USER@HOST/PID, as lease run's and lease work's do, so that the workers
// of one host are told apart; it was USER@HOST.
func TestDefaultOwnerIsWorkers(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "table")
	tb, err := leases.Create(root, leases.WithShards(4, 4))
	if err != nil {
		t.Fatal(err)
	}
	res, err := tb.Claim(context.Background(), time.Minute, strings.Repeat("0a", 32))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(res[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`/%d"`, os.Getpid()); !strings.Contains(string(data), want) {
		t.Errorf("the record without WithOwner: %s\nwant an owner ending in %s", data, want)
	}
}

// TestWorkFinishWaitsNoLongerThanARenewal: the finish of an item waits for
// its record's lock no longer than a renewal would (ttl - interval -
// clock skew), through its context's deadline, not the table's lock
// timeout (an hour here): with another process holding the lock when the
// function returns, Work ends with an error wrapping ErrLockTimeout. The
// lock holder is let go after 20 s, far past the renewal's bound of 1.9 s:
// a finish that waited the table's lock timeout then finishes the item,
// and the run that follows it (no lock held) makes it done.
func TestWorkFinishWaitsNoLongerThanARenewal(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "table")
	tb, err := leases.Create(root, leases.WithShards(4, 4), leases.WithClockSkew(100*time.Millisecond),
		leases.WithOwner("test/work"), leases.WithLockTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if _, err := tb.AddContent(context.Background(), []byte("locked at the finish")); err != nil {
		t.Fatal(err)
	}
	var release func()
	stats, err := tb.Work(context.Background(), func(ctx context.Context, it leases.Item) error {
		if release == nil {
			release = holdRecordLock(t, root, it.ID)
			time.AfterFunc(20*time.Second, release)
		}
		return nil
	}, leases.WorkOptions{TTL: 3 * time.Second, Interval: time.Second})
	if release != nil {
		release()
	}
	if !errors.Is(err, leases.ErrLockTimeout) || stats.Finishes["done"] != 0 {
		t.Fatalf("Work: %+v, %v; want the finish refused with ErrLockTimeout", stats, err)
	}
}
