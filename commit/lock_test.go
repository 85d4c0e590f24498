package commit_test

// Lock tests (docs/design.md#locks). The cross-process tests re-run this test binary as
// the lock holder (testenv.Role), as Go's cmd/go/internal/lockedfile tests do.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// The "lock holder" role (testenv.Role) takes the lock of work record ID
// in the table at ROOT (MODE ofd: through Store.Lock; MODE posix: a classic
// fcntl F_SETLK record lock, as another program would), prints "locked" and
// holds it until killed or until its stdin closes. Its arguments: MODE ROOT ID.
func init() { testenv.Role("lock holder", lockHolder) }

func lockHolder(f []string) int {
	if len(f) != 3 {
		fmt.Fprintf(os.Stderr, "lock holder: bad arguments %q\n", f)
		return 2
	}
	mode, root, id := f[0], f[1], leasefmt.ID(f[2])
	st, err := commit.Open(root, commit.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch mode {
	case "ofd":
		st.SetLockTimeout(10 * time.Second)
		if _, err := st.Lock(context.Background(), leasefmt.Work, id); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case "posix":
		lf, err := os.OpenFile(filepath.Join(root, st.ShardDir(leasefmt.Work, id.Shard(st.Table().WorkShards)), layout.LockFile), os.O_RDWR, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK, Start: id.LockOffset(), Len: 1}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			err := unix.FcntlFlock(lf.Fd(), unix.F_SETLK, &lk)
			if err == nil {
				break
			}
			if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) || time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
	default:
		return 2
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin) // hold until the parent goes away
	return 0
}

// startLockHolder runs the helper and waits until it holds the lock.
func startLockHolder(t *testing.T, mode, root string, id leasefmt.ID) *exec.Cmd {
	t.Helper()
	cmd := testenv.RoleCmd(context.Background(), "lock holder", mode, root, string(id))
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
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("lock holder said %q, %v", line, err)
	}
	return cmd
}

// TestLockBetweenProcesses: a lock held by another process blocks Store.Lock
// until the timeout (ErrLockTimeout, and lock-timeout in a batch), guards
// only its own byte, and is granted once the holder is killed.
func TestLockBetweenProcesses(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"ofd", "posix"} {
		t.Run(mode, func(t *testing.T) {
			st, _ := hookedTable(t, 4)
			id := shardID(2, 7)
			neighbour := shardID(2, 8) // same shard, another byte
			if id.LockOffset() == neighbour.LockOffset() {
				t.Fatal("test IDs share a lock byte")
			}
			holder := startLockHolder(t, mode, st.Root(), id)

			st.SetLockTimeout(200 * time.Millisecond)
			unlock, err := st.Lock(context.Background(), leasefmt.Work, id)
			if !errors.Is(err, commit.ErrLockTimeout) {
				if err == nil {
					unlock()
				}
				t.Fatalf("Lock while another process holds it = %v, want ErrLockTimeout", err)
			}
			res := at(st, 1000).Claim(context.Background(), []commit.Item{{ID: id}, {ID: neighbour}}, "host/w", 60)
			if res[0].Outcome != commit.LockTimeout || !errors.Is(res[0].Err(), commit.ErrLockTimeout) {
				t.Errorf("claim of the locked ID: %s (%s), want lock-timeout", res[0].Outcome.Reason(), res[0].Detail)
			}
			if res[1].Outcome != commit.OK {
				t.Errorf("claim of a neighbour in the same shard: %s (%s), want ok", res[1].Outcome.Reason(), res[1].Detail)
			}
			if r := readRecord(t, st, id); r != nil {
				t.Errorf("record written without its lock: %+v", r)
			}

			if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			holder.Wait()
			st.SetLockTimeout(10 * time.Second)
			unlock, err = st.Lock(context.Background(), leasefmt.Work, id)
			if err != nil {
				t.Fatalf("Lock after the holder was killed: %v", err)
			}
			unlock()
			if r := at(st, 1000).Claim(context.Background(), []commit.Item{{ID: id}}, "host/w", 60)[0]; r.Outcome != commit.OK || r.Token != 1 {
				t.Errorf("claim after the holder died: %s %s", r.Outcome.Reason(), r.Detail)
			}
		})
	}
}

// TestContextEndsLockWaits: a lock wait ends with its context, not with the
// store's lock timeout (an hour here): the record another process locks is
// a lock timeout whose error wraps the context's, the items of the batch
// not started once the context is done are not attempted (nothing written
// for them), and a claim of the queue's next item cut short says busy,
// never empty.
func TestContextEndsLockWaits(t *testing.T) {
	t.Parallel()
	st, _ := hookedTable(t, 4, commit.Options{LockTimeout: time.Hour, Writers: 1})
	id := shardID(1, 3)
	startLockHolder(t, "ofd", st.Root(), id)
	later := []commit.Item{{ID: id}}
	for i := range 8 {
		later = append(later, commit.Item{ID: shardID(2, i)}) // after id in (shard, ID) order
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan []commit.Result, 1)
	go func() { done <- at(st, 1000).Claim(ctx, later, "host/w", 60) }()
	var res []commit.Result
	select { // a liveness bound, far from both the 200 ms and the hour
	case res = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Claim still waiting a minute after its context's deadline")
	}
	if r := res[0]; r.Outcome != commit.LockTimeout || !errors.Is(r.Err(), context.DeadlineExceeded) {
		t.Errorf("the locked record: %s (%s), want lock-timeout wrapping the deadline", r.Outcome.Reason(), r.Detail)
	}
	for _, r := range res[1:] {
		if r.Outcome != commit.LockTimeout || !strings.HasPrefix(r.Detail, "not attempted") {
			t.Errorf("%s after the deadline: %s (%s), want not attempted", r.ID.Short(), r.Outcome.Reason(), r.Detail)
		}
		if rec := readRecord(t, st, r.ID); rec != nil {
			t.Errorf("%s written after the deadline: %+v", r.ID.Short(), rec)
		}
	}
	enq := at(st, 1000).Enqueue(context.Background(), []commit.Item{{ID: id}})
	if enq[0].Outcome != commit.OK {
		t.Fatalf("enqueue: %s %s", enq[0].Outcome.Reason(), enq[0].Detail)
	}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	if nx := at(st, 1000).ClaimNext(stopped, 1, "host/w", 60, rand.New(rand.NewPCG(1, 2))); nx.Answer == commit.Empty {
		t.Errorf("ClaimNext with a context done says %s; a queued item is left, so never empty", nx.Answer)
	}
}

// TestUnlockHandsOverToOtherProcesses: the process keeps one descriptor per
// shard lock file and unlocks a record's byte explicitly, so after unlock
// another process gets the byte at once, while a byte the other process
// holds still keeps this process out through the same cached descriptor.
func TestUnlockHandsOverToOtherProcesses(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"ofd", "posix"} {
		t.Run(mode, func(t *testing.T) {
			st, _ := hookedTable(t, 4)
			id, neighbour := shardID(3, 1), shardID(3, 2)
			for i := 0; i < 3; i++ { // lock and unlock through the cached descriptor
				unlock, err := st.Lock(context.Background(), leasefmt.Work, id)
				if err != nil {
					t.Fatal(err)
				}
				unlock()
			}
			u, err := st.Lock(context.Background(), leasefmt.Work, neighbour) // held across the hand-over
			if err != nil {
				t.Fatal(err)
			}
			defer u()
			start := time.Now()
			holder := startLockHolder(t, mode, st.Root(), id) // blocks (ofd: 10 s) unless really unlocked
			if el := time.Since(start); el > 5*time.Second {
				t.Fatalf("the other process waited %v for a byte this process had unlocked", el)
			}
			st.SetLockTimeout(100 * time.Millisecond)
			if unlock, err := st.Lock(context.Background(), leasefmt.Work, id); !errors.Is(err, commit.ErrLockTimeout) {
				if err == nil {
					unlock()
				}
				t.Fatalf("Lock while the other process holds it = %v, want ErrLockTimeout", err)
			}
			holder.Process.Signal(syscall.SIGKILL)
			holder.Wait()
			unlock, err := st.Lock(context.Background(), leasefmt.Work, id)
			if err != nil {
				t.Fatalf("Lock after the holder died: %v", err)
			}
			unlock()
		})
	}
}

// TestLockBetweenGoroutines: two goroutines of one process exclude each
// other on one record, and many of them serialise a read-modify-write.
func TestLockBetweenGoroutines(t *testing.T) {
	st, _ := hookedTable(t, 4)
	id := shardID(1, 1)
	unlock, err := st.Lock(context.Background(), leasefmt.Work, id)
	if err != nil {
		t.Fatal(err)
	}
	st.SetLockTimeout(200 * time.Millisecond)
	errc := make(chan error)
	go func() {
		u, err := st.Lock(context.Background(), leasefmt.Work, id)
		if err == nil {
			u()
		}
		errc <- err
	}()
	if err := <-errc; !errors.Is(err, commit.ErrLockTimeout) {
		t.Fatalf("second goroutine's Lock = %v, want ErrLockTimeout", err)
	}
	// Released, the waiter gets it.
	st.SetLockTimeout(10 * time.Second)
	got := make(chan struct{})
	go func() {
		u, err := st.Lock(context.Background(), leasefmt.Work, id)
		if err != nil {
			errc <- err
			return
		}
		close(got)
		u()
		errc <- nil
	}()
	unlock()
	if err := <-errc; err != nil {
		t.Fatalf("waiter after unlock: %v", err)
	}
	<-got

	// Many goroutines: at most one inside, no lost update of a file.
	counter := filepath.Join(t.TempDir(), "counter")
	os.WriteFile(counter, []byte("0"), 0o644)
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	const workers, rounds = 8, 25
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				u, err := st.Lock(context.Background(), leasefmt.Work, id)
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n > maxInside.Load() {
					maxInside.Store(n)
				}
				data, _ := os.ReadFile(counter)
				var v int
				fmt.Sscan(string(data), &v)
				time.Sleep(50 * time.Microsecond)
				os.WriteFile(counter, []byte(fmt.Sprint(v+1)), 0o644)
				inside.Add(-1)
				u()
			}
		}()
	}
	wg.Wait()
	data, _ := os.ReadFile(counter)
	if string(data) != fmt.Sprint(workers*rounds) || maxInside.Load() != 1 {
		t.Errorf("counter %s, want %d; at most %d inside at once, want 1", data, workers*rounds, maxInside.Load())
	}
}

// TestReplacedLockFileBetweenBatches: a process keeps a shard's lock file
// open only for the batches that use it, so a lock file replaced between
// two batches (an operator restoring a table) is the one the next batch
// locks through, and another process locking through the new file still
// keeps it out.
func TestReplacedLockFileBetweenBatches(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	st, err := commit.Open(root, commit.Options{Create: &leasefmt.Table{WorkShards: 4, TargetShards: 4, CreatedAt: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := shardID(1, 1)
	if r := at(st, 1000).Claim(context.Background(), []commit.Item{{ID: id}}, "host/w", 60)[0]; r.Outcome != commit.OK {
		t.Fatalf("claim: %s %s", r.Outcome.Reason(), r.Detail)
	}
	lock := filepath.Join(root, st.ShardDir(leasefmt.Work, id.Shard(4)), layout.LockFile)
	if err := os.WriteFile(lock+".new", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(lock+".new", lock); err != nil {
		t.Fatal(err)
	}
	holder := startLockHolder(t, "ofd", root, id) // through the new file
	st.SetLockTimeout(200 * time.Millisecond)
	if r := at(st, 1010).Renew(context.Background(), []commit.Item{{ID: id, Token: 1}}, 60)[0]; r.Outcome != commit.LockTimeout {
		t.Fatalf("renew while another process holds the new lock file: %s (%s), want lock-timeout", r.Outcome.Reason(), r.Detail)
	}
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	if r := at(st, 1020).Renew(context.Background(), []commit.Item{{ID: id, Token: 1}}, 60)[0]; r.Outcome != commit.OK {
		t.Fatalf("renew after the holder died: %s (%s)", r.Outcome.Reason(), r.Detail)
	}
}
