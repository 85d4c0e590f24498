package commit_test

// Whole results: a staged directory published under a name or as the
// whole staging directory (public/ID/), every file and directory fsynced
// before the committing record and the move, public/ before stage/;
// refusals that write nothing; the settling of an interrupted directory
// publish.

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// stageTree writes files (relative paths below the staging directory of
// it) as a command would.
func stageTree(t *testing.T, st *commit.Store, it commit.Item, files map[string]string) string {
	t.Helper()
	dir, err := st.MakeStage(it.ID, it.Token)
	if err != nil {
		t.Fatal(err)
	}
	for rel, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// afl is what a fuzzer leaves: the same names in every instance.
var afl = map[string]string{
	"crashes/id:000000,sig:11,src:000000,time:12,execs:40,op:havoc,rep:2": "crash one",
	"crashes/id:000001,sig:06,src:000000,time:20,execs:77,op:havoc,rep:4": "crash two",
	"crashes/README.txt": "Command line used to find this crash: ./target @@",
	"fuzzer_stats":       "execs_done : 1234",
}

func TestCompleteStage(t *testing.T) {
	t.Parallel()
	st, log := hookedTable(t, 4)
	a, b := claimOne(t, st, shardID(1, 1), 10), claimOne(t, st, shardID(2, 2), 10)
	stageTree(t, st, a, afl)
	stageTree(t, st, b, afl) // the same names: no collision, each under its ID
	log.reset(nil)
	r, err := at(st, 11).CompleteStage(context.Background(), a)
	if err != nil || r.Outcome != commit.OK {
		t.Fatalf("CompleteStage: %v %s %s", err, r.Outcome.Reason(), r.Detail)
	}
	if r.Record.Status != leasefmt.Done || r.Record.Publish != leasefmt.PublishStage {
		t.Errorf("record %+v, want done with publish \".\"", r.Record)
	}
	for rel, data := range afl {
		got, err := os.ReadFile(st.Abs(path.Join(layout.PublicDir, string(a.ID), rel)))
		if err != nil || string(got) != data {
			t.Errorf("public/ID/%s = %q, %v", rel, got, err)
		}
	}
	if _, err := os.Lstat(st.Abs(layout.StagePath(a.ID, a.Token))); !os.IsNotExist(err) {
		t.Errorf("the staging directory is still there (%v)", err)
	}
	// The order: every file and directory of the result fsynced, then the
	// committing record, the rename, public/, stage/, the done record.
	stage := layout.StagePath(a.ID, a.Token)
	rec := st.RecordPath(leasefmt.Work, a.ID)
	var files, dirs, renames, moved int
	last := map[string]int{}
	for i, o := range log.snapshot() {
		switch {
		case o.op == seam.OpFsync && strings.HasPrefix(o.name, stage+"/"):
			files++
			last["file"] = i
		case o.op == seam.OpSyncDir && strings.HasPrefix(o.name, stage):
			dirs++
			last["dir"] = i
		case o.op == seam.OpRename && o.name == rec:
			renames++
			if renames == 1 {
				last["committing"] = i
			} else {
				last["done"] = i
			}
		case o.op == seam.OpRenameNoReplace:
			moved++
			last["move"] = i
		case o.op == seam.OpSyncDir && o.name == layout.PublicDir:
			last["public"] = i
		case o.op == seam.OpSyncDir && o.name == layout.StageDir:
			last["stagedir"] = i
		}
	}
	if files != len(afl) || dirs != 2 || renames != 2 || moved != 1 {
		t.Fatalf("%d file fsyncs, %d directory fsyncs, %d record renames, %d moves; want %d, 2, 2, 1:\n%v", files, dirs, renames, moved, len(afl), log.snapshot())
	}
	for _, pair := range [][2]string{{"file", "committing"}, {"dir", "committing"}, {"committing", "move"}, {"move", "public"}, {"public", "stagedir"}, {"stagedir", "done"}} {
		if last[pair[0]] >= last[pair[1]] {
			t.Errorf("%s (call %d) not before %s (call %d)", pair[0], last[pair[0]], pair[1], last[pair[1]])
		}
	}
	// A staging directory of the same name made again is a new, empty
	// one: nothing the store or the FS cached points into public/ID.
	dir, err := st.MakeStage(a.ID, a.Token)
	if err != nil {
		t.Fatal(err)
	}
	f, err := st.FS().CreateExcl(path.Join(stage, "late"))
	if err != nil {
		t.Fatalf("a file in the new staging directory: %v (%s)", err, dir)
	}
	f.Close()
	if _, err := os.Lstat(st.Abs(path.Join(layout.PublicDir, string(a.ID), "late"))); !os.IsNotExist(err) {
		t.Errorf("a file made in stage/ID.TOKEN after its publish landed in public/ID (%v)", err)
	}
	// A retry with the same token succeeds again and moves nothing.
	if r, err := at(st, 12).CompleteStage(context.Background(), a); err != nil || r.Outcome != commit.OK {
		t.Errorf("CompleteStage again: %v %s", err, r.Outcome.Reason())
	}
	// b publishes the same names under its own ID.
	if r, err := at(st, 12).CompleteStage(context.Background(), b); err != nil || r.Outcome != commit.OK {
		t.Fatalf("CompleteStage of b: %v %s %s", err, r.Outcome.Reason(), r.Detail)
	}
	if got, _ := os.ReadFile(st.Abs(path.Join(layout.PublicDir, string(b.ID), "fuzzer_stats"))); string(got) != afl["fuzzer_stats"] {
		t.Errorf("b's result: %q", got)
	}
}

// TestCompletePublishDirectory: --publish NAME takes a directory too.
func TestCompletePublishDirectory(t *testing.T) {
	t.Parallel()
	st, _ := hookedTable(t, 4)
	a := claimOne(t, st, shardID(0, 5), 10)
	stageTree(t, st, a, map[string]string{"findings/x": "X", "findings/deep/y": "Y", "other": "O"})
	r, err := at(st, 11).CompletePublish(context.Background(), a, "findings")
	if err != nil || r.Outcome != commit.OK || r.Record.Publish != "findings" {
		t.Fatalf("CompletePublish of a directory: %v %s %s", err, r.Outcome.Reason(), r.Detail)
	}
	if got, err := os.ReadFile(st.Abs("public/findings/deep/y")); err != nil || string(got) != "Y" {
		t.Errorf("public/findings/deep/y = %q, %v", got, err)
	}
	if got, err := os.ReadFile(st.Abs(path.Join(layout.StagePath(a.ID, a.Token), "other"))); err != nil || string(got) != "O" {
		t.Errorf("what was not published stays staged: %q, %v", got, err)
	}
}

// TestCompleteStageRefusals: a staged link, or a result whose public/
// name is taken, is refused before anything is written: the record stays
// leased and everything staged stays where it was.
func TestCompleteStageRefusals(t *testing.T) {
	t.Parallel()
	st, log := hookedTable(t, 4)
	a := claimOne(t, st, shardID(3, 9), 10)
	dir := stageTree(t, st, a, map[string]string{"crashes/c1": "1"})
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "crashes", "link")); err != nil {
		t.Fatal(err)
	}
	log.reset(nil)
	_, err := at(st, 11).CompleteStage(context.Background(), a)
	if !errors.Is(err, commit.ErrStaged) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a staged link: %v, want ErrStaged naming the link", err)
	}
	if n := log.count(seam.OpRename) + log.count(seam.OpRenameNoReplace) + log.count(seam.OpCreate); n != 0 {
		t.Errorf("a refused publish wrote %d times", n)
	}
	os.Remove(filepath.Join(dir, "crashes", "link"))
	os.MkdirAll(st.Abs(path.Join(layout.PublicDir, string(a.ID))), 0o755) // another program's
	r, err := at(st, 12).CompleteStage(context.Background(), a)
	if err != nil || r.Outcome != commit.Exists {
		t.Errorf("public/ID taken: %v %s, want exists", err, r.Outcome.Reason())
	}
	if rec, _ := st.Read(context.Background(), leasefmt.Work, a.ID); rec.Status != leasefmt.Leased {
		t.Errorf("record after refusals: %+v, want still leased", rec)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "crashes", "c1")); err != nil || string(got) != "1" {
		t.Errorf("staged result after refusals: %q, %v", got, err)
	}
}

// TestSettleStagePublish: a committing record of a whole-directory publish
// whose completer died is rolled forward when public/ID is there, back
// (the staging directory stays) when it is not.
func TestSettleStagePublish(t *testing.T) {
	t.Parallel()
	st, _ := hookedTable(t, 4)
	fwd, back := claimOne(t, st, shardID(0, 20), 10), claimOne(t, st, shardID(1, 21), 10)
	for _, it := range []commit.Item{fwd, back} {
		stageTree(t, st, it, map[string]string{"c": "crash"})
		r := at(st, 11).Apply(context.Background(), leasefmt.Work, []commit.Item{it}, commit.CommittingDecision(leasefmt.PublishStage, 0))
		if r[0].Outcome != commit.OK {
			t.Fatal(r[0].Outcome.Reason())
		}
	}
	// The completer of fwd died right after its move.
	if err := st.Disk().Move(layout.StagePath(fwd.ID, fwd.Token), path.Join(layout.PublicDir, string(fwd.ID))); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.ResultPublished(fwd.ID, fwd.Token, leasefmt.PublishStage); !ok || err != nil {
		t.Errorf("ResultPublished = %v, %v", ok, err)
	}
	rec, _, err := at(st, 12).Settle(context.Background(), fwd.ID)
	if err != nil || rec == nil || rec.Status != leasefmt.Done {
		t.Errorf("settle forward: %+v, %v", rec, err)
	}
	// back's completer died before it: rolled back once expired.
	rec, _, err = at(st, 1000).Settle(context.Background(), back.ID)
	if err != nil || rec == nil || rec.Status != leasefmt.Released {
		t.Errorf("settle back: %+v, %v", rec, err)
	}
	if got, err := os.ReadFile(st.Abs(path.Join(layout.StagePath(back.ID, back.Token), "c"))); err != nil || string(got) != "crash" {
		t.Errorf("rolled back: the staged result %q, %v", got, err)
	}
}

// TestRemoveEmptyStage: one rmdir says whether a staging directory was
// empty and removes it when it was; one with a file in it stays whole; a
// filesystem that refuses the rmdir gets its answer from a listing.
func TestRemoveEmptyStage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		files     map[string]string // nil: no staging directory at all
		refuse    bool              // the rmdir fails with EPERM
		wantEmpty bool
		wantGone  bool
	}{
		{"empty", map[string]string{}, false, true, true},
		{"missing", nil, false, true, true},
		{"a file", map[string]string{"crash": "x"}, false, false, false},
		{"a directory", map[string]string{"crashes/id:0": "x"}, false, false, false},
		{"refused, empty", map[string]string{}, true, true, false},
		{"refused, a file", map[string]string{"crash": "x"}, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, log := hookedTable(t, 4)
			it := claimOne(t, st, shardID(1, 1), 10)
			dir := filepath.Join(st.Root(), filepath.FromSlash(layout.StagePath(it.ID, it.Token)))
			if tc.files != nil {
				stageTree(t, st, it, tc.files)
			}
			if tc.refuse {
				log.reset(func(op seam.Op, name string) error {
					if op == seam.OpRemove {
						return &os.PathError{Op: "remove", Path: name, Err: syscall.EPERM}
					}
					return nil
				})
			}
			empty, err := st.RemoveEmptyStage(it.ID, it.Token)
			if err != nil || empty != tc.wantEmpty {
				t.Fatalf("RemoveEmptyStage: %v %v, want %v nil", empty, err, tc.wantEmpty)
			}
			_, serr := os.Lstat(dir)
			if gone := errors.Is(serr, os.ErrNotExist); gone != tc.wantGone {
				t.Errorf("staging directory gone %v, want %v (%v)", gone, tc.wantGone, serr)
			}
			for rel, data := range tc.files {
				if got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel))); err != nil || string(got) != data {
					t.Errorf("%s: %q %v, want %q", rel, got, err, data)
				}
			}
		})
	}
}
