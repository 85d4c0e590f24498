package commands_test

// lease status --watch: through a real campaign of lease work processes
// (--json, --until-done), as lines when stdout is no terminal, as a screen
// redrawn in place on a pseudo-terminal, stopped by signals, and its bad
// flags refused. The helpers of real processes are in run_test.go.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/leasefmt"
)

// watchObject is one object of status --watch --json (and of status
// --summary --json, which has the census fields too).
type watchObject struct {
	Queued, Free, Records, Leased, Expired, Committing, Released int64
	Done, Failed, Attempts, Retried, Corrupt                     int64
	Owners                                                       map[string]int64   `json:"owners"`
	OwnerRenewed                                                 map[string]float64 `json:"owner_renewed"`
	MostFailed                                                   []struct {
		ID       string `json:"id"`
		Attempts int64  `json:"attempts"`
		State    string `json:"state"`
	} `json:"most_failed"`
	Now       float64  `json:"now"`
	DurationS float64  `json:"duration_s"`
	Refresh   int      `json:"refresh"`
	Left      *int64   `json:"left"`
	Rate1m    *float64 `json:"rate_1m"`
	Rate5m    *float64 `json:"rate_5m"`
	ETAS      *float64 `json:"eta_s"`
}

// counts is what a summary and the last object of a finished watch must
// agree on.
func (o watchObject) counts() string {
	return fmt.Sprintf("queued=%d free=%d records=%d leased=%d expired=%d committing=%d released=%d done=%d failed=%d attempts=%d retried=%d corrupt=%d most_failed=%v",
		o.Queued, o.Free, o.Records, o.Leased, o.Expired, o.Committing, o.Released, o.Done, o.Failed, o.Attempts, o.Retried, o.Corrupt, o.MostFailed)
}

func watchObjects(t *testing.T, out string) []watchObject {
	t.Helper()
	var objs []watchObject
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var o watchObject
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("status --watch --json line %q: %v", l, err)
		}
		objs = append(objs, o)
	}
	return objs
}

// watchIDs are n item IDs, one per line, for lease add.
func watchIDs(name string, n int) []leasefmt.ID {
	ids := make([]leasefmt.ID, n)
	for i := range ids {
		ids[i] = holdID(fmt.Sprintf("%s-%d", name, i))
	}
	return ids
}

// TestStatusWatchCampaign: 200 items, 3 lease work workers (6 items fail
// every run, 3 times: failed), and a watch beside them until the campaign
// is over. Its stream never counts fewer finished items than before, it
// saw a rate, owners with their renewals and the failing items with their
// attempts, and its last object is the summary taken after.
func TestStatusWatchCampaign(t *testing.T) {
	t.Parallel()
	h := newHoldTable(t)
	ids := watchIDs("campaign", 200)
	failing := map[string]bool{}
	var cases []string
	for _, id := range ids[:6] {
		failing[string(id)] = true
		cases = append(cases, string(id))
	}
	h.must(0, coreJoin(ids, ""), "add")
	watch := h.start("status", "--watch", "--json", "--interval", "200ms", "--until-done")
	select {
	case <-watch.lines: // the first count, before any worker
	case <-time.After(holdWait):
		t.Fatalf("no first count within %v", holdWait)
	}
	script := `case "$LEASE_ID" in ` + strings.Join(cases, "|") + `) exit 3;; esac; sleep 0.05`
	var workers []*exec.Cmd
	for i := range 3 {
		w := h.command("work", "--owner", fmt.Sprintf("worker-%d", i), "--max-attempts", "3", "--ttl", "30", "--", "sh", "-c", script)
		var errb bytes.Buffer
		w.Stderr = &syncWriter{w: &errb}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
	}
	for _, w := range workers {
		if code := holdExit(t, w); code != 0 {
			t.Errorf("%s: exit %d, want 0 (the queue is empty)", strings.Join(w.Args, " "), code)
		}
	}
	if code := watch.wait(); code != 0 {
		t.Fatalf("status --watch --until-done: exit %d, want 0\n%s%s", code, watch.out, watch.errOut)
	}
	objs := watchObjects(t, watch.out.String())
	if len(objs) < 2 {
		t.Fatalf("%d counts, want the first one and the last at least", len(objs))
	}
	var sawRate, sawOwners bool
	var prev watchObject
	for i, o := range objs {
		if o.Refresh != i+1 {
			t.Errorf("count %d has refresh %d", i+1, o.Refresh)
		}
		// Not a timing assertion but the load bound: a count starts 200 ms
		// after the start of the one before at the soonest, however fast
		// the counts are (now is the clock a count started at; 10 ms for
		// the wall clock against the monotonic one the watch waits by).
		if i > 0 && o.Now-prev.Now < 0.2-0.01 {
			t.Errorf("count %d started %.3fs after count %d: more than one count per interval", i+1, o.Now-prev.Now, i)
		}
		if o.Done < prev.Done || o.Done+o.Failed < prev.Done+prev.Failed {
			t.Errorf("count %d: done %d failed %d after done %d failed %d: finished items never go back", i+1, o.Done, o.Failed, prev.Done, prev.Failed)
		}
		if o.Left == nil || *o.Left != o.Free+o.Leased+o.Expired+o.Committing+o.Released {
			t.Errorf("count %d: left %v, want the items neither done nor failed", i+1, o.Left)
		}
		if o.Rate1m != nil && *o.Rate1m > 0 {
			sawRate = true
			if o.ETAS == nil || *o.ETAS < 0 {
				t.Errorf("count %d: rate %g and eta_s %v", i+1, *o.Rate1m, o.ETAS)
			}
		}
		for owner, n := range o.Owners {
			sawOwners = true
			at, ok := o.OwnerRenewed[owner]
			// A lease claimed while the count ran is renewed after its start.
			if n <= 0 || !ok || at > o.Now+o.DurationS || at < o.Now-30 {
				t.Errorf("count %d: owner %q with %d live leases renewed at %v (count from %g for %gs, ttl 30)", i+1, owner, n, o.OwnerRenewed[owner], o.Now, o.DurationS)
			}
			if !strings.HasPrefix(owner, "worker-") {
				t.Errorf("count %d: owner %q", i+1, owner)
			}
		}
		prev = o
	}
	if !sawRate {
		t.Errorf("no count showed a rate above 0")
	}
	if !sawOwners {
		t.Errorf("no count showed an owner with live leases")
	}
	last := objs[len(objs)-1]
	if last.Done != 194 || last.Failed != 6 || last.Queued != 0 || *last.Left != 0 || last.ETAS == nil || *last.ETAS != 0 {
		t.Errorf("last count: %s, want 194 done, 6 failed, nothing left", last.counts())
	}
	var got []string
	for _, it := range last.MostFailed {
		got = append(got, fmt.Sprintf("%s %d %s", it.ID, it.Attempts, it.State))
	}
	var want []string
	for _, id := range cases {
		want = append(want, id+" 3 failed")
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("most failed:\n%s\nwant the failing items, 3 attempts each:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	final := watchObjects(t, h.must(0, "", "status", "--summary", "--json").out)[0]
	if last.counts() != final.counts() {
		t.Errorf("the last count of the watch\n%s\nand the summary after\n%s", last.counts(), final.counts())
	}
}

// watchTable is a small table with something in every list: 3 items
// failed by lease work (one attempt each), one leased by alice, 4 free.
func watchTable(t *testing.T) *holdTable {
	h := newHoldTable(t)
	ids := watchIDs("small", 8)
	h.must(0, coreJoin(ids, ""), "add")
	h.must(0, "", "work", "--max-items", "3", "--max-attempts", "1", "--", "sh", "-c", "exit 3")
	h.must(0, "", "claim", "--owner", "alice", "--ttl", "600", "--next", "1")
	return h
}

// TestStatusWatchLines: with stdout a pipe, one plain line per count,
// with the counts, the rate and the ETA; --count stops it.
func TestStatusWatchLines(t *testing.T) {
	t.Parallel()
	h := watchTable(t)
	r := h.must(0, "", "status", "--watch", "--count", "3", "--interval", "50ms")
	lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (--count 3)\n%s", len(lines), r.out)
	}
	re := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ queued=5 free=4 leased=1 expired=0 committing=0 released=0 done=0 failed=3 corrupt=0 left=5 rate_1m=(\S+) rate_5m=\S+ eta=(\S+) owners=1 census=\d+\.\d{3}s$`)
	for i, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %d: %q", i+1, l)
		}
		if i == 0 && (m[1] != "-" || m[2] != "-") {
			t.Errorf("first line %q: want no rate nor ETA before a second count", l)
		}
		if i > 0 && (m[1] != "0.00/s" || m[2] != "-") {
			t.Errorf("line %d %q: nothing finishes: want rate 0.00/s and ETA -", i+1, l)
		}
	}
	if strings.Contains(r.out, "\x1b") {
		t.Errorf("escapes in the lines of a pipe: %q", r.out)
	}
	// The flag alone implies --summary; --summary --watch is the same.
	if n := strings.Count(h.must(0, "", "status", "--summary", "-w", "--count", "1").out, "\n"); n != 1 {
		t.Errorf("status --summary -w --count 1: %d lines", n)
	}
}

// TestStatusWatchStopsOnSignal: SIGTERM or SIGINT between counts ends the
// watch with exit 0 after a whole line, as renew-batch --watch ends.
func TestStatusWatchStopsOnSignal(t *testing.T) {
	t.Parallel()
	h := watchTable(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		p := h.start("status", "--watch", "--interval", "100ms")
		p.skip(2)
		p.cmd.Process.Signal(sig)
		if code := p.wait(); code != 0 {
			t.Errorf("%v: exit %d, want 0\n%s", sig, code, p.errOut)
		}
		if out := p.out.String(); !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") < 2 || p.errOut.Len() != 0 {
			t.Errorf("%v: stdout %q stderr %q", sig, out, p.errOut)
		}
	}
}

// TestStatusWatchTerminal: on a pseudo-terminal the screen is drawn from
// the top left corner again at every count and cleared below, with the
// states, the rate, the ETA, the owners and the items that failed most;
// SIGINT leaves the last screen and gives the cursor back, exit 0.
func TestStatusWatchTerminal(t *testing.T) {
	t.Parallel()
	h := watchTable(t)
	cmd := h.command("status", "--watch", "--interval", "100ms")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 132})
	if err != nil {
		testenv.Missing(t, "pty", fmt.Sprintf("no pseudo-terminal: %v", err))
	}
	defer tty.Close()
	t.Cleanup(func() { cmd.Process.Kill() })
	var out bytes.Buffer
	read := make(chan error, 1)
	frames := make(chan struct{}, 100)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			out.Write(buf[:n]) // only this goroutine writes out until read is sent
			for range bytes.Count(buf[:n], []byte("\x1b[J")) {
				frames <- struct{}{}
			}
			if err != nil {
				read <- err
				return
			}
		}
	}()
	for range 3 {
		select {
		case <-frames:
		case <-time.After(holdWait):
			t.Fatalf("no screen within %v", holdWait)
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	if code := holdExit(t, cmd); code != 0 {
		t.Errorf("SIGINT: exit %d, want 0", code)
	}
	select {
	case err := <-read: // EIO once the last holder of the terminal is gone
		if !errors.Is(err, syscall.EIO) && !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
			t.Errorf("reading the terminal: %v", err)
		}
	case <-time.After(holdWait):
		t.Fatalf("the terminal did not close within %v", holdWait)
	}
	s := out.String()
	if !strings.HasPrefix(s, "\x1b[?25l\x1b[H\x1b[2J") || !strings.HasSuffix(s, "\x1b[J\x1b[?25h\r\n") {
		t.Errorf("the screen does not start cleared and end with the cursor back: %q ... %q", s[:min(len(s), 40)], s[max(0, len(s)-40):])
	}
	screens := strings.Split(s, "\x1b[H")
	if len(screens) < 4 { // what comes before the first, then at least 3
		t.Fatalf("%d screens, want 3 at least:\n%q", len(screens)-1, s)
	}
	last := regexp.MustCompile("\x1b\\[[0-9;?]*[A-Za-z]").ReplaceAllString(screens[len(screens)-1], "")
	for _, want := range []string{
		"lease status --watch, every 100ms: " + h.root,
		"\r\nqueued              5  ", "\r\nfree                4  ", "\r\nleased              1  ", "\r\nfailed              3  ", "\r\ncorrupt             0",
		"\r\nrate        0.00/s over ", "\r\nETA         - for 5 items left",
		"\r\nOWNERS (1)       LIVE  RENEWED        OWNER\r\n", " ago ", "\"alice\"\r\n",
		"\r\nMOST FAILED      RUNS  STATE          ID\r\n",
	} {
		if !strings.Contains(last, want) {
			t.Errorf("the last screen has no %q:\n%s", want, last)
		}
	}
	if n := strings.Count(last, "        1  failed         "); n != 3 {
		t.Errorf("the last screen lists %d failed items, want 3:\n%s", n, last)
	}
}

// TestStatusWatchRefused: bad --interval, --count and combinations are
// usage errors (exit 2) and print nothing on stdout.
func TestStatusWatchRefused(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	for _, args := range [][]string{
		{"--watch", "--interval", "0"},
		{"--watch", "--interval", "0s"},
		{"--watch", "--interval", "-1s"},
		{"--watch", "--interval", "-2"},
		{"--watch", "--interval", "NaN"},
		{"--watch", "--interval", "Inf"},
		{"--watch", "--interval", "soon"},
		{"--watch", "--interval", "1e300"},
		{"--watch", "--interval", "25h"},
		{"--watch", "--interval", ""},
		{"--watch", "--count", "0"},
		{"--watch", "--count", "-1"},
		{"--watch", "--count", "many"},
		{"--interval", "1s"},
		{"--summary", "--count", "1"},
		{"--until-done"},
		{"--watch", "-o", "prometheus"},
		{"--watch", "--now", "1000"},
		{"--watch", "--live"},
		{"--watch", string(coreID("x"))},
	} {
		r := coreLease(t, "", append([]string{"status", "--root", root}, args...)...)
		if r.code != 2 || r.out != "" || !strings.Contains(r.errOut, "lease status") {
			t.Errorf("status %s: %s\nwant exit 2, nothing on stdout", strings.Join(args, " "), r)
		}
	}
}
