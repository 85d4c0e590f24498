package commit_test

// Renames between directories (G8): refused by the same-directory batch,
// made durable by the move.

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"testing"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
)

// TestCrossDirectoryRefused: G8, the same-directory batch refuses a rename
// between directories before making it.
func TestCrossDirectoryRefused(t *testing.T) {
	t.Parallel()
	st, log := hookedTable(t, 4)
	src := path.Join(layout.StageDir, "result")
	if err := os.WriteFile(st.Abs(src), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := durable.NewSyncBatch(st.FS(), nil)
	for _, dst := range []string{path.Join(layout.PublicDir, "result"), "work/00/" + string(shardID(0, 1)) + ".json", "result"} {
		err := b.Replace(src, dst)
		if !errors.Is(err, durable.ErrCrossDirectory) {
			t.Errorf("Replace(%s, %s) = %v, want ErrCrossDirectory", src, dst, err)
		}
		if _, err := os.Lstat(st.Abs(dst)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after a refused Replace: %v", dst, err)
		}
	}
	if data, err := os.ReadFile(st.Abs(src)); err != nil || string(data) != "data" {
		t.Errorf("source after refused Replace: %q, %v", data, err)
	}
	if c := log.count(seam.OpRename) + log.count(seam.OpSyncDir); c != 0 {
		t.Errorf("%d renames or fsyncs for refused Replaces: %v", c, log.snapshot())
	}
	if err := b.Flush(); err != nil {
		t.Errorf("Flush after refusals: %v", err)
	}
	if c := log.count(seam.OpSyncDir); c != 0 {
		t.Errorf("Flush synced %d directories though nothing was renamed", c)
	}
	// Same directory: renamed, and the directory synced once by Flush.
	if err := os.WriteFile(st.Abs("stage/.tmp"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Replace("stage/.tmp", src); err != nil {
		t.Fatal(err)
	}
	if !b.Pending(layout.StageDir) {
		t.Error("stage not pending after a rename into it")
	}
	if err := b.Flush(); err != nil || log.count(seam.OpSyncDir) != 1 || b.Pending(layout.StageDir) {
		t.Errorf("Flush: %v, %d directory fsyncs", err, log.count(seam.OpSyncDir))
	}
}

// TestDurableMove: G8's cross-directory move fsyncs the destination
// directory, then the source directory, and never replaces a file.
func TestDurableMove(t *testing.T) {
	t.Parallel()
	st, log := hookedTable(t, 4)
	write := func(rel, data string) {
		if err := os.WriteFile(st.Abs(rel), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("stage/a", "A")
	if err := st.Disk().Move("stage/a", "public/a"); err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, o := range log.snapshot() {
		seq = append(seq, string(o.op)+" "+o.name)
	}
	if want := []string{"rename-noreplace public/a", "fsyncdir public", "fsyncdir stage"}; !slices.Equal(seq, want) {
		t.Errorf("DurableMove made %q, want %q", seq, want)
	}
	if data, err := os.ReadFile(st.Abs("public/a")); err != nil || string(data) != "A" {
		t.Errorf("public/a = %q, %v", data, err)
	}
	if _, err := os.Lstat(st.Abs("stage/a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stage/a still there: %v", err)
	}

	write("stage/b", "new")
	write("public/b", "old")
	log.reset(nil)
	err := st.Disk().Move("stage/b", "public/b")
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("DurableMove over an existing name = %v, want fs.ErrExist", err)
	}
	for rel, want := range map[string]string{"stage/b": "new", "public/b": "old"} {
		if data, err := os.ReadFile(st.Abs(rel)); err != nil || string(data) != want {
			t.Errorf("%s = %q, %v; want %q", rel, data, err, want)
		}
	}
	if c := log.count(seam.OpSyncDir); c != 0 {
		t.Errorf("%d directory fsyncs after a refused move", c)
	}

	// A failing destination fsync stops before the source is synced.
	write("stage/c", "C")
	log.reset(func(op seam.Op, name string) error {
		if op == seam.OpSyncDir && name == layout.PublicDir {
			return errors.New("injected EIO")
		}
		return nil
	})
	if err := st.Disk().Move("stage/c", "public/c"); err == nil {
		t.Error("DurableMove with a failing fsync succeeded")
	}
	if c := log.count(seam.OpSyncDir); c != 1 {
		t.Errorf("%d directory fsyncs, want the failed destination one only", c)
	}
}
