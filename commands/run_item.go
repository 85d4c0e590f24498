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
	// cause is the table's error that kept CMD from running (the staging
	// directory, the input), nil when it ran.
	cause error
}

// holdItem runs CMD for the lease a claim granted (granted, its try begun
// at start): it makes the item's staging directory, finds its input, runs
// CMD while keepalive.Keep keeps the lease and finishes the lease after.
// The error is an exit of a lease not run (the staging directory or the
// input could not be read: the lease was released), 125 with its message.
// The store's lock wait is the renewal bound meanwhile (the release or
// completion after CMD waits for a lock no longer than a renewal would,
// keepalive.LockWait), and what it was after.
func holdItem(e *env, st *commit.Store, spec itemSpec, granted commit.Result, start time.Time) (itemRun, error) {
	item := commit.Item{ID: granted.ID, Token: granted.Token}
	old := st.LockTimeout()
	st.SetLockTimeout(renewLockTimeout(e.set))
	defer st.SetLockTimeout(old)
	h := &holder{e: e, st: st, who: spec.who, item: item, argv: spec.argv, complete: spec.complete, chatty: spec.chatty, sigc: spec.sigc, sup: spec.sup,
		lease: keepalive.Granted(item, start, granted.Record, seconds(e.set.ClockSkew))}
	if spec.stop != nil {
		h.stop, h.stopCtx = spec.stop.Done(), spec.stop
	}
	stage, err := st.MakeStage(item.ID, item.Token)
	if err != nil {
		h.end(false)
		return itemRun{h: h, cause: err}, cli.Exit(leasefmt.Bound(fmt.Sprintf("staging directory of %s token %d: %v; lease released, %s not run", item.ID, item.Token, err, leasefmt.Quote(spec.argv[0]))), exitcode.RunFailed)
	}
	h.stage = stage
	if ok, err := st.HasInput(item.ID); err != nil {
		h.end(false)
		return itemRun{h: h, cause: err}, cli.Exit(leasefmt.Bound(fmt.Sprintf("stored input of %s: %v; lease released, %s not run", item.ID, err, leasefmt.Quote(spec.argv[0]))), exitcode.RunFailed)
	} else if ok {
		h.input = st.Abs(st.InputPath(item.ID))
	}
	if h.chatty {
		fmt.Fprintf(e.errw, "%s: holding %s token %d for %s, renewing every %s, staging in %s\n",
			spec.who, item.ID, item.Token, formatSeconds(h.lease.Duration), formatSeconds(e.set.RenewInterval), stage)
	}
	code, status := h.run(spec.path, spec.stdin, spec.stdout, spec.stderr)
	return itemRun{h: h, code: code, status: status}, nil
}
