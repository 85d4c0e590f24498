package commands

// Waiting to be granted, as flock -w and consul lock wait: lease run
// --wait [SECONDS] tries the claim again, with capped exponential backoff
// and jitter, while the item is held by someone else, until it is granted
// or the wait runs out (exit 125, not granted). waitFor is the loop, for
// every command that waits for a grant.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// Backoff of waitFor: the first retry after waitFirst, each later one
// after twice the one before, at most waitCap, each scaled by a random
// factor in [0.5, 1) so that waiters that started together spread out.
const (
	waitFirst = 50 * time.Millisecond
	waitCap   = time.Second
)

// errWaitTimedOut is what waitFor returns when the deadline passed.
var errWaitTimedOut = errors.New("wait timed out")

// waitFor calls try until it reports done or fails, sleeping between
// calls with capped exponential backoff plus jitter. It returns try's
// error; errWaitTimedOut once deadline has passed (try is called once
// more at the deadline itself); ctx's error when ctx ends first. A zero
// deadline waits for as long as ctx lasts.
func waitFor(ctx context.Context, deadline time.Time, try func() (done bool, err error)) error {
	backoff := waitFirst
	for {
		done, err := try()
		if err != nil || done {
			return err
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return errWaitTimedOut
		}
		d := time.Duration(float64(backoff) * (0.5 + rand.Float64()/2))
		if !deadline.IsZero() {
			d = min(d, time.Until(deadline))
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, waitCap)
	}
}

// optionalValues are the flags whose value may be left out (`--wait` for
// `--wait forever`), with the value they then take.
var optionalValues = map[string]string{"wait": "forever"}

// fillOptionalValues gives a flag of optionalValues that is written
// without a value its implied one: `lease run --wait ID -- CMD` becomes
// `lease run --wait=forever ID -- CMD`, while `--wait 30` keeps its 30.
// Only the flags before the command's first argument are looked at, as
// only those are flags.
func fillOptionalValues(args []string, valued func(name string) bool) []string {
	out := append([]string(nil), args...)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if implied, ok := optionalValues[name]; ok && !hasValue {
			if i+1 < len(out) && isWaitValue(out[i+1]) {
				i++
				continue
			}
			out[i] = a + "=" + implied
			continue
		}
		if !hasValue && valued(name) {
			i++ // the flag's value
		}
	}
	return out
}

// isWaitValue reports whether s is a value of --wait: a number of seconds
// or "forever"; a word that is also an ID (64 hex digits may all be
// digits) is the command's argument.
func isWaitValue(s string) bool {
	if s == "forever" {
		return true
	}
	if _, err := leasefmt.ParseID(s); err == nil {
		return false
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// parseWait reads the value of --wait: seconds (finite, >= 0) or forever
// (math.Inf(1)).
func parseWait(s string) (float64, error) {
	if s == "forever" {
		return math.Inf(1), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("--wait %s: want seconds (a finite number >= 0) or nothing (wait for as long as it takes)", leasefmt.Quote(s))
	}
	return f, nil
}

// waitDeadline is the deadline of a wait of s seconds from now; zero for
// forever.
func waitDeadline(s float64) time.Time {
	if math.IsInf(s, 1) {
		return time.Time{}
	}
	return time.Now().Add(seconds(s))
}

// claimWaiting claims item for lease run --wait: again and again while it
// is held by another lease (or its record lock is busy), until it is
// granted or wait seconds (math.Inf(1): no bound) have passed. It returns
// the last try's results and when that try started; an error only when
// the wait was interrupted (SIGINT, SIGTERM, SIGHUP: nothing is claimed).
// Outcomes that waiting cannot change (done, corrupt, an I/O error) end
// the wait at once.
func claimWaiting(e *env, st *commit.Store, item commit.Item, wait float64) ([]commit.Result, time.Time, error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	var res []commit.Result
	var started time.Time
	said := false
	err := waitFor(ctx, waitDeadline(wait), func() (bool, error) {
		started = time.Now()
		res = st.Claim([]commit.Item{item}, e.set.Owner, e.set.TTL)
		switch r := res[0]; r.Outcome {
		case commit.Held, commit.LockTimeout:
			if e.verbose && !said {
				said = true
				bound := "for as long as it takes"
				if !math.IsInf(wait, 1) {
					bound = "up to " + formatSeconds(wait)
				}
				fmt.Fprintf(e.errw, "lease run: %s is held (%s); waiting %s\n", item.ID, r.Detail, bound)
			}
			return false, nil
		}
		return true, nil
	})
	switch {
	case errors.Is(err, errWaitTimedOut):
		return res, started, nil // res says why: held
	case err != nil:
		return nil, started, fmt.Errorf("interrupted while waiting (%v); nothing was claimed", context.Cause(ctx))
	}
	return res, started, nil
}
