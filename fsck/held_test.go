package fsck_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/fsck"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// heldFixture is a table with one queued item claimed and completed, and
// the root.
func heldFixture(t *testing.T) (*commit.Store, string, leasefmt.ID) {
	t.Helper()
	root := t.TempDir()
	st, err := commit.Open(root, commit.Options{Create: &leasefmt.Table{WorkShards: 4, TargetShards: 4, CreatedAt: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	id := leasefmt.ID(strings.Repeat("ab", 32))
	ctx := context.Background()
	st.Enqueue(ctx, []commit.Item{{ID: id}})
	if r := st.Claim(ctx, []commit.Item{{ID: id}}, "w", 60); r[0].Outcome != commit.OK {
		t.Fatal(r[0].Outcome.Reason())
	}
	if r := st.Complete(ctx, []commit.Item{{ID: id, Token: 1}}); r[0].Outcome != commit.OK {
		t.Fatal(r[0].Outcome.Reason())
	}
	return st, root, id
}

func heldFindings(found []*fsck.Finding) []*fsck.Finding {
	var out []*fsck.Finding
	for _, f := range found {
		if f.Kind == fsck.KindHeld || strings.HasPrefix(f.Path, "held/") {
			out = append(out, f)
		}
	}
	return out
}

// TestFsckHeldStaleName: the held/ name of a finished item (its completer
// killed before the removal) is debris: reported, exit 0; --repair
// removes it, and the next check finds nothing.
func TestFsckHeldStaleName(t *testing.T) {
	t.Parallel()
	_, root, id := heldFixture(t)
	stale := filepath.Join(root, "held", layout.HeldName(id, 2e9, 1))
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := lease(t, "fsck", "--root", root)
	if code != 0 || !strings.Contains(out, "held/"+layout.HeldName(id, 2e9, 1)) {
		t.Fatalf("fsck exit %d, want 0 with the debris reported:\n%s", code, out)
	}
	if _, found := run(t, root, false, nil); len(heldFindings(found)) != 1 || !heldFindings(found)[0].Debris {
		t.Fatalf("findings:\n%s", describe(found))
	}
	if _, _, code := lease(t, "fsck", "--root", root, "--repair"); code != 0 {
		t.Fatalf("fsck --repair of debris exit %d, want 0", code)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale name is still there (%v)", err)
	}
	if out, _, code := lease(t, "fsck", "--root", root); code != 0 || strings.Contains(out, "held") {
		t.Fatalf("fsck after the repair exit %d:\n%s", code, out)
	}
}

// TestFsckHeldHostile: a symbolic link, a directory, a file of another name
// and a non-empty file in held/ are errors (exit 4), moved to lost+found/
// by --repair (exit 1) without following the link; a live lease's name is
// left alone, and the check after the repair is clean (exit 0).
func TestFsckHeldHostile(t *testing.T) {
	t.Parallel()
	st, root, id := heldFixture(t)
	live := leasefmt.ID(strings.Repeat("cd", 32))
	if r := st.Claim(context.Background(), []commit.Item{{ID: live}}, "w", 3600); r[0].Outcome != commit.OK {
		t.Fatal(r[0].Outcome.Reason())
	}
	liveName := filepath.Join(root, "held", layout.HeldName(live, r0Expiry(t, st, live), 1))
	if _, err := os.Lstat(liveName); err != nil {
		t.Fatalf("the live lease has no held/ name: %v", err)
	}
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(root, "held")
	if err := os.Symlink(target, filepath.Join(held, layout.HeldName(id, 5, 1))); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(held, layout.HeldName(id, 6, 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(held, "junk"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(held, layout.HeldName(id, 7, 1)), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, code := lease(t, "fsck", "--root", root); code != 4 {
		t.Fatalf("fsck exit %d, want 4:\n%s", code, out)
	}
	if _, found := run(t, root, false, nil); len(heldFindings(found)) != 4 {
		t.Fatalf("want 4 findings in held/:\n%s", describe(found))
	}
	if out, _, code := lease(t, "fsck", "--root", root, "--repair"); code != 1 {
		t.Fatalf("fsck --repair exit %d, want 1:\n%s", code, out)
	}
	ents, err := os.ReadDir(held)
	if err != nil || len(ents) != 1 || ents[0].Name() != filepath.Base(liveName) {
		t.Fatalf("held/ after the repair: %v %v", ents, err)
	}
	if data, err := os.ReadFile(target); err != nil || string(data) != "keep" {
		t.Fatalf("the link's target: %q %v", data, err)
	}
	if out, _, code := lease(t, "fsck", "--root", root); code != 0 {
		t.Fatalf("fsck after the repair exit %d:\n%s", code, out)
	}
}

func r0Expiry(t *testing.T, st *commit.Store, id leasefmt.ID) float64 {
	t.Helper()
	rec, err := st.Read(context.Background(), leasefmt.Work, id)
	if err != nil || rec == nil {
		t.Fatal(rec, err)
	}
	return rec.ExpiresAt
}
