package commands

import (
	"runtime"
	"testing"
)

// TestMoreProcs: a concurrent batch raises GOMAXPROCS to min(writers,
// 4 × CPUs), nested batches share the raise, the last one puts the old
// value back, and a GOMAXPROCS set by the user is left alone.
func TestMoreProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	want := min(64, 4*runtime.NumCPU())
	done1 := moreProcs(64)
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("GOMAXPROCS during a batch of 64 writers = %d, want %d", got, want)
	}
	done2 := moreProcs(64)
	done1()
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("GOMAXPROCS while a second batch runs = %d, want %d", got, want)
	}
	done2()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS after the batches = %d, want 1", got)
	}
	moreProcs(1)()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS after a one-writer batch = %d, want 1", got)
	}
	t.Setenv("GOMAXPROCS", "1")
	done := moreProcs(64)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS set by the user was changed to %d", got)
	}
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
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS of a worker = %d, want 1", got)
	}
	runtime.GOMAXPROCS(3)
	done := moreProcs(64)
	raised := runtime.GOMAXPROCS(0)
	oneProc()
	if got := runtime.GOMAXPROCS(0); got != raised {
		t.Fatalf("GOMAXPROCS during a batch changed from %d to %d", raised, got)
	}
	done()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS after the batch = %d, want 1", got)
	}
	runtime.GOMAXPROCS(3)
	t.Setenv("GOMAXPROCS", "3")
	oneProc()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("GOMAXPROCS set by the user was changed to %d", got)
	}
}
