package commit_test

import (
	"testing"

	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
)

// TestStickyDirs: seam.StickyDirs names the table's root and stage/ (a
// shared table's directories every member writes and no member may
// rename another's entries of), and no other directory of the table.
func TestStickyDirs(t *testing.T) {
	t.Parallel()
	for _, d := range []string{"", ".", "/", layout.StageDir, layout.StageDir + "/"} {
		if !seam.IsSticky(d) {
			t.Errorf("%q is not sticky", d)
		}
	}
	for _, d := range []string{layout.PublicDir, layout.LostFound, layout.TallyDir, "work", "work/00", layout.StageDir + "/x.1", "queue"} {
		if seam.IsSticky(d) {
			t.Errorf("%q is sticky", d)
		}
	}
	sh, err := seam.ParseSharing("group")
	if err != nil {
		t.Fatal(err)
	}
	if got := sh.DirModeOf(layout.StageDir, 0o755); got != 0o3775 {
		t.Errorf("stage/: mode %04o, want 3775", got)
	}
	if got := sh.DirModeOf(layout.PublicDir, 0o755); got != 0o2775 {
		t.Errorf("public/: mode %04o, want 2775", got)
	}
}
