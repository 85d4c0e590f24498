package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// campaignResult is what `queuebench campaign` measured.
type campaignResult struct {
	Mode    string `json:"mode"`
	Items   int    `json:"items"`
	Workers int    `json:"workers"`
	// Done is how many items were done when it ended (all, unless the
	// timeout stopped it).
	Done      int     `json:"done"`
	Seconds   float64 `json:"seconds"`
	ItemsPerS float64 `json:"items_per_s"`
	// Deciles are items/s over each tenth of the items (those reached).
	Deciles  []float64 `json:"deciles_items_per_s"`
	TimedOut bool      `json:"timed_out"`
}

// campaignTimeout bounds one campaign (the claim --first workers get slower
// as the campaign goes: at 10^5 items they may not finish).
var campaignTimeout = 20 * time.Minute

func campaign(o opts) (campaignResult, error) {
	r := campaignResult{Mode: o.mode, Items: o.items, Workers: o.workers}
	if s := os.Getenv("QUEUEBENCH_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return r, err
		}
		campaignTimeout = d
	}
	root := filepath.Join(o.dir, "table")
	ids := filepath.Join(o.dir, "todo")
	if err := writeIDs(ids, 0, o.items); err != nil {
		return r, err
	}
	var progress func() (int, error)
	var worker func(i int) *exec.Cmd
	switch o.mode {
	case "next", "first":
		if p, err := run("", o.lease, "init", "--root", root, "--shards", strconv.Itoa(o.shards)); err != nil || p.code != 0 {
			return r, fmt.Errorf("lease init: %v %s", err, p.errOut)
		}
		// Both kinds of workers complete through lease run --complete,
		// which removes the item's queue entry: the entries left are the
		// items not done, for both.
		if p, err := run(ids, o.lease, "add", "--root", root); err != nil || p.code != 0 {
			return r, fmt.Errorf("lease add: %v %s", err, p.errOut)
		}
		progress = func() (int, error) { n, err := countEntries(filepath.Join(root, "queue")); return o.items - n, err }
		script := `while :; do "$LEASE" run --next --wait --complete -- true; rc=$?
  [ $rc -eq 123 ] && exit 0; [ $rc -eq 0 ] || exit $rc; done`
		if o.mode == "first" {
			script = `while held=$("$LEASE" claim --first 1 - < "$TODO" 2>/dev/null); do
  set -- $held; "$LEASE" run --token "$2" --complete "$1" -- true || exit; done`
		}
		worker = func(i int) *exec.Cmd {
			c := exec.Command("bash", "-c", script)
			c.Env = append(os.Environ(), "LEASE="+o.lease, "LEASE_ROOT="+root, "TODO="+ids, fmt.Sprintf("LEASE_OWNER=w%d", i))
			return c
		}
	case "parallel":
		db := filepath.Join(o.dir, "q.sqlite")
		url := "sqlite3:///" + strings.ReplaceAll(db, "/", "%2F") + "/tab"
		if out, err := exec.Command("parallel", "--sqlmaster", url, "true", "::::", ids).CombinedOutput(); err != nil {
			return r, fmt.Errorf("parallel --sqlmaster: %v %s", err, out)
		}
		progress = func() (int, error) {
			out, err := exec.Command("sqlite3", db, "select count(*) from tab where Exitval != -1000;").Output()
			if err != nil {
				return 0, err
			}
			return strconv.Atoi(strings.TrimSpace(string(out)))
		}
		worker = func(i int) *exec.Cmd { return exec.Command("parallel", "--sqlworker", url, "-j1") }
	default:
		return r, fmt.Errorf("--mode %q: want next, first or parallel", o.mode)
	}
	start := time.Now()
	cmds := make([]*exec.Cmd, o.workers)
	errs := make(chan error, o.workers)
	for i := range cmds {
		cmds[i] = worker(i)
		var out limited
		cmds[i].Stdout, cmds[i].Stderr = &out, &out
		if err := cmds[i].Start(); err != nil {
			return r, err
		}
		go func(c *exec.Cmd) {
			err := c.Wait()
			if err != nil {
				err = fmt.Errorf("%v: %s", err, out.b)
			}
			errs <- err
		}(cmds[i])
	}
	// Sample progress; the time each tenth of the items was reached is
	// interpolated between the samples around it.
	type sample struct {
		t time.Duration
		n int
	}
	samples := []sample{{0, 0}}
	finished := 0
	var firstErr error
	for finished < o.workers {
		select {
		case err := <-errs:
			finished++
			if err != nil && firstErr == nil {
				firstErr = err
			}
			continue
		case <-time.After(500 * time.Millisecond):
		}
		n, err := progress()
		if err != nil {
			continue
		}
		samples = append(samples, sample{time.Since(start), n})
		r.Done = n
		if time.Since(start) > campaignTimeout {
			r.TimedOut = true
			for _, c := range cmds {
				c.Process.Kill()
			}
		}
	}
	if n, err := progress(); err == nil {
		r.Done = n
		samples = append(samples, sample{time.Since(start), n})
	}
	r.Seconds = time.Since(start).Seconds()
	r.ItemsPerS = float64(r.Done) / r.Seconds
	at := func(m float64) (float64, bool) { // when m items were done
		for i := 1; i < len(samples); i++ {
			a, b := samples[i-1], samples[i]
			if float64(b.n) >= m && b.n > a.n {
				f := (m - float64(a.n)) / float64(b.n-a.n)
				return (a.t + time.Duration(f*float64(b.t-a.t))).Seconds(), true
			}
		}
		return 0, false
	}
	prev := 0.0
	for k := 1; k <= 10; k++ {
		t, ok := at(float64(k) * float64(o.items) / 10)
		if !ok {
			break
		}
		r.Deciles = append(r.Deciles, float64(o.items)/10/(t-prev))
		prev = t
	}
	if firstErr != nil && !r.TimedOut {
		return r, firstErr
	}
	return r, nil
}

// countEntries counts the names in the shard directories below dir.
func countEntries(dir string) (int, error) {
	shards, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range shards {
		f, err := os.Open(filepath.Join(dir, s.Name()))
		if err != nil {
			return 0, err
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return 0, err
		}
		n += len(names)
	}
	return n, nil
}
