package hostile_test

// Case 1 of issue 38, the variant of a rename: the root and stage/ of a
// shared table are written by every member, so without the sticky bit a
// member can rename another's live staging directory (or stage/, or
// TABLE) and put a link at its name. With it (as /tmp), only an entry's
// owner, the directory's owner or root may rename it.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leasetool/lease/internal/hostile"
	"github.com/leasetool/lease/leases"
)

func init() {
	// probe-rename OLD: rename OLD to OLD.b and back; exit 0 when the
	// first rename was allowed, else 1 with the error on stderr.
	hostile.Register("probe-rename", func(args []string) int {
		if err := os.Rename(args[0], args[0]+".b"); err != nil {
			return fail(err)
		}
		if err := os.Rename(args[0]+".b", args[0]); err != nil {
			os.Stderr.WriteString("renamed, but not back: " + err.Error() + "\n")
		}
		return 0
	})
	// redirect DIR TARGET: move DIR aside and put the link DIR -> TARGET
	// at its name; exit 0 when both were done, else 1 with the error.
	hostile.Register("redirect", func(args []string) int {
		if err := os.Rename(args[0], args[0]+".moved"); err != nil {
			return fail(err)
		}
		return fail(os.Symlink(args[1], args[0]))
	})
}

// TestStickyStageDuringCmd: while A's lease work CMD waits, B tries to
// rename stage/ and TABLE (owner-made entries of the root) and to move A's
// staging directory aside with a link to A's home (holding a canary named
// result) at its name. Each rename fails with EPERM; CMD's write of
// $LEASE_STAGE/result then lands in the table and is published, and the
// canary is unchanged. On main (no sticky bit) the three renames succeed
// and CMD overwrites the canary.
func TestStickyStageDuringCmd(t *testing.T) {
	t.Parallel()
	e, root, id, _ := queued(t, "sticky-during")
	e.Canary(hostile.A, "result", 0o600) // where B's link would send CMD's write
	for _, d := range []string{root, filepath.Join(root, "stage")} {
		if m := modeOf(t, d); m&syscall.S_ISVTX == 0 {
			t.Errorf("%s: mode %04o after lease init --shared, want the sticky bit", d, m)
		}
	}
	cmd, out, stage, goOn := pausedWork(t, e, root)
	for _, p := range []string{filepath.Join(root, "stage"), filepath.Join(root, "TABLE")} {
		r, err := e.Step(context.Background(), hostile.B, "probe-rename", p).CombinedOutput()
		if err == nil || !strings.Contains(string(r), "operation not permitted") {
			t.Errorf("B renaming %s: %v %s, want EPERM", p, err, r)
		}
	}
	r, err := e.Step(context.Background(), hostile.B, "redirect", stage, e.Home(hostile.A)).CombinedOutput()
	if err == nil || !strings.Contains(string(r), "operation not permitted") {
		t.Errorf("B moving A's staging directory %s aside: %v %s, want EPERM", stage, err, r)
	}
	if err := os.WriteFile(goOn, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("lease work: %v\n%s", err, out.String())
	}
	e.CheckCanaries()
	if got, err := os.ReadFile(filepath.Join(root, "public", id, "result")); err != nil || string(got) != "mine\n" {
		t.Errorf("public/%s/result: %q %v\n%s", id, got, err, out.String())
	}
}

// TestFsckSticky: a shared table whose root and stage/ lost the sticky bit
// (one made before it was set) is reported by fsck (a permission error,
// exit 4) and repaired by its owner's fsck --repair, after which a member
// can no longer rename TABLE.
func TestFsckSticky(t *testing.T) {
	t.Parallel()
	e := hostile.New(t)
	root := e.Table()
	dirs := []string{root, filepath.Join(root, "stage")}
	for _, d := range dirs {
		if err := syscall.Chmod(d, modeOf(t, d)&^syscall.S_ISVTX); err != nil {
			t.Fatal(err)
		}
	}
	r := e.Must(4, hostile.B, "", "fsck", "--root", root)
	for _, name := range []string{root, filepath.Join(root, "stage")} {
		if !strings.Contains(r.Out, "error permission "+name+": directory mode 2775 lacks 1000") {
			t.Errorf("fsck does not report %s without the sticky bit:\n%s", name, r)
		}
	}
	e.Must(4, hostile.B, "", "fsck", "--root", root, "--repair") // not his: he cannot fix it
	e.Must(1, hostile.A, "", "fsck", "--root", root, "--repair")
	for _, d := range dirs {
		if m := modeOf(t, d); m != 0o3775 {
			t.Errorf("%s: mode %04o after fsck --repair, want 3775", d, m)
		}
	}
	e.Must(0, hostile.B, "", "fsck", "--root", root)
	if r, err := e.Step(context.Background(), hostile.B, "probe-rename", filepath.Join(root, "TABLE")).CombinedOutput(); err == nil {
		t.Errorf("B renamed TABLE after the repair: %s", r)
	}
}

// TestStickyStagePlantedByAnother: A (who owns the table and stage/)
// makes stage/ID.1/ before B claims the item, with result -> a private
// file of B's in it. B cannot move it aside (stage/ is sticky and neither
// it nor stage/ is B's), so B's lease work never reuses it: the item's
// staging fails, saying why, CMD is not run, the private file is
// unchanged and nothing is published; root's fsck --repair then moves the
// directory to lost+found/. On main B moved it aside and ran CMD.
func TestStickyStagePlantedByAnother(t *testing.T) {
	t.Parallel()
	e, root, id, _ := queued(t, "sticky-planted")
	canary := e.Canary(hostile.B, "private", 0o600)
	stage := filepath.Join(root, "stage", id+".1")
	if out, err := e.Step(context.Background(), hostile.A, "plant", stage, canary).CombinedOutput(); err != nil {
		t.Fatalf("planting as A: %v\n%s", err, out)
	}
	// The first try (token 1) meets A's directory: released with no
	// attempt, and B's worker goes on; the second (token 2) gets a name of
	// its own and publishes.
	r := e.Run(hostile.B, "", "work", "--root", root, "--max-items", "2", "--",
		"sh", "-c", `echo "$LEASE_TOKEN" > "$LEASE_STAGE/result"`)
	e.CheckCanaries()
	if r.Code != 0 || !strings.Contains(r.ErrOut, "stage/ is sticky, so only that account or root can move it away") || !strings.Contains(r.ErrOut, "; going on") {
		t.Errorf("B's lease work: %s, want the staging refused, saying why, and the worker going on", r)
	}
	if data, err := os.ReadFile(filepath.Join(root, "public", id, "result")); err != nil || string(data) != "2\n" {
		t.Errorf("public/%s/result: %q, %v; want the second try's (token 2)", id, data, err)
	}
	if st := e.Must(0, hostile.B, "", "status", "--root", root, "--json", id); !strings.Contains(st.Out, `"status":"done"`) || !strings.Contains(st.Out, `"attempts":0`) {
		t.Errorf("status of %s: %s; want no attempt counted for the planted directory", id, st.Out)
	}
	e.Run(0, "", "fsck", "--root", root, "--repair")
	if _, err := os.Lstat(stage); !os.IsNotExist(err) {
		t.Errorf("%s after root's fsck --repair: %v, want it moved to lost+found/", stage, err)
	}
}

func init() {
	// work-api ROOT: leases.Table.Work of up to two items, each writing its
	// token to result in its staging directory; prints the finishes.
	hostile.Register("work-api", func(args []string) int {
		tb, err := leases.Open(args[0])
		if err != nil {
			return fail(err)
		}
		defer tb.Close()
		stats, err := tb.Work(context.Background(), func(_ context.Context, it leases.Item) error {
			return os.WriteFile(filepath.Join(it.Stage, "result"), []byte(fmt.Sprintf("%d\n", it.Token)), 0o644)
		}, leases.WorkOptions{MaxItems: 2})
		fmt.Printf("items=%d finishes=%v\n", stats.Items, stats.Finishes)
		return fail(err)
	})
}

// TestStickyStagePlantedByAnotherAPI: the same through the Go API, as B:
// Table.Work releases the lease whose staging directory's name A took and
// goes on; the second try publishes. Before, Work returned the error.
func TestStickyStagePlantedByAnotherAPI(t *testing.T) {
	t.Parallel()
	e, root, id, _ := queued(t, "sticky-planted-api")
	canary := e.Canary(hostile.B, "private", 0o600)
	stage := filepath.Join(root, "stage", id+".1")
	if out, err := e.Step(context.Background(), hostile.A, "plant", stage, canary).CombinedOutput(); err != nil {
		t.Fatalf("planting as A: %v\n%s", err, out)
	}
	out, err := e.Step(context.Background(), hostile.B, "work-api", root).CombinedOutput()
	if err != nil {
		t.Fatalf("Table.Work as B: %v\n%s", err, out)
	}
	if data, err := os.ReadFile(filepath.Join(root, "public", id, "result")); err != nil || string(data) != "2\n" {
		t.Errorf("public/%s/result: %q, %v; want the second try's (token 2); Work said %s", id, data, err, out)
	}
}
