package commit_test

// Failures inside a batch (G5, G6): directories already renamed into are
// still fsynced, and a failed directory fsync fails the whole batch.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
)

// failAt fails the first call op on a name containing id.
func failAt(op seam.Op, id leasefmt.ID) func(seam.Op, string) error {
	done := false
	return func(o seam.Op, name string) error {
		if !done && o == op && strings.Contains(name, string(id)) {
			done = true
			return fmt.Errorf("injected %s failure on %s: %w", op, name, errors.ErrUnsupported)
		}
		return nil
	}
}

// TestFailureStillSyncsRenamedDirs: G5 and G6 for a record failing at its
// write, fsync or rename: the directories already renamed into are still
// fsynced, nothing is reported OK, no temp file is left behind.
func TestFailureStillSyncsRenamedDirs(t *testing.T) {
	t.Parallel()
	const n, k = 24, 4
	for _, op := range []seam.Op{seam.OpCreate, seam.OpWrite, seam.OpFsync, seam.OpRename} {
		for _, writers := range []int{1, 64} {
			// Sorted order is (shard, ID): position p is shard p/6.
			for _, pos := range []int{0, 3, 6, 13, n - 1} {
				t.Run(fmt.Sprintf("%s/writers=%d/at=%d", op, writers, pos), func(t *testing.T) {
					st, log := hookedTable(t, k, commit.Options{Writers: writers})
					items := spread(n, k)
					h := held(t, at(st, 1000).Claim(context.Background(), items, "host/w1", 60))
					sorted := slices.Clone(h)
					slices.SortFunc(sorted, func(a, b commit.Item) int {
						if c := a.ID.Shard(k) - b.ID.Shard(k); c != 0 {
							return c
						}
						return strings.Compare(string(a.ID), string(b.ID))
					})
					victim := sorted[pos].ID
					log.reset(failAt(op, victim))
					if writers > 1 && pos > 0 {
						// The check below wants a rename before the
						// failure; with many writers the victim's
						// goroutine may otherwise fail first.
						log.holdUntilRenamed()
					}
					attempted := st.Stats().Attempted.Load()
					res := at(st, 1010).Renew(context.Background(), h, 60)
					if got := st.Stats().Attempted.Load() - attempted; got != int64(len(h)) {
						t.Errorf("Stats.Attempted grew by %d, want %d: every item, also those not attempted after the failure, counts for progress", got, len(h))
					}
					ops := log.snapshot()
					injected := false
					for _, o := range ops {
						injected = injected || o.failed
					}
					if !injected {
						t.Fatalf("no %s of %s was made", op, victim)
					}
					for _, r := range res {
						if r.Outcome != commit.IOError {
							t.Errorf("%s: %s (%s), want io-error for every record of a failed batch", r.ID, r.Outcome.Reason(), r.Detail)
						}
					}
					checkDirsSynced(t, ops)
					checkG1(t, ops, false)
					if pos > 0 && log.count(opRenameDone) == 0 {
						t.Errorf("no record was renamed before the failure at position %d", pos)
					}
					if left := tempFiles(t, st.Root()); len(left) > 0 {
						t.Errorf("temp files left: %v", left)
					}
					if writers == 1 {
						// One writer: records after the victim are not attempted.
						for _, it := range sorted[pos+1:] {
							for _, o := range ops {
								if o.op == seam.OpCreate && strings.Contains(o.name, string(it.ID)) {
									t.Errorf("%s after the failure was still written", it.ID)
								}
							}
						}
					}
					// The victim still holds its old, valid record.
					if r := readRecord(t, st, victim); op != seam.OpRename && r.ExpiresAt != 1060 {
						t.Errorf("victim record changed: %+v", r)
					}
				})
			}
		}
	}
}

// TestFailedDirSyncFailsBatch: G6, a failed directory fsync makes every
// result of the batch an I/O error, even those whose own directory synced.
func TestFailedDirSyncFailsBatch(t *testing.T) {
	t.Parallel()
	const n, k = 20, 5
	for _, writers := range []int{1, 64} {
		for _, bad := range []int{0, 2, k - 1} {
			t.Run(fmt.Sprintf("writers=%d/shard=%d", writers, bad), func(t *testing.T) {
				st, log := hookedTable(t, k, commit.Options{Writers: writers})
				h := held(t, at(st, 1000).Claim(context.Background(), spread(n, k), "host/w1", 60))
				dir := st.ShardDir(leasefmt.Work, bad)
				log.reset(func(op seam.Op, name string) error {
					if op == seam.OpSyncDir && name == dir {
						return errors.New("injected EIO on directory fsync")
					}
					return nil
				})
				before := st.Stats().Snapshot(0)
				res := at(st, 1010).Renew(context.Background(), h, 60)
				for _, r := range res {
					if r.Outcome != commit.IOError {
						t.Errorf("%s: %s (%s), want io-error", r.ID, r.Outcome.Reason(), r.Detail)
					}
				}
				if s := st.Stats().Snapshot(0); s.Renewals != before.Renewals {
					t.Errorf("stats count %d renewals in a failed batch", s.Renewals-before.Renewals)
				}
				checkDirsSynced(t, log.snapshot())
			})
		}
	}
}
