// Package workcheck checks the outcome of a `lease work` campaign in which
// some workers' whole process trees were killed: the check the multi-client
// tests (internal/multiclient on GlusterFS and CephFS, internal/nfstest on
// NFS) share. The campaigns' work appends "ID TOKEN WORKER" to a log for
// every run; the check compares those runs with the records' final state
// and reads lease fsck's report of what the killed workers left.
package workcheck

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Run is one run of an item's work: a line "ID TOKEN WORKER" of a log.
type Run struct {
	ID     string
	Token  int64
	Worker string
}

func (r Run) String() string { return fmt.Sprintf("%s token %d", r.Worker, r.Token) }

// ParseRuns parses log lines "ID TOKEN WORKER"; a line cut short by a kill
// (not three fields, or no token) is left out.
func ParseRuns(log string) []Run {
	var out []Run
	for _, l := range strings.Split(log, "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		tok, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, Run{f[0], tok, f[2]})
	}
	return out
}

// Record is an item's record as lease status shows it.
type Record struct {
	Status string
	Token  int64
}

// Check fails t unless every item of all is done, once: its record is
// done (recs, by ID) with the token of exactly one run, and every other
// run of it is by a killed worker with a smaller token, at most one item
// per killed worker. It returns how many runs were such earlier runs.
func Check(t testing.TB, all []string, recs map[string]Record, runs []Run, killed map[string]bool) (again int) {
	t.Helper()
	byID := map[string][]Run{}
	for _, r := range runs {
		byID[r.ID] = append(byID[r.ID], r)
	}
	for _, id := range all {
		rec, ok := recs[id]
		if !ok || rec.Status != "done" {
			t.Errorf("%s: status %q (token %d), want done", short(id), rec.Status, rec.Token)
			continue
		}
		var completing, other []Run
		for _, r := range byID[id] {
			if r.Token == rec.Token {
				completing = append(completing, r)
			} else {
				other = append(other, r)
			}
		}
		if len(completing) != 1 {
			t.Errorf("%s: done with token %d, run %d times with that token (runs %v)", short(id), rec.Token, len(completing), byID[id])
		}
		for _, r := range other {
			again++
			if !killed[r.Worker] || r.Token >= rec.Token {
				t.Errorf("%s: an earlier run %v not by a killed worker, or with a token not below the completing %d", short(id), r, rec.Token)
			}
		}
	}
	if again > len(killed) {
		t.Errorf("%d items run again, want at most one per killed worker (%d)", again, len(killed))
	}
	return again
}

// FsckDebris checks the output and exit status of a lease fsck of the
// table: exit 0, or 4 with nothing but what a killed lease run leaves, or
// on a live table what one at work has not finished yet (a temp file of a
// record write cut short, a staging directory of a lost token, the queue
// entry of an item completed and not yet unqueued) of at most maxItems
// items. It returns how many items had such.
func FsckDebris(t testing.TB, when, out string, code, maxItems int) int {
	t.Helper()
	items := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || f[0] != "error" {
			continue
		}
		doneEntry := f[1] == "queue" && strings.Contains(l, "the entry of a done item")
		if (f[1] != "temp" && f[1] != "stale-stage" && !doneEntry) || f[3] != "id" {
			t.Errorf("fsck (%s): %s", when, l)
			continue
		}
		items[f[4]] = true
	}
	if (code != 0 && code != 4) || len(items) > maxItems {
		t.Errorf("fsck (%s): exit %d, want at most the debris of %d items: %s", when, code, maxItems, out)
	}
	return len(items)
}

// PerWorker is "WORKER:RUNS" for each worker of runs, sorted.
func PerWorker(runs []Run) []string {
	n := map[string]int{}
	for _, r := range runs {
		n[r.Worker]++
	}
	var out []string
	for w, c := range n {
		out = append(out, fmt.Sprintf("%s:%d", w, c))
	}
	sort.Strings(out)
	return out
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
