//go:build linux

package leases_test

// Table.Work and the no-room rule (issue 36, internal/worker/room.go): a
// function that fails while the table's filesystem has no room is the
// machine's failure: released with no attempt counted (ItemResult.NoRoom),
// and Work claims nothing until there is room. Before, the failure counted
// an attempt: with MaxAttempts 1 the item ended failed.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/leases"
)

func TestWorkNoRoomCountsNoAttempt(t *testing.T) {
	t.Parallel()
	mnt := testenv.LoopMount(t, "ext4", 64<<20, "-b", "4096", "-m", "0")
	tb, err := leases.Create(filepath.Join(mnt, "table"), leases.WithShards(4, 4), leases.WithClockSkew(100*time.Millisecond), leases.WithOwner("test/noroom"))
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	ctx := context.Background()
	if _, err := tb.AddContent(ctx, []byte("findings")); err != nil {
		t.Fatal(err)
	}
	var said []string
	var results []leases.ItemResult
	runs := 0
	opts := leases.WorkOptions{MaxAttempts: 1, TTL: 30 * time.Second,
		Waiting: func(msg string) {
			said = append(said, msg)
			if strings.Contains(msg, "cannot be written") {
				testenv.Unfill(mnt) // room again
			}
		},
		Done: func(r leases.ItemResult) { results = append(results, r) },
	}
	stats, err := tb.Work(ctx, func(ctx context.Context, it leases.Item) error {
		runs++
		if runs == 1 {
			testenv.Fill(t, mnt)
		}
		// The findings: on a full filesystem this fails (ENOSPC).
		return os.WriteFile(filepath.Join(it.Stage, "findings"), make([]byte, 256<<10), 0o644)
	}, opts)
	if err != nil || stats.Finishes["released"] != 1 || stats.Finishes["done"] != 1 || runs != 2 {
		t.Fatalf("Work: %v, %+v after %d runs, said %q; want the run on the full filesystem released, the next done", err, stats, runs, said)
	}
	if r := results[0]; r.NoRoom == nil || r.Attempts != 0 || r.Err == nil {
		t.Errorf("the run on the full filesystem: %+v; want NoRoom set, no attempt", r)
	}
	if r := results[1]; r.Finish != "done" || r.Attempts != 0 || r.NoRoom != nil {
		t.Errorf("the run once there was room: %+v; want done, no attempt", r)
	}
	all := strings.Join(said, "\n")
	if !strings.Contains(all, "failed while "+filepath.Join(mnt, "table")+"'s filesystem has no room") || !strings.Contains(all, "released, no attempt counted") || !strings.Contains(all, "cannot be written") || !strings.Contains(all, "writable again") {
		t.Errorf("Work's messages %q; want the release for want of room, the wait and its end", said)
	}
}
