package commands

// One item held while CMD runs: what lease run and lease work share once
// a claim granted the lease (its staging directory and input, CMD under
// the keeper, the finish).

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/internal/proctree"
	"github.com/leasetool/lease/internal/worker"
	"github.com/leasetool/lease/keepalive"
	"github.com/leasetool/lease/leasefmt"
)

// itemSpec is how to run CMD for an item.
type itemSpec struct {
	who      string // "lease run" or "lease work"
	path     string // CMD's executable, resolved
	argv     []string
	complete bool
	// chatty: -v says what happens to the lease as it happens (lease run;
	// lease work says one line per item instead).
	chatty bool
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	sigc   <-chan os.Signal // signals to forward to CMD
	// stop, when done, stops CMD (lease work told to stop: see
	// holder.stop); nil for lease run.
	stop context.Context
	// sup runs CMD (lease work: one supervisor for all items); nil starts
	// a supervisor for this CMD alone.
	sup *proctree.Supervisor
}

// itemRun is how one item went.
type itemRun struct {
	h      *holder
	code   int // lease run's exit status for it
	status childStatus
}

// newHolder is the holder of the lease held (its staging directory and
// input made: worker.Prepare) while CMD runs as spec says.
func newHolder(e *env, st *commit.Store, spec itemSpec, held worker.Held) *holder {
	h := &holder{e: e, st: st, who: spec.who, item: held.Item, argv: spec.argv, complete: spec.complete, chatty: spec.chatty, sigc: spec.sigc, sup: spec.sup,
		lease: keepalive.Granted(held.Item, held.Started, held.Granted.Record, seconds(e.set.ClockSkew)), stage: held.Stage, input: held.Input}
	if spec.stop != nil {
		h.stop, h.stopCtx = spec.stop.Done(), spec.stop
	}
	return h
}

// runHeld runs CMD for h's lease while keepalive.Keep keeps it, and
// finishes the lease after.
func runHeld(h *holder, spec itemSpec) itemRun {
	if h.chatty {
		fmt.Fprintf(h.e.errw, "%s: holding %s token %d for %s, renewing every %s, staging in %s\n",
			spec.who, h.item.ID, h.item.Token, formatSeconds(h.lease.Duration), formatSeconds(h.e.set.RenewInterval), h.stage)
	}
	code, status := h.run(spec.path, spec.stdin, spec.stdout, spec.stderr)
	return itemRun{h: h, code: code, status: status}
}

// holdItem runs CMD for the lease a claim granted (granted, its try begun
// at start) as lease run does: it makes the item's staging directory,
// finds its input, runs CMD (runHeld) and finishes the lease after. The
// error is an exit of a lease not run (the staging directory or the input
// could not be read: the lease was released), 125 with its message. The
// finish waits for a lock no longer than a renewal would (worker.Timing).
func holdItem(e *env, st *commit.Store, spec itemSpec, granted commit.Result, start time.Time) (itemRun, error) {
	held := worker.Held{Item: commit.Item{ID: granted.ID, Token: granted.Token}, Granted: granted, Started: start}
	if err := worker.Prepare(st, &held); err != nil {
		h := newHolder(e, st, spec, held)
		h.end(false)
		return itemRun{h: h}, cli.Exit(leasefmt.Bound(fmt.Sprintf("%v; lease released, %s not run", err, leasefmt.Quote(spec.argv[0]))), exitcode.RunFailed)
	}
	return runHeld(newHolder(e, st, spec, held), spec), nil
}
