package commands

import (
	"runtime"
	"testing"
)

// wantProcs fails t unless GOMAXPROCS is want at the moment named by when.
func wantProcs(t *testing.T, want int, when string) {
	t.Helper()
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("GOMAXPROCS %s = %d, want %d", when, got, want)
	}
}

// TestMoreProcs: a concurrent batch raises GOMAXPROCS to min(writers,
// 4 × CPUs), nested batches share the raise, the last one puts the old
// value back, and a GOMAXPROCS set by the user is left alone.
func TestMoreProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	want := min(64, 4*runtime.NumCPU())
	done1 := moreProcs(64)
	wantProcs(t, want, "during a batch of 64 writers")
	done2 := moreProcs(64)
	done1()
	wantProcs(t, want, "while a second batch runs")
	done2()
	wantProcs(t, 1, "after the batches")
	moreProcs(1)()
	wantProcs(t, 1, "after a one-writer batch")
	t.Setenv("GOMAXPROCS", "1")
	done := moreProcs(64)
	wantProcs(t, 1, "set by the user, during a batch")
	done()
}

// TestOneProc: a worker gets one P, a batch in flight keeps its raise and
// puts back one P when it ends, and a GOMAXPROCS set by the user is left
// alone.
func TestOneProc(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	old := runtime.GOMAXPROCS(3)
	defer runtime.GOMAXPROCS(old)
	oneProc()
	wantProcs(t, 1, "of a worker")
	runtime.GOMAXPROCS(3)
	done := moreProcs(64)
	raised := runtime.GOMAXPROCS(0)
	oneProc()
	wantProcs(t, raised, "during a batch, after oneProc")
	done()
	wantProcs(t, 1, "after the batch")
	runtime.GOMAXPROCS(3)
	t.Setenv("GOMAXPROCS", "3")
	oneProc()
	wantProcs(t, 3, "set by the user, after oneProc")
}
