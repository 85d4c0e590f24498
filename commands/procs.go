package commands

import (
	"os"
	"runtime"
	"sync"
)

// A batch's writers spend most of their time blocked in fdatasync, rename and
// directory fsync. When one of those returns and every P (GOMAXPROCS) is
// taken, the goroutine waits for the scheduler to hand one over, a futex
// wake-up and a context switch per system call. A concurrent batch
// therefore runs with more Ps than CPUs: min(writers, 4 × CPUs), unless the
// user set GOMAXPROCS. Measured on 2 CPUs, journaled ext4, N=1024, K=16,
// whole-process renew-batch (7 paired runs): GOMAXPROCS 2: 155 ms, 4: 146,
// 8: 134, 16: 146, 64: 170 (bench/results/tuning.md).
var procs struct {
	mu    sync.Mutex
	users int
	saved int
}

// oneProc gives a worker (lease work) one P, unless the user set
// GOMAXPROCS. A worker runs one item at a time and its own work is a few
// system calls an item; its supervisor (internal/proctree) does the same.
// With a P for every CPU, each of N workers on the machine keeps threads
// spinning for work that is not there whenever its goroutines block and
// wake. Measured on 2 CPUs, journaled ext4, 1,000 items of a trivial CMD,
// 8 workers, 5 interleaved runs each: 11.6 CPU ms an item (10.1–12.3) and
// 147 items/s with GOMAXPROCS 2, 9.5 (8.2–10.8) and 173 items/s with 1; at
// 1 worker no difference (docs/performance.md#worker-floor). A batch the
// worker writes still raises it (moreProcs).
func oneProc() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	procs.mu.Lock()
	defer procs.mu.Unlock()
	if procs.users == 0 {
		runtime.GOMAXPROCS(1)
	} else {
		procs.saved = 1
	}
}

// moreProcs raises GOMAXPROCS for a batch of the given writers and returns
// the function that puts it back when the last concurrent batch ends.
func moreProcs(writers int) func() {
	if writers < 2 || os.Getenv("GOMAXPROCS") != "" {
		return func() {}
	}
	want := min(writers, 4*runtime.NumCPU())
	procs.mu.Lock()
	defer procs.mu.Unlock()
	if procs.users == 0 {
		procs.saved = runtime.GOMAXPROCS(0)
		if want > procs.saved {
			runtime.GOMAXPROCS(want)
		}
	}
	procs.users++
	return func() {
		procs.mu.Lock()
		defer procs.mu.Unlock()
		procs.users--
		if procs.users == 0 && runtime.GOMAXPROCS(0) != procs.saved {
			runtime.GOMAXPROCS(procs.saved)
		}
	}
}
