package durable

import (
	"testing"

	"github.com/leasetool/lease/commit/seam"
)

// fakeFS is an FS whose root is on a filesystem called name, where syncfs
// is a barrier or not; its syncfs does nothing.
type fakeFS struct {
	seam.FS
	name    string
	barrier bool
}

func (f fakeFS) FilesystemType() (string, bool, error)  { return f.name, f.barrier, nil }
func (f fakeFS) OpenSyncfs() (seam.SyncfsHandle, error) { return nopHandle{}, nil }

type nopHandle struct{}

func (nopHandle) Syncfs() error { return nil }
func (nopHandle) Close() error  { return nil }

// TestStrategyChoice: Auto takes syncfs where it is a whole-filesystem
// barrier with something to flush, per record elsewhere (tmpfs too), on an FS without syncfs, and per batch
// while the machine has more than DirtyLimit dirty; record and syncfs
// force theirs (syncfs only where the FS has it). Under auto a batch of
// fewer than AutoMinBatch records fsyncs per record.
func TestStrategyChoice(t *testing.T) {
	dirty := int64(0)
	dirtyNow = func() (int64, bool) { return dirty, true }
	t.Cleanup(func() { dirtyNow = Dirty })
	type plain struct{ seam.FS } // no syncfs
	for _, tc := range []struct {
		fs    seam.FS
		want  Strategy
		dirty int64
		got   bool // the batch gets a barrier
	}{
		{fakeFS{name: "ext4", barrier: true}, Auto, 0, true},
		{fakeFS{name: "xfs", barrier: true}, Auto, DirtyLimit, true},
		{fakeFS{name: "btrfs", barrier: true}, Auto, DirtyLimit + 1, false},
		{fakeFS{name: "ext4", barrier: true}, Syncfs, DirtyLimit + 1, true},
		{fakeFS{name: "ext4", barrier: true}, Record, 0, false},
		{fakeFS{name: "tmpfs", barrier: true}, Auto, 0, false},
		{fakeFS{name: "tmpfs", barrier: true}, Syncfs, 0, true},
		{fakeFS{name: "nfs"}, Auto, 0, false},
		{fakeFS{name: "fuse"}, Auto, 0, false},
		{fakeFS{name: "fuse"}, Syncfs, 0, true},
		{plain{}, Auto, 0, false},
		{plain{}, Syncfs, 0, false},
	} {
		d := New(tc.fs, "/t", new(Counts))
		d.SetStrategy(tc.want)
		dirty = tc.dirty
		b := d.GroupBatch(AutoMinBatch)
		if b.Syncfs() != tc.got {
			t.Errorf("%T %v under %s with %d dirty: barrier %v, want %v (%s)", tc.fs, tc.fs, tc.want, tc.dirty, b.Syncfs(), tc.got, d.Choose(tc.want).Why)
		}
		// A batch of fewer records gets the barrier only when it is
		// forced: under auto it fsyncs per record.
		if small := d.GroupBatch(AutoMinBatch - 1); small.Syncfs() != (tc.got && tc.want == Syncfs) {
			t.Errorf("%T %v under %s with %d dirty: a batch of %d has barrier %v", tc.fs, tc.fs, tc.want, tc.dirty, AutoMinBatch-1, small.Syncfs())
		}
		if d.Batch().Syncfs() {
			t.Errorf("%v: Batch (one record) has a barrier", tc.fs)
		}
	}
}
