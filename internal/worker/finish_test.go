package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

func testStore(t *testing.T) *commit.Store {
	t.Helper()
	root := filepath.Join(t.TempDir(), "table")
	if err := durable.MkdirRoot(root); err != nil {
		t.Fatal(err)
	}
	st, err := commit.Open(root, commit.Options{Create: &leasefmt.Table{WorkShards: 4, TargetShards: 4, CreatedAt: leasefmt.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func testID(name string) leasefmt.ID {
	sum := sha256.Sum256([]byte(name))
	return leasefmt.ID(hex.EncodeToString(sum[:]))
}

// claimed claims name and makes its staging directory, with files in it.
func claimed(t *testing.T, st *commit.Store, name string, files ...string) commit.Item {
	t.Helper()
	r := st.Claim(context.Background(), []commit.Item{{ID: testID(name)}}, "test", 60)[0]
	if r.Outcome != commit.OK {
		t.Fatalf("claim %s: %v", name, r.Detail)
	}
	it := commit.Item{ID: r.ID, Token: r.Token}
	dir, err := st.MakeStage(it.ID, it.Token)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return it
}

func status(t *testing.T, st *commit.Store, id leasefmt.ID) *leasefmt.Record {
	t.Helper()
	rec, err := st.Read(context.Background(), leasefmt.Work, id)
	if err != nil || rec == nil {
		t.Fatalf("record of %s: %v", id, err)
	}
	return rec
}

func exists(st *commit.Store, name string) bool {
	_, err := os.Lstat(st.Abs(name))
	return err == nil
}

func TestFinishRules(t *testing.T) {
	st := testStore(t)
	failure := &commit.Failure{ExitStatus: 139, Stderr: []byte("SEGV\n")}

	// Succeeded, nothing staged: done; the empty staging directory goes.
	it := claimed(t, st, "empty")
	if f := Finish(context.Background(), st, it, End{Complete: true, Succeeded: true}, 3); f.How != HowDone || f.Published || f.Attempt {
		t.Errorf("empty stage: %+v", f)
	}
	if exists(st, layout.StagePath(it.ID, it.Token)) || status(t, st, it.ID).Status != leasefmt.Done {
		t.Error("empty stage: the item is not done, or its staging directory stayed")
	}

	// Succeeded with files staged, any names: published whole as public/ID/.
	it = claimed(t, st, "found", "crashes/id:000000,sig:11", "fuzzer_stats")
	if f := Finish(context.Background(), st, it, End{Complete: true, Succeeded: true}, 3); f.How != HowDone || !f.Published {
		t.Errorf("staged result: %+v", f)
	}
	if !exists(st, "public/"+string(it.ID)+"/crashes/id:000000,sig:11") || !exists(st, "public/"+string(it.ID)+"/fuzzer_stats") {
		t.Error("the result is not in public/ID/")
	}

	// A publish that collides: not done, an attempt, the stage stays.
	it = claimed(t, st, "collides", "crash")
	os.MkdirAll(st.Abs("public/"+string(it.ID)), 0o755)
	f := Finish(context.Background(), st, it, End{Complete: true, Succeeded: true}, 3)
	if f.How != HowPublishRefused || !f.Attempt || f.Refused == "" {
		t.Errorf("collision: %+v", f)
	}
	if rec := status(t, st, it.ID); rec.Status != leasefmt.Released || rec.Attempts != 1 {
		t.Errorf("collision: record %+v", rec)
	}
	if !exists(st, layout.StagePath(it.ID, it.Token)+"/crash") {
		t.Error("collision: the staged result is gone")
	}

	// Failed on its own: attempts counted; failed at max_attempts.
	for n := 1; n <= 2; n++ {
		it = claimed(t, st, "poison")
		f := Finish(context.Background(), st, it, End{Complete: true, Failure: failure}, 2)
		want := map[int]string{1: HowReleased, 2: HowFailed}[n]
		if f.How != want || !f.Attempt || f.Result.Record.Attempts != int64(n) {
			t.Errorf("poison run %d: %+v, want %s", n, f, want)
		}
	}
	if rec := status(t, st, it.ID); rec.Status != leasefmt.Failed || rec.ExitStatus != 139 || rec.StderrTail != "SEGV" {
		t.Errorf("poison: record %+v", rec)
	}

	// Stopped (no Failure) or lost: released, no attempt; without
	// Complete a failure is no attempt either.
	for _, e := range []End{{Complete: true}, {Complete: true, Lost: true, Failure: failure}, {Failure: failure}} {
		it = claimed(t, st, "stopped")
		if f := Finish(context.Background(), st, it, e, 3); f.How != HowReleased || f.Attempt {
			t.Errorf("%+v: %+v", e, f)
		}
		if rec := status(t, st, it.ID); rec.Attempts != 0 {
			t.Errorf("%+v: attempts %d", e, rec.Attempts)
		}
	}

	// A lease taken over is lost; one its holder released or completed
	// itself counts as finished, and what it staged is not published.
	it = claimed(t, st, "taken")
	st.Revoke(context.Background(), []commit.Item{{ID: it.ID}})
	st.Claim(context.Background(), []commit.Item{{ID: it.ID}}, "other", 60)
	if f := Finish(context.Background(), st, it, End{Complete: true, Failure: failure}, 3); f.How != HowLost {
		t.Errorf("taken over: %+v", f)
	}
	it = claimed(t, st, "released")
	st.Release(context.Background(), []commit.Item{it})
	if f := Finish(context.Background(), st, it, End{Complete: true, Failure: failure}, 3); f.How != HowByHolderReleased || f.Attempt {
		t.Errorf("released by its holder: %+v", f)
	}
	it = claimed(t, st, "by-holder", "late")
	st.Complete(context.Background(), []commit.Item{it})
	if f := Finish(context.Background(), st, it, End{Complete: true, Succeeded: true}, 3); f.How != HowByHolderDone || !f.Unpublished {
		t.Errorf("completed by its holder: %+v", f)
	}
	if _, trouble := f.Trouble(); trouble {
		t.Errorf("a refused publish is trouble: %+v", f)
	}
}
