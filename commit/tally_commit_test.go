package commit_test

// The tally's link costs its writer no fsync (docs/performance.md, the
// durability budget): neither a complete nor the done record of a publish
// fsyncs the tally's bucket, and the link is there all the same. A crash
// that loses it is lease fsck --repair's (internal/safety's crash states
// check the tally after the repair).

import (
	"context"
	"os"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/layout"
)

func TestTallyLinkNotSynced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, published := range []bool{false, true} {
		st, log := hookedTable(t, 4)
		a := claimOne(t, st, shardID(1, 1), 10)
		b := claimOne(t, st, shardID(2, 1), 10)
		at(st, 11).Complete(ctx, []commit.Item{b}) // makes the bucket (its creation fsyncs tally/, once per span)
		log.reset(nil)
		var res commit.Result
		if published {
			stageTree(t, st, a, afl)
			log.reset(nil)
			var err error
			if res, err = at(st, 11).CompleteStage(ctx, a); err != nil {
				t.Fatal(err)
			}
		} else {
			res = at(st, 11).Complete(ctx, []commit.Item{a})[0]
		}
		if res.Outcome != commit.OK {
			t.Fatalf("published %v: %s %s", published, res.Outcome.Reason(), res.Detail)
		}
		bucket := layout.TallyBucketDir(11 / layout.TallyBucket * layout.TallyBucket)
		if n := checkDirsSynced(t, log.snapshot())[bucket]; n != 0 {
			t.Errorf("published %v: the tally's bucket fsynced %d times, want none", published, n)
		}
		if _, err := os.Lstat(st.Abs(layout.TallyPath(res.Record))); err != nil {
			t.Errorf("published %v: the tally's link: %v", published, err)
		}
	}
}
