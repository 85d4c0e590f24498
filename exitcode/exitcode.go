// Package exitcode is the exit statuses of the lease command line, in one
// place: their names, the status each outcome of a record operation calls
// for ([Of]), and the one order in which a batch picks the most serious
// ([Worse]). Programs that script lease rely on them (lease(1), EXIT
// STATUS); the command line, the crash exploration of internal/safety and
// fsck's summary use these names instead of numbers.
package exitcode

import (
	"slices"
	"strconv"
	"strings"

	"github.com/leasetool/lease/commit"
)

// The exit statuses of every command but fsck and run.
const (
	// OK: every line (or ID) succeeded.
	OK = 0
	// Negative: a negative answer: a lease was not granted, was lost, or a
	// token was stale.
	Negative = 1
	// Usage: a usage, configuration or input error; nothing was written.
	Usage = 2
	// Corrupt: a corrupt record was met and left alone.
	Corrupt = 3
	// IO: an I/O or durability error; nothing in flight was reported as a
	// success.
	IO = 4
	// LockTimeout: a record lock could not be taken within --lock-timeout.
	LockTimeout = 5
)

// The statuses of lease run itself, as timeout(1) uses them; every other
// status of lease run is its command's.
const (
	// RunEmpty: --next found nothing left to do (every queued item is
	// done), so that `while lease run --next ...; do :; done` ends and the
	// script can tell "finished" from a busy queue or a tool failure.
	RunEmpty = 123
	// RunLost: the lease was lost while the command ran.
	RunLost = 124
	// RunFailed: the lease was not granted, or lease run itself failed
	// (usage, configuration, the table); also its usage errors.
	RunFailed = 125
	// RunCannotRun: the command was found but could not be run.
	RunCannotRun = 126
	// RunNotFound: the command was not found.
	RunNotFound = 127
	// RunSignal is added to the number of the signal that killed the
	// command (137 for SIGKILL), as shells do.
	RunSignal = 128
)

// The statuses of lease fsck, those of fsck(8): a sum of the bits.
const (
	FsckClean       = 0
	FsckCorrected   = 1
	FsckLeft        = 4
	FsckOperational = 8
	FsckUsage       = 16
)

// Of is the exit status outcome o calls for.
func Of(o commit.Outcome) int {
	switch o {
	case commit.OK:
		return OK
	case commit.Corrupt:
		return Corrupt
	case commit.LockTimeout:
		return LockTimeout
	case commit.IOError:
		return IO
	}
	return Negative
}

// standsFor is, for each status Of returns, an outcome that calls for it:
// the statuses are ordered as their outcomes are (commit.Outcome.Graver),
// so that a batch's status and the engine's pick of the worst outcome
// never disagree.
var standsFor = map[int]commit.Outcome{
	OK:          commit.OK,
	Negative:    commit.StaleToken,
	LockTimeout: commit.LockTimeout,
	Corrupt:     commit.Corrupt,
	IO:          commit.IOError,
}

// Worse returns the more serious of two exit statuses: a batch exits with
// the most serious outcome it met, 4 over 3 over 5 over 1 over 0 (see
// Order), and a usage error (or any other status) over all of them.
func Worse(a, b int) int {
	oa, aOrdered := standsFor[a]
	ob, bOrdered := standsFor[b]
	switch {
	case !aOrdered:
		return a
	case !bOrdered, ob.Graver(oa):
		return b
	}
	return a
}

// Order is the severity order of the statuses of outcomes, most serious
// first, as the manual says it: "4 over 3 over 5 over 1 over 0".
func Order() string {
	codes := make([]int, 0, len(standsFor))
	for c := range standsFor {
		codes = append(codes, c)
	}
	slices.SortFunc(codes, func(a, b int) int {
		switch {
		case a == b:
			return 0
		case Worse(a, b) == a:
			return -1
		}
		return 1
	})
	words := make([]string, len(codes))
	for i, c := range codes {
		words[i] = strconv.Itoa(c)
	}
	return strings.Join(words, " over ")
}
