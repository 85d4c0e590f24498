package safety

// The full-disk scenarios (issue 28; docs/design.md#durability): the
// table's filesystem is full, so every temp file a writer creates in a
// shard directory fails with ENOSPC, and the holders' renewals and
// completes go through the reserve: a spare taken into the shard
// directory, overwritten in place, renamed over the record, the replaced
// record's file linked into the reserve and made a spare once its
// directory is fsynced. Every crash state of those calls is checked as any
// other (nothing torn reads as valid, nothing acknowledged lost, no live
// holder displaced, and a fsck repair leaves nothing), and a claim, which
// may not use the reserve, is refused.

import (
	"context"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
)

// FullDiskSpares is the reserve the full-disk scenarios start with, and
// what their fsck --repair tops it up to.
const FullDiskSpares = 6

// fullDisk fails every create of a temp file in a record directory with
// ENOSPC, as a full filesystem does (the reserve's own files are not
// created there), logging each failed call on the Recorder.
func fullDisk(f seam.FS) seam.FS {
	rec, _ := seam.As[*Recorder](f)
	return seam.WithHook(f, func(op seam.Op, name string) error {
		if op != seam.OpCreate || !strings.Contains(path.Base(name), ".tmp.") || strings.HasPrefix(name, "reserve/") {
			return nil
		}
		err := &fs.PathError{Op: "create", Path: name, Err: syscall.ENOSPC}
		if rec != nil {
			rec.Injected(op, name, err)
		}
		return err
	})
}

// setupFullDisk is the work table with a reserve of FullDiskSpares spares.
func setupFullDisk(st *commit.Store, fsys seam.FS) error {
	if err := setupWork(st, fsys); err != nil {
		return err
	}
	_, err := st.TopUpReserve(FullDiskSpares)
	return err
}

// FullDiskScenarios are renewals, completes and a claim on a full
// filesystem with the reserve in place.
func FullDiskScenarios() []*Scenario {
	w := func(name string, writers int, run func(r *Run)) *Scenario {
		return &Scenario{Name: "full disk: " + name, Table: workTable(), Setup: setupFullDisk, Run: run, Writers: writers, Now: Now, Wrap: fullDisk}
	}
	return []*Scenario{
		w("renew-batch", 1, func(r *Run) {
			r.AckResults("renew-batch", r.At(Now).Renew(context.Background(), itemsTok(8, 1, 9, 1, 10, 1, 11, 1, 0, 3), TTL))
		}),
		w("renew-batch/4-writers", 4, func(r *Run) {
			r.AckResults("renew-batch", r.At(Now).Renew(context.Background(), itemsTok(8, 1, 9, 1, 10, 1, 11, 1, 0, 3), TTL))
		}),
		w("renew-batch twice", 1, func(r *Run) {
			// The second renewal takes the spares the first recycled.
			r.AckResults("renew-batch", r.At(Now).Renew(context.Background(), span(12, 18, 1), TTL))
			r.AckResults("renew-batch", r.At(Now+10).Renew(context.Background(), span(12, 18, 1), TTL))
		}),
		w("complete", 1, func(r *Run) {
			r.AckResults("complete", r.At(Now).Complete(context.Background(), itemsTok(8, 1, 10, 1)))
		}),
		w("complete --publish", 1, func(r *Run) {
			publishRun(r, "complete --publish", commit.Item{ID: TestID(0), Token: 3}, "result.bin")
		}),
		w("release", 1, func(r *Run) {
			r.AckResults("release", r.At(Now).Release(context.Background(), itemsTok(8, 1, 9, 1)))
		}),
		w("claim refused", 1, func(r *Run) {
			r.AckResults("claim", r.At(Now).Claim(context.Background(), items(0, 4, 1), "carol", TTL))
		}),
	}
}
