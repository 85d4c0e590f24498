//go:build linux

package worker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/leasefmt"
)

// setBackoff makes every Backoff's poll d for the test (not parallel:
// the bounds are the package's).
func setBackoff(t *testing.T, d time.Duration) {
	oldMin, oldMax := backoffMin, backoffMax
	backoffMin, backoffMax = d, d
	t.Cleanup(func() { backoffMin, backoffMax = oldMin, oldMax })
}

// inotifyWatches counts the inotify watches this process holds.
func inotifyWatches(t *testing.T) int {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, de := range des {
		b, err := os.ReadFile("/proc/self/fdinfo/" + de.Name())
		if err == nil {
			n += bytes.Count(b, []byte("inotify wd:"))
		}
	}
	return n
}

// busyTable makes a table in dir with item "a" held by another owner for
// an hour; it returns a second store of it (another worker's) and a
// function that releases "a".
func busyTable(t *testing.T, dir string) (*commit.Store, func()) {
	t.Helper()
	root := filepath.Join(dir, "table")
	if err := durable.MkdirRoot(root); err != nil {
		t.Fatal(err)
	}
	holder, err := commit.Open(root, commit.Options{Create: &leasefmt.Table{WorkShards: 4, TargetShards: 4, CreatedAt: leasefmt.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	if r := holder.Enqueue(context.Background(), []commit.Item{{ID: testID("a")}})[0]; r.Outcome != commit.OK {
		t.Fatalf("enqueue: %v", r.Detail)
	}
	nx := holder.ClaimNext(context.Background(), 1, "holder", 3600, NewRand())
	if nx.Answer != commit.Granted {
		t.Fatalf("holder's claim: %v", nx.Answer)
	}
	it := commit.Item{ID: nx.Results[0].ID, Token: nx.Results[0].Token}
	waiter, err := commit.Open(root, commit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waiter.Close() })
	return waiter, func() {
		if r := holder.Release(context.Background(), []commit.Item{it})[0]; r.Outcome != commit.OK {
			t.Fatalf("release: %v", r.Detail)
		}
	}
}

// shmDir is a directory on tmpfs (/dev/shm), removed after the test.
func shmDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/dev/shm", "lease-wake-")
	if err != nil {
		testenv.Missing(t, "tmpfs", "no /dev/shm: "+err.Error())
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestBusyWaitWokenByRelease: a worker waiting on a busy queue gets the
// item released by its holder although its poll is an hour: only the
// inotify watch of held/ can have woken it (on the test's own disk and on
// tmpfs).
func TestBusyWaitWokenByRelease(t *testing.T) {
	setBackoff(t, time.Hour)
	for _, c := range []struct {
		name string
		dir  func(*testing.T) string
	}{{"tempdir", func(t *testing.T) string { return t.TempDir() }}, {"tmpfs", shmDir}} {
		t.Run(c.name, func(t *testing.T) {
			st, release := busyTable(t, c.dir(t))
			if fst := fsTypeOf(st); !inotifyTrusted(fst) {
				testenv.Missing(t, "inotify", "the test's directory is on "+fst+", where inotify is not trusted")
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			before := inotifyWatches(t)
			got := make(chan Claimed, 1)
			go func() { got <- ClaimNext(ctx, st, NewRand(), 1, "waiter", 60, true, time.Time{}, nil) }()
			testenv.WaitFor(t, "the waiter's watch", 30*time.Second, func() bool { return inotifyWatches(t) > before })
			release()
			var cl Claimed
			select {
			case cl = <-got:
			case <-time.After(time.Minute): // a bound against a hang, not a timing: the poll is an hour
				t.Fatal("the waiter was not woken by the release")
			}
			if cl.Answer != commit.Granted || len(cl.Results) != 1 || cl.Results[0].ID != testID("a") {
				t.Fatalf("waiter got %v %+v, want item a granted", cl.Answer, cl.Results)
			}
			if cl.Tries < 2 {
				t.Errorf("tries %d: the first try found the item held, a later one got it", cl.Tries)
			}
			testenv.WaitFor(t, "the watch closed", 30*time.Second, func() bool { return inotifyWatches(t) == before })
		})
	}
}

// TestBusyWaitPollsWhereInotifyIsNotTrusted: on a filesystem type where
// inotify is not trusted (NFS stands in for them), no watch is made and
// the poll alone ends the wait.
func TestBusyWaitPollsWhereInotifyIsNotTrusted(t *testing.T) {
	setBackoff(t, 5*time.Millisecond)
	old := fsTypeOf
	fsTypeOf = func(*commit.Store) string { return "nfs" }
	t.Cleanup(func() { fsTypeOf = old })
	for _, fst := range []string{"nfs", "fuse", "ceph", "lustre", "smb", "overlay", "zfs", "0x1234", ""} {
		if inotifyTrusted(fst) {
			t.Errorf("inotify trusted on %q", fst)
		}
	}
	st, release := busyTable(t, t.TempDir())
	if w := newWaker(st); w != nil {
		w.close()
		t.Fatal("a watch made on nfs")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := inotifyWatches(t)
	got := make(chan Claimed, 1)
	tries := st.Stats().Attempted.Load()
	go func() { got <- ClaimNext(ctx, st, NewRand(), 1, "waiter", 60, true, time.Time{}, nil) }()
	testenv.WaitFor(t, "three tries of the waiter", 30*time.Second, func() bool { return st.Stats().Attempted.Load() >= tries+3 })
	if n := inotifyWatches(t); n != before {
		t.Fatalf("%d inotify watches while waiting on nfs, want %d", n, before)
	}
	release()
	cl := <-got
	if cl.Answer != commit.Granted || cl.Tries < 3 {
		t.Fatalf("waiter got %v after %d tries, want granted after 3 or more", cl.Answer, cl.Tries)
	}
	if cl.Results[0].ID != testID("a") {
		t.Fatalf("granted %v", cl.Results[0].ID)
	}
}
