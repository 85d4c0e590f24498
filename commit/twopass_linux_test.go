package commit_test

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/leasefmt"
)

// twoPassTable is syncfsTable with the store's options opts.
func twoPassTable(t *testing.T, wrap func(*seam.OSFS) seam.FS, opts ...commit.Options) *commit.Store {
	t.Helper()
	root := t.TempDir()
	osfs, err := seam.OS(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { osfs.Close() })
	if _, barrier, err := osfs.FilesystemType(); err != nil || !barrier {
		t.Skipf("%s: syncfs is no barrier on this filesystem (%v)", root, err)
	}
	var f seam.FS = osfs
	if wrap != nil {
		f = wrap(osfs)
	}
	o := optionsOf(opts)
	o.FS, o.Sync = f, new(durable.Syncfs)
	o.Create = &leasefmt.Table{WorkShards: 16, TargetShards: 4, CreatedAt: 1000}
	st, err := commit.Open(root, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestTwoPassSyncfsPerChunk: under syncfs a batch costs one syncfs per
// chunk of Options.SyncfsChunk items (after its temp files) and one after
// the last rename, whatever the number of writers: a claim of 32, a
// renewal of 1,024 in 16 shards, and that renewal in pipelined chunks of
// 256 and 100, whose first chunk is a quarter chunk (64 and 25: 6 and 12
// syncfs).
func TestTwoPassSyncfsPerChunk(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n, writers, chunk int
		syncfs            int64 // one per chunk, one after the last rename
	}{
		{32, 1, 1024, 2}, {32, 8, 1024, 2}, {1024, 1, 1024, 2}, {1024, 16, 1024, 2},
		{1024, 4, 256, 6},   // 64 + 256 + 256 + 256 + 192
		{1024, 16, 100, 12}, // 25 + 9 × 100 + 99
	} {
		t.Run(fmt.Sprintf("n%d-w%d-chunk%d", tc.n, tc.writers, tc.chunk), func(t *testing.T) {
			t.Parallel()
			st := twoPassTable(t, nil, commit.Options{Writers: tc.writers, SyncfsChunk: tc.chunk})
			want := tc.syncfs
			before := st.Stats().Snapshot(0)
			h := held(t, at(st, 1000).Claim(context.Background(), spread(tc.n, 16), "host/w1", 60))
			s := st.Stats().Snapshot(0)
			if got := s.Syncfs - before.Syncfs; got != want || s.FileSyncs != before.FileSyncs {
				t.Errorf("claim of %d with %d writers: %d syncfs, %d file fsyncs; want %d, 0", tc.n, tc.writers, got, s.FileSyncs-before.FileSyncs, want)
			}
			before = s
			for _, r := range at(st, 1010).Renew(context.Background(), h, 60) {
				if r.Outcome != commit.OK {
					t.Fatalf("renew %s: %s %s", r.ID, r.Outcome.Reason(), r.Detail)
				}
			}
			s = st.Stats().Snapshot(0)
			if got := s.Syncfs - before.Syncfs; got != want || s.FileSyncs != before.FileSyncs || s.DirectorySyncs != before.DirectorySyncs {
				t.Errorf("renew of %d with %d writers: %d syncfs, %d file and %d directory fsyncs; want %d, 0, 0",
					tc.n, tc.writers, got, s.FileSyncs-before.FileSyncs, s.DirectorySyncs-before.DirectorySyncs, want)
			}
			for _, it := range h {
				if r := readRecord(t, st, it.ID); r.ExpiresAt != 1070 {
					t.Fatalf("after renew %s expires at %g, want 1070", it.ID, r.ExpiresAt)
				}
			}
		})
	}
}

// faultyRename is the kernel's FS (syncfs included) whose create or
// rename of a record's temp file fails with EIO from the fail-th call on
// (0: never).
type faultyRename struct {
	*seam.OSFS
	op          seam.Op
	fail, calls atomic.Int64
}

func (f *faultyRename) hit(op seam.Op, name string) error {
	if f.op != op || !strings.Contains(name, ".tmp.") && op == seam.OpCreate {
		return nil
	}
	if n := f.fail.Load(); n > 0 && f.calls.Add(1) >= n {
		return &fs.PathError{Op: string(op), Path: name, Err: syscall.EIO}
	}
	return nil
}

func (f *faultyRename) CreateExcl(name string) (seam.File, error) {
	if err := f.hit(seam.OpCreate, name); err != nil {
		return nil, err
	}
	return f.OSFS.CreateExcl(name)
}

func (f *faultyRename) Rename(o, n string) error {
	if err := f.hit(seam.OpRename, o); err != nil {
		return err
	}
	return f.OSFS.Rename(o, n)
}

// TestTwoPassFailure: a failure in the first pass (a temp file that cannot
// be created) renames nothing of the chunk; one in the second (a rename)
// leaves the records renamed before it renamed. Either way no item is
// reported OK (G6), no temp file is left, every record reads as its old or
// its new version, and the locks are released (a renewal that follows
// succeeds for every item). In one chunk (the default size) and in
// pipelined chunks of 8, where the failure comes while later chunks write
// their temp files and earlier ones rename: the chunks under way stop.
func TestTwoPassFailure(t *testing.T) {
	t.Parallel()
	for _, chunk := range []int{0, 8} {
		for _, op := range []seam.Op{seam.OpCreate, seam.OpRename} {
			t.Run(fmt.Sprintf("%s/chunk%d", op, chunk), func(t *testing.T) {
				t.Parallel()
				twoPassFailure(t, op, chunk)
			})
		}
	}
}

// twoPassFailure fails the op-th call of a renewal of 64 in chunks of
// chunk (0: the default, one chunk).
func twoPassFailure(t *testing.T, op seam.Op, chunk int) {
	pipelined := chunk > 0
	const n = 64
	var faulty *faultyRename
	st := twoPassTable(t, func(o *seam.OSFS) seam.FS {
		faulty = &faultyRename{OSFS: o, op: op}
		return faulty
	}, commit.Options{Writers: 4, LockTimeout: 5 * time.Second, SyncfsChunk: chunk})
	h := held(t, at(st, 1000).Claim(context.Background(), spread(n, 16), "host/w1", 60))
	faulty.fail.Store(n / 2)
	res := at(st, 1010).Renew(context.Background(), h, 60)
	faulty.fail.Store(0)
	for _, r := range res {
		if r.Outcome == commit.OK {
			t.Errorf("%s reported renewed after a failed %s", r.ID, op)
		} else if r.Outcome != commit.IOError {
			t.Errorf("%s: %s %s, want io-error", r.ID, r.Outcome.Reason(), r.Detail)
		}
	}
	renewed := 0
	for _, it := range h {
		switch r := readRecord(t, st, it.ID); r.ExpiresAt {
		case 1070:
			renewed++
		case 1060:
		default:
			t.Errorf("%s expires at %g: neither its old nor its new version", it.ID, r.ExpiresAt)
		}
	}
	t.Logf("%s failing at call %d: %d of %d records renamed", op, n/2, renewed, n)
	switch {
	case op == seam.OpCreate && !pipelined && renewed != 0:
		t.Errorf("a failure in the first pass renamed %d records, want none", renewed)
	case op == seam.OpCreate && renewed >= n/2:
		t.Errorf("a create failing at call %d of %d: %d records renamed", n/2, n, renewed)
	case op == seam.OpRename && (renewed == 0 || renewed == n):
		t.Errorf("a rename failing at call %d of %d: %d records renamed", n/2, n, renewed)
	}
	filepath.WalkDir(st.Root(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp.") {
			t.Errorf("temp file left: %s", p)
		}
		return nil
	})
	for _, r := range at(st, 1020).Renew(context.Background(), h, 60) {
		if r.Outcome != commit.OK {
			t.Errorf("renew after the failure %s: %s %s", r.ID, r.Outcome.Reason(), r.Detail)
		}
	}
}

// The "two-pass renewer" role (testenv.Role) runs ROUNDS batches over the
// first N records of spread(N, 16) at ROOT under syncfs in chunks of CHUNK,
// each batch raising every record's token by one, and prints "ok K" with K
// the items that succeeded. Its arguments: ROOT ROUNDS CHUNK N.
func init() { testenv.Role("two-pass renewer", twoPassRenewer) }

func twoPassRenewer(f []string) int {
	if len(f) != 4 {
		fmt.Fprintf(os.Stderr, "two-pass renewer: bad arguments %q\n", f)
		return 2
	}
	rounds, _ := strconv.Atoi(f[1])
	chunk, _ := strconv.Atoi(f[2])
	n, _ := strconv.Atoi(f[3])
	st, err := commit.Open(f[0], commit.Options{Sync: new(durable.Syncfs), LockTimeout: 60 * time.Second, SyncfsChunk: chunk})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	bump := func(it commit.Item, cur *leasefmt.Record, now float64) (*leasefmt.Record, commit.Outcome, string) {
		if cur == nil {
			return nil, commit.Missing, ""
		}
		next := *cur
		next.Token++
		return &next, commit.OK, ""
	}
	ok := 0
	for range rounds {
		for _, r := range st.Apply(context.Background(), leasefmt.Work, spread(n, 16), bump) {
			if r.Outcome == commit.OK {
				ok++
			} else {
				fmt.Fprintf(os.Stderr, "%s: %s %s\n", r.ID, r.Outcome.Reason(), r.Detail)
			}
		}
	}
	fmt.Println("ok", ok)
	return 0
}

// TestTwoPassProcessesNoDeadlock: two processes renewing overlapping
// batches under syncfs at the same time, in chunks of different sizes,
// never deadlock: every item of every batch succeeds within a lock timeout
// far longer than the run, and every record's token went up once per batch
// (no update lost to a broken mutual exclusion).
func TestTwoPassProcessesNoDeadlock(t *testing.T) {
	t.Parallel()
	const n, rounds = 512, 4
	st := twoPassTable(t, nil)
	h := held(t, st.Claim(context.Background(), spread(n, 16), "host/w1", 3600))
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	for p, chunk := range []int{100, 512} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := testenv.RoleCmd(ctx, "two-pass renewer", st.Root(), fmt.Sprint(rounds), fmt.Sprint(chunk), fmt.Sprint(n))
			out, err := cmd.Output()
			outs[p], errs[p] = string(out), err
		}()
	}
	wg.Wait()
	for p := range outs {
		sc := bufio.NewScanner(strings.NewReader(outs[p]))
		if errs[p] != nil || !sc.Scan() || sc.Text() != fmt.Sprint("ok ", n*rounds) {
			t.Errorf("process %d: %q, %v; want ok %d", p, outs[p], errs[p], n*rounds)
		}
	}
	for _, it := range h {
		if r := readRecord(t, st, it.ID); r.Token != it.Token+2*rounds {
			t.Errorf("%s: token %d, want %d (%d batches of two processes)", it.ID, r.Token, it.Token+2*rounds, rounds)
		}
	}
}
