package commands

// lease run --wait [SECONDS] ID: wait for a held item as flock -w and
// consul lock wait, with the backoff of wait.go.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasetool/lease/commit"
)

// claimWaiting claims item for lease run --wait: again and again while it
// is held by another lease (or its record lock is busy), with backoff
// woken when the lease can be taken over or, where inotify is delivered,
// when an item's lease ends on this machine, until it is granted or the
// deadline (zero: none) passes. It returns the last try's results and when
// that try started; an error only when a signal or ctx ended the wait
// (nothing is claimed then). Outcomes that waiting cannot change (done, corrupt, an
// I/O error) end the wait at once.
func claimWaiting(ctx context.Context, e *env, st *commit.Store, item commit.Item, deadline time.Time) ([]commit.Result, time.Time, error) {
	b := newBackoff(ctx, deadline)
	defer b.close()
	said, watched := false, false
	for {
		started := time.Now()
		res := st.Claim(b.Context(), []commit.Item{item}, e.set.Owner, e.set.TTL)
		r := res[0]
		if r.Outcome != commit.Held && r.Outcome != commit.LockTimeout {
			return res, started, nil
		}
		if e.verbose && !said {
			said = true
			bound := "for as long as it takes"
			if !deadline.IsZero() {
				bound = "up to " + formatSeconds(max(0, time.Until(deadline).Seconds()))
			}
			fmt.Fprintf(e.errw, "lease run: %s is held (%s); waiting %s\n", item.ID, r.Detail, bound)
		}
		if !watched {
			// Woken when a holder on this machine lets an item go, where
			// the filesystem tells (worker.Backoff.Watch); a release
			// before the watch was made is not announced: try once more.
			watched = true
			if b.Watch(st) {
				continue
			}
		}
		hint := 0.0
		if r.Outcome == commit.Held && r.Record != nil {
			hint = r.Record.ExpiresAt + st.ClockSkew() // when a claim may take it over
		}
		if !b.wait(hint) {
			if b.stopped() {
				return nil, started, errors.New("interrupted while waiting; nothing was claimed")
			}
			return res, started, nil // the wait ran out: res says why (held)
		}
	}
}
