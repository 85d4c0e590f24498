package commit_test

import (
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
)

// TestStickyDirs: seam.StickyDirs names the table's root and stage/ (a
// shared table's directories every member writes and no member may
// rename another's entries of), and no other directory of the table.
func TestStickyDirs(t *testing.T) {
	t.Parallel()
	for _, d := range []string{"", ".", "/", commit.StageDir, commit.StageDir + "/"} {
		if !seam.IsSticky(d) {
			t.Errorf("%q is not sticky", d)
		}
	}
	for _, d := range []string{commit.PublicDir, commit.LostFound, commit.TallyDir, "work", "work/00", commit.StageDir + "/x.1", "queue"} {
		if seam.IsSticky(d) {
			t.Errorf("%q is sticky", d)
		}
	}
	sh, err := seam.ParseSharing("group")
	if err != nil {
		t.Fatal(err)
	}
	if got := sh.DirModeOf(commit.StageDir, 0o755); got != 0o3775 {
		t.Errorf("stage/: mode %04o, want 3775", got)
	}
	if got := sh.DirModeOf(commit.PublicDir, 0o755); got != 0o2775 {
		t.Errorf("public/: mode %04o, want 2775", got)
	}
}
