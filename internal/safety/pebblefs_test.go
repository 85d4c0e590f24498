package safety

import (
	"context"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
)

func writeFile(t *testing.T, f seam.FS, name, data string, sync bool) {
	t.Helper()
	w, err := f.CreateExcl(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMemSemantics checks the Pebble adapter against the FS contract.
func TestMemSemantics(t *testing.T) {
	m := NewMem()
	if err := m.Mkdir("d"); err != nil {
		t.Fatal(err)
	}
	if err := m.Mkdir("d"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second mkdir: %v, want ErrExist", err)
	}
	if err := m.Mkdir("x/y"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("mkdir without parent: %v, want ErrNotExist", err)
	}
	writeFile(t, m, "d/a", "hello", true)
	if _, err := m.CreateExcl("d/a"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("CreateExcl over a file: %v, want ErrExist", err)
	}
	if _, err := m.CreateExcl("nodir/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("CreateExcl without parent: %v, want ErrNotExist", err)
	}
	if got, err := m.ReadFile("d/a", 2); err != nil || string(got) != "hel" {
		t.Fatalf("ReadFile max 2 = %q, %v; want max+1 bytes", got, err)
	}
	if _, err := m.ReadFile("d", 10); !errors.Is(err, seam.ErrNotRegular) {
		t.Fatalf("ReadFile of a directory: %v, want ErrNotRegular", err)
	}
	if _, err := m.ReadFile("d/none", 10); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile of nothing: %v", err)
	}
	writeFile(t, m, "d/b", "world", true)
	if err := m.RenameNoReplace("d/b", "d/a"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("RenameNoReplace over a file: %v, want ErrExist", err)
	}
	if err := m.Rename("d/b", "nodir/b"); err == nil {
		t.Fatal("rename into a missing directory succeeded")
	}
	if got, _ := m.ReadFile("d/b", 10); string(got) != "world" {
		t.Fatalf("a failed rename lost its source: %q", got)
	}
	if err := m.Rename("d/b", "d/a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.ReadFile("d/a", 10); string(got) != "world" {
		t.Fatalf("after rename d/a = %q", got)
	}
	if err := m.RenameNoReplace("d/a", "d/c"); err != nil {
		t.Fatal(err)
	}
	ents, err := m.ReadDir("d")
	if err != nil || len(ents) != 1 || ents[0].Name() != "c" {
		t.Fatalf("ReadDir = %v, %v", ents, err)
	}
	if fi, err := m.Lstat("d/c"); err != nil || fi.Name() != "c" || fi.Size() != 5 || !fi.Mode().IsRegular() {
		t.Fatalf("Lstat = %v, %v", fi, err)
	}
	if err := m.Remove("d/c"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReadFile("../etc/passwd", 10); !errors.Is(err, fs.ErrInvalid) {
		t.Fatalf("a name leaving the root: %v", err)
	}
	// Locks: byte ranges, exclusive, bounded wait, created when missing.
	ctx := context.Background()
	u1, err := m.Lock(ctx, "d/.lock", 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock(ctx, "d/.lock", 7, 5*time.Millisecond); !errors.Is(err, commit.ErrLockTimeout) {
		t.Fatalf("second lock of a held byte: %v, want ErrLockTimeout", err)
	}
	u2, err := m.Lock(ctx, "d/.lock", 8, 0)
	if err != nil {
		t.Fatalf("another byte of the same file: %v", err)
	}
	u1()
	u3, err := m.Lock(ctx, "d/.lock", 7, 0)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	u2()
	u3()
}

// TestMemCrashModel checks what Pebble's crash clone keeps and loses.
func TestMemCrashModel(t *testing.T) {
	m := NewMem()
	if err := m.Mkdir("d"); err != nil {
		t.Fatal(err)
	}
	m.SyncDir("")
	writeFile(t, m, "d/old", "v1\n", true)
	m.SyncDir("d")
	writeFile(t, m, "d/.tmp", "v2\n", true)
	if err := m.Rename("d/.tmp", "d/old"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, "d/unsynced", "data", false)
	lost := m.CrashClone(vfs.CrashCloneCfg{})
	if got, _ := lost.ReadFile("d/old", 10); string(got) != "v1\n" {
		t.Fatalf("a rename not covered by a directory fsync survived: d/old = %q", got)
	}
	if _, err := lost.ReadFile("d/unsynced", 10); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an unsynced create survived: %v", err)
	}
	m.SyncDir("d")
	kept := m.CrashClone(vfs.CrashCloneCfg{})
	if got, _ := kept.ReadFile("d/old", 10); string(got) != "v2\n" {
		t.Fatalf("a synced rename was lost: d/old = %q", got)
	}
	if got, err := kept.ReadFile("d/unsynced", 10); err != nil || len(got) != 0 {
		t.Fatalf("unsynced data of a synced entry: %q, %v; want an empty file", got, err)
	}
}

// TestPebbleCrashStates is the second opinion: the work operations on
// Pebble's crash-simulating filesystem, sampled before every call.
func TestPebbleCrashStates(t *testing.T) {
	t.Parallel()
	x := explorer()
	samples := sized(1, 4, 16)
	total := 0
	var rows []string
	var tally Tally
	for _, sc := range sampled(allScenarios()) {
		res, err := x.ExplorePebble(sc, samples)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		total += res.States
		rows = append(rows, res.Scenario+": "+itoa(res.States))
		tally.Add(res.Violations...)
	}
	report(t, &tally)
	t.Logf("pebble crash states (%d samples per crash point): %s; total %d", samples, strings.Join(rows, ", "), total)
}

func itoa(n int) string { return strconv.Itoa(n) }
