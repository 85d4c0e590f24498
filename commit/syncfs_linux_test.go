package commit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
)

// syncfsTable opens a new table on the kernel's filesystem of t.TempDir
// under strategy sync, over the FS wrap makes of it (nil: the kernel's).
func syncfsTable(t *testing.T, sync durable.Strategy, wrap func(*seam.OSFS) seam.FS) *commit.Store {
	t.Helper()
	root := t.TempDir()
	osfs, err := seam.OS(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { osfs.Close() })
	var f seam.FS = osfs
	if wrap != nil {
		f = wrap(osfs)
	}
	if _, barrier, err := osfs.FilesystemType(); err != nil || !barrier {
		t.Skipf("%s: syncfs is no barrier on this filesystem (%v)", root, err)
	}
	st, err := commit.Open(root, commit.Options{FS: f, Sync: new(sync), Create: &leasefmt.Table{WorkShards: 16, TargetShards: 4, CreatedAt: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestSyncStrategyCounts: a renewal of N records in K shards makes N file
// and K directory fsyncs per record, and under syncfs no file or directory
// fsync and exactly 2 syncfs calls: one two-pass chunk (commit/twopass.go),
// one after the temp files and one after the renames.
func TestSyncStrategyCounts(t *testing.T) {
	t.Parallel()
	const n, k = 64, 8
	for _, tc := range []struct {
		sync                durable.Strategy
		files, dirs, syncfs [2]int64 // least, most
	}{
		{durable.Record, [2]int64{n, n}, [2]int64{k, k}, [2]int64{0, 0}},
		{durable.Syncfs, [2]int64{0, 0}, [2]int64{0, 0}, [2]int64{2, 2}},
	} {
		t.Run(tc.sync.String(), func(t *testing.T) {
			st := syncfsTable(t, tc.sync, nil)
			items := spread(n, k)
			h := held(t, at(st, 1000).Claim(context.Background(), items, "host/w1", 60))
			before := st.Stats().Snapshot(0)
			for _, r := range at(st, 1010).Renew(context.Background(), h, 60) {
				if r.Outcome != commit.OK {
					t.Fatalf("renew %s: %s %s", r.ID, r.Outcome.Reason(), r.Detail)
				}
			}
			s := st.Stats().Snapshot(0)
			t.Logf("%s: %d syncfs", tc.sync, s.Syncfs-before.Syncfs)
			got := [3]int64{s.FileSyncs - before.FileSyncs, s.DirectorySyncs - before.DirectorySyncs, s.Syncfs - before.Syncfs}
			for i, want := range [3][2]int64{tc.files, tc.dirs, tc.syncfs} {
				if got[i] < want[0] || got[i] > want[1] {
					t.Errorf("renew of %d records in %d shards: %d file fsyncs, %d directory fsyncs, %d syncfs; want %v, %v, %v",
						n, k, got[0], got[1], got[2], tc.files, tc.dirs, tc.syncfs)
					break
				}
			}
			for _, it := range h {
				if r := readRecord(t, st, it.ID); r.ExpiresAt != 1070 {
					t.Fatalf("after renew %s expires at %g, want 1070", it.ID, r.ExpiresAt)
				}
			}
		})
	}
}

// failingSyncfs is the kernel's FS whose syncfs fails from the fail-th call
// of a batch's descriptor on (0: never).
type failingSyncfs struct {
	*seam.OSFS
	fail int
}

func (f failingSyncfs) OpenSyncfs() (seam.SyncfsHandle, error) {
	h, err := f.OSFS.OpenSyncfs()
	if err != nil {
		return nil, err
	}
	return &failingHandle{SyncfsHandle: h, fail: f.fail}, nil
}

type failingHandle struct {
	seam.SyncfsHandle
	fail, calls int
}

func (h *failingHandle) Syncfs() error {
	h.calls++ // the barrier runs one syncfs at a time
	if h.fail > 0 && h.calls >= h.fail {
		return &os.PathError{Op: "syncfs", Path: "test", Err: syscall.EIO}
	}
	return h.SyncfsHandle.Syncfs()
}

// TestSyncfsErrorFailsBatch: under syncfs, a syncfs error (a writeback
// error the kernel reports) fails the batch: no item is reported OK (G6),
// whether it is the first barrier (nothing renamed) or a later one (the
// last, after every rename, when one barrier covered every writer).
func TestSyncfsErrorFailsBatch(t *testing.T) {
	t.Parallel()
	const n = 32
	for _, fail := range []int{1, 2} {
		t.Run(fmt.Sprintf("from-call-%d", fail), func(t *testing.T) {
			var wrapped *failingSyncfs
			st := syncfsTable(t, durable.Syncfs, func(o *seam.OSFS) seam.FS {
				wrapped = &failingSyncfs{OSFS: o}
				return wrapped
			})
			items := spread(n, 4)
			h := held(t, at(st, 1000).Claim(context.Background(), items, "host/w1", 60))
			wrapped.fail = fail
			before := st.Stats().Snapshot(0)
			res := at(st, 1010).Renew(context.Background(), h, 60)
			ok := 0
			for _, r := range res {
				if r.Outcome == commit.OK {
					ok++
				} else if r.Outcome != commit.IOError || !errors.Is(r.Err(), syscall.EIO) && !r.Derived() {
					t.Errorf("%s: %s %s, want io-error", r.ID, r.Outcome.Reason(), r.Detail)
				}
			}
			if ok != 0 {
				t.Errorf("%d of %d items reported renewed after a failed syncfs", ok, n)
			}
			if s := st.Stats().Snapshot(0); s.Syncfs == before.Syncfs {
				t.Errorf("no syncfs made")
			}
		})
	}
}
