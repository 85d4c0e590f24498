package commit

// The retries of one item of a batch after a transient error of a network
// filesystem: the policy and the pause are the durability layer's
// (durable.Retry, durable.Disk.Again); what an item's try leaves for the
// next is here.

import (
	"bytes"
	"context"
	"errors"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/leasefmt"
)

// applyOne runs one item of a batch (applyOnce), trying it again, lock,
// read, decision and write, while it fails with a transient error and the
// store's Retry allows. Between tries the record's lock is released.
func (s *Store) applyOne(ctx context.Context, k leasefmt.Kind, it Item, decide Decide, settle settlePolicy, b *durable.SyncBatch, r *Result) error {
	name := s.RecordPath(k, it.ID)
	var try itemTry
	for attempt := 1; ; attempt++ {
		err, transient := s.applyOnce(ctx, k, it, decide, settle, b, r, &try)
		// Not in a two-pass chunk: the lock, taken again, would be taken
		// out of the global order (twopass.go).
		if err == nil || !transient || it.turn != nil || !s.disk.Again(ctx, s.retry, attempt, name, err) {
			return err
		}
		*r = Result{Item: r.Item, Path: r.Path}
	}
}

// itemTry is what one try of an item left for the next: the bytes it
// renamed into place when the rename failed with an error after which the
// rename may have happened all the same (ESTALE: the reply was lost, not
// the request).
type itemTry struct {
	data   []byte
	detail string
}

// wrote notes the bytes of a write that failed with err.
func (t *itemTry) wrote(data []byte, detail string, err error) {
	t.data, t.detail = nil, ""
	if errors.Is(err, unix.ESTALE) && !errors.Is(err, durable.ErrAppeared) {
		t.data, t.detail = data, "written on a retry after: "+detail
	}
}

// landed reports whether the record read, raw, is exactly what the earlier
// try wrote: its rename took effect.
func (t *itemTry) landed(raw []byte) bool {
	return t.data != nil && raw != nil && bytes.Equal(raw, t.data)
}
