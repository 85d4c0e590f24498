package seam_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasetool/lease/commit/seam"
)

// TestResultTreesAreNotCached: a worker stages a result tree and publishes
// it by moving it into public/, item after item, for days. The handles of
// the table's own directories are kept (a record's write costs no lookup),
// but those of result trees are not: they grow with the campaign, and
// before this every published tree left its handles open until Close, so a
// `lease work` ran out of descriptors (EMFILE after 240 items at ulimit -n
// 256). Listing, syncing and removing in result trees, lost+found/ and the
// tally's buckets keep nothing open either.
func TestResultTreesAreNotCached(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, d := range []string{"work/00", "stage", "public", "lost+found", "tally/unqueued"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	o, err := seam.OS(root)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	// The table's own directory: opened once, then reused.
	if err := o.SyncDir("work/00"); err != nil {
		t.Fatal(err)
	}
	base := o.Handles()
	for i := 0; i < 3; i++ {
		if err := o.SyncDir("work/00"); err != nil {
			t.Fatal(err)
		}
	}
	if o.Handles() != base {
		t.Fatalf("work/00 synced again: %d handles, want %d (the cached one reused)", o.Handles(), base)
	}
	publish := func(i int) {
		t.Helper()
		stage := fmt.Sprintf("stage/item%d.1", i)
		for _, d := range []string{stage, stage + "/crashes"} {
			if err := o.Mkdir(d); err != nil {
				t.Fatal(err)
			}
		}
		f, err := o.CreateExcl(stage + "/crashes/id:000000")
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("crash"))
		f.Close()
		for _, step := range []error{o.SyncFile(stage + "/crashes/id:000000"), o.SyncDir(stage + "/crashes"), o.SyncDir(stage)} {
			if step != nil {
				t.Fatal(step)
			}
		}
		if ents, err := o.ReadDir(stage + "/crashes"); err != nil || len(ents) != 1 {
			t.Fatalf("ReadDir: %v %v", ents, err)
		}
		pub := fmt.Sprintf("public/item%d", i)
		if err := o.RenameNoReplace(stage, pub); err != nil {
			t.Fatal(err)
		}
		if _, err := o.Lstat(pub + "/crashes/id:000000"); err != nil {
			t.Fatal(err)
		}
		// fsck's walk and quarantine.
		if _, err := o.ReadDir(pub + "/crashes"); err != nil {
			t.Fatal(err)
		}
		lost := fmt.Sprintf("lost+found/q%d", i)
		if err := o.Mkdir(lost); err != nil {
			t.Fatal(err)
		}
		if err := o.Remove(lost); err != nil {
			t.Fatal(err)
		}
	}
	// The tally's buckets, one every five minutes of a campaign: not kept
	// either; its fixed directories are.
	for i := 0; i < 50; i++ {
		b := fmt.Sprintf("tally/%d", 1796400000+300*i)
		if err := o.Mkdir(b); err != nil {
			t.Fatal(err)
		}
		if err := o.SyncDir(b); err != nil {
			t.Fatal(err)
		}
		if f, err := o.CreateExcl(b + "/marker"); err != nil {
			t.Fatal(err)
		} else {
			f.Close()
		}
	}
	if got := o.Handles(); got != base+1 {
		t.Errorf("%d handles after 50 tally buckets, want %d (tally/ itself)", got, base+1)
	}
	if err := o.SyncDir("tally/unqueued"); err != nil {
		t.Fatal(err)
	}
	if got := o.Handles(); got != base+2 {
		t.Errorf("%d handles after tally/unqueued, want %d: it is kept", got, base+2)
	}
	publish(0) // stage/, public/ and lost+found/ themselves are the table's
	after := o.Handles()
	for i := 1; i <= 300; i++ {
		publish(i)
	}
	if got := o.Handles(); got != after {
		t.Errorf("%d handles after 300 more published trees, want %d: result trees stay cached", got, after)
	}
	// What the moved tree holds is where it went.
	if data, err := os.ReadFile(filepath.Join(root, "public/item300/crashes/id:000000")); err != nil || string(data) != "crash" {
		t.Fatalf("published file: %q %v", data, err)
	}
}
