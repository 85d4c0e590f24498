// Package slack gives a long-running worker's own threads a coarse timer
// slack (prctl(2), PR_SET_TIMERSLACK) and its children the slack it was
// started with.
//
// Why: a worker's item is a handful of blocking system calls (the record
// syncs, the wait for CMD). Each one wakes the Go runtime's monitor thread
// (sysmon), which then polls every 20 µs until the process is idle again,
// and hands the blocked thread's P to another thread. With the kernel's
// default slack of 50 µs that was 11 nanosleeps, 19 futex calls and 31
// context switches an item, a fifth of lease work's CPU (perf at 1 worker
// of trivial items, docs/performance.md#timer-slack). A slack of Worker
// lets the kernel round those polls up: 12 context switches an item, and
// against the build before it 0.75-0.80 of the CPU and 1.05-1.23 of the
// items/s at 1 to 8 workers.
//
// What it costs: a timed wait of lease work (a lock poll, a backoff, a
// kill's grace) may end up to Worker late. Nothing of the worker waits
// for a time that short to mean anything: renewals and grace periods are
// seconds, and CMD's exit and signals are events, not timers. CMD, and
// whatever it starts, gets the slack lease work was started with.
//
// How: the monitor thread is the runtime's first and is made before any
// of lease's code runs, and a thread's slack is its creator's. So Raise
// sets the slack on its thread and executes the same program again (the
// path it was started by, when that still holds the running file, so that
// its name stays; the same arguments): every thread of the new process
// inherits it. The slack it replaced is passed on in the environment
// (Env), so the new process does not raise it again, the processes lease
// starts (its supervisor) keep it, and Child puts it back for CMD.
package slack

import "time"

// Worker is the timer slack of a raised process's threads.
const Worker = 4 * time.Millisecond

// Env names the environment variable that holds, in nanoseconds, the slack
// a raised process replaced: the slack its children get. Its presence
// says the process (or its parent) has raised it already; a user sets it
// to 0 to keep lease work's slack as started.
const Env = "LEASE_CMD_TIMERSLACK"
