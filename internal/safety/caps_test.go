package safety

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
)

// TestCrashFSsHaveEveryCapability: Recorder and Mem have every method the
// kernel FS has beyond seam.FS (its optional capabilities: bounded
// directory reads, lock preparation, refresh, dropping idle locks, syncfs,
// sharing modes, permission fixing, Close), with the same signatures, so
// that the crash exploration takes the paths the engine takes on the
// kernel FS rather than the fallbacks of an FS without them.
func TestCrashFSsHaveEveryCapability(t *testing.T) {
	osfs, err := seam.OS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer osfs.Close()
	fsMethods := map[string]bool{}
	fsType := reflect.TypeOf((*seam.FS)(nil)).Elem()
	for i := range fsType.NumMethod() {
		fsMethods[fsType.Method(i).Name] = true
	}
	signature := func(m reflect.Method) string {
		var in, out []string
		for i := 1; i < m.Type.NumIn(); i++ { // without the receiver
			in = append(in, m.Type.In(i).String())
		}
		for i := range m.Type.NumOut() {
			out = append(out, m.Type.Out(i).String())
		}
		return "(" + strings.Join(in, ", ") + ") (" + strings.Join(out, ", ") + ")"
	}
	want := reflect.TypeOf(osfs)
	n := 0
	for _, fsys := range []any{NewRecorder(nil), NewMem()} {
		got := reflect.TypeOf(fsys)
		for i := range want.NumMethod() {
			m := want.Method(i)
			if fsMethods[m.Name] {
				continue
			}
			n++
			g, ok := got.MethodByName(m.Name)
			if !ok {
				t.Errorf("%v lacks %s%s, which the kernel FS has", got, m.Name, signature(m))
				continue
			}
			if signature(g) != signature(m) {
				t.Errorf("%v.%s%s, the kernel FS's is %s", got, m.Name, signature(g), signature(m))
			}
		}
	}
	if n == 0 {
		t.Fatal("the kernel FS has no method beyond seam.FS: the test checks nothing")
	}
}

// TestRecorderTakesTheKernelPaths: a batch over the Recorder prepares its
// shards' lock files before it writes (the kernel FS's path, seam's
// LockPreparer), as the call log shows.
func TestRecorderTakesTheKernelPaths(t *testing.T) {
	rec := NewRecorder(nil)
	st, err := commit.Open(Root, commit.Options{FS: rec, Create: workTable()})
	if err != nil {
		t.Fatal(err)
	}
	before := rec.NumCalls()
	for _, r := range st.At(Now).Claim(context.Background(), items(0, 1, 2, 3), "carol", TTL) {
		if r.Outcome != commit.OK {
			t.Fatalf("claim %s: %s %s", r.ID.Short(), r.Outcome.Reason(), r.Detail)
		}
	}
	prepared, first := 0, -1
	for i, c := range rec.Calls()[before:] {
		if c.Op == seam.OpPrepareLock {
			prepared++
		}
		if c.Op == seam.OpLock && first < 0 {
			first = i
		}
		if c.Op == seam.OpPrepareLock && first >= 0 {
			t.Errorf("call %d prepares a lock file after the first lock (call %d)", i, first)
		}
	}
	if prepared == 0 {
		t.Errorf("no lock file was prepared: the batch took the path of an FS without LockPreparer")
	}
}
