package commands

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// Stopping renew-batch --watch the way jobs are stopped. A batch system
// does not wait for a round to end: mpirun, sent SIGTERM (by kill, by
// scancel, by Slurm at the time limit, which signals every process of the
// job), sends SIGTERM to its ranks and SIGKILL one second later
// (odls_base_sigkill_timeout), and a round may take longer. So rank 0
// reports as soon as a signal reaches it, from what it knows without
// asking the other ranks: the leases of the last round (before the first
// round ended, those of the input), each checked once more as lease verify
// does, which needs no collective. The round in progress then ends and the
// ranks agree to stop as before; whatever kills them after the report
// loses nothing. With --output the held set is also written after every
// round that changed it (replaceFile: never half a line), so even SIGKILL
// leaves the held set of the last round.

// stopOnSignal starts rank 0's reaction to the watch's signals: the first
// one on sigc makes the final report at once (finishOnce) and is then
// passed on to the returned channel, for the rounds' ticker. done stops the
// reaction, waiting for a report in progress.
func (w *watcher) stopOnSignal(sigc <-chan os.Signal) (ticks <-chan os.Signal, done func()) {
	out := make(chan os.Signal, 1)
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case s := <-sigc:
			w.finishOnce(s, w.statsNow())
			out <- s
		case <-quit:
		}
	}()
	return out, func() {
		close(quit)
		<-exited
	}
}

// statsNow is the statistics of the last round, over the time so far.
func (w *watcher) statsNow() commit.Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	snap := w.stats
	if w.rounds == 0 {
		snap = w.st.Stats().Snapshot(0)
	}
	snap.DurationS = time.Since(w.e.started).Seconds()
	return snap
}

// finishOnce makes the final report (finish) unless it was made: by a
// signal, or at the end of the loop.
func (w *watcher) finishOnce(stopped os.Signal, snap commit.Snapshot) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.finished {
		w.finished = true
		w.reported = w.finish(stopped, snap)
	}
	return w.reported
}

// nothingLeft reports whether, with stdin as the only input, every lease
// is lost: the watch then stops by itself.
func (w *watcher) nothingLeft() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stdinOnly && w.rounds > 0 && len(w.order) == 0
}

// writeRound writes the held set of a round to --output when it changed.
// A failed write is reported once per error and retried the next round:
// renewing matters more.
func (w *watcher) writeRound(held []commit.Item) {
	if w.output == "" || w.written != nil && slices.Equal(held, w.written) {
		return
	}
	var b bytes.Buffer
	for _, it := range held {
		fmt.Fprintf(&b, "%s %d\n", it.ID, it.Token)
	}
	if err := replaceFile(w.output, b.Bytes()); err != nil {
		w.warnOnce("output "+err.Error(), leasefmt.Bound(fmt.Sprintf("lease renew-batch: --output %s: %v (will retry)", w.output, err)))
		return
	}
	w.written = append(make([]commit.Item, 0, len(held)), held...)
}
