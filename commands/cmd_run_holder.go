package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/internal/proctree"
	"github.com/leasetool/lease/internal/worker"
	"github.com/leasetool/lease/keepalive"
	"github.com/leasetool/lease/leasefmt"
)

// holder runs CMD while keepalive.Keep keeps its lease alive: the keeper
// decides when the lease is renewed, retried, lost or done; the holder
// runs CMD, forwards signals to it and stops it when the lease is lost.
type holder struct {
	e    *env
	st   *commit.Store
	who  string // "lease run" or "lease work", for messages
	item commit.Item
	argv []string
	// complete: finish the item (done when CMD exits 0, an attempt when
	// it fails): lease run --complete, lease work.
	complete bool
	chatty   bool // -v: say each renewal (lease run)
	// sigc carries the signals to forward to CMD.
	sigc <-chan os.Signal
	// stop, when it closes, stops CMD as the signal that caused it
	// (stoppedBy(stopCtx)) would, and SIGKILLs the tree after the grace:
	// lease work told to stop. nil for lease run.
	stop    <-chan struct{}
	stopCtx context.Context
	stage   string // LEASE_STAGE: the staging directory of this token
	input   string // LEASE_INPUT: the item's stored content, "" when none
	lease   keepalive.Lease

	renewals   int
	byCommand  bool // CMD completed the lease itself: renewals stopped
	lost       bool
	lostReason string
	finish     string    // released, done, failed, lost, or the failure's reason word
	fin        runFinish // how CMD ended, for finishing the lease (cmd_run_finish.go)
	notStarted bool      // CMD could not be started
	finished   worker.Finished
	ended      worker.End // how end finished it (finishAgain finishes it so again)
	// finisher, when set, finishes the lease (lease work: its loop's
	// finish); else worker.Finish within the renewal's lock wait.
	finisher func(worker.End) worker.Finished
	// supGone: the supervisor died under CMD (killed): the worker's
	// failure, not the item's; no attempt is counted.
	supGone bool

	cmd   *proctree.Cmd
	sup   *proctree.Supervisor // runs CMD when set (lease work), else a supervisor of CMD's own
	pgid  int                  // the supervisor's pid, for messages
	killc <-chan time.Time     // SIGKILL for CMD's group, once the lease is lost
}

// keepConfig is how lease run keeps its lease alive.
func (h *holder) keepConfig() keepalive.Config { return h.e.timing().Keep() }

// childStatus is how CMD ended.
type childStatus struct {
	code   *int
	signal string
}

// run starts CMD, keeps the lease until CMD exits, finishes the lease and
// returns lease run's exit status.
func (h *holder) run(path string, stdin io.Reader, stdout, stderr io.Writer) (int, childStatus) {
	e := h.e
	// Under a supervisor (internal/proctree), in a process group of its
	// own, so that signals reach CMD's children too and a terminal's ^C
	// reaches CMD once (through us), not twice; and no process CMD starts
	// outlives CMD, a lost lease, or lease run itself, killed or not.
	cmd := proctree.Command(path, h.argv...)
	if h.sup != nil {
		cmd = h.sup.Command(path, h.argv...) // lease work's supervisor, one for all its items
	}
	cmd.Env = childEnv(h.item.ID, h.item.Token, e.root(), h.stage, h.input)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, h.fin.stderr(stderr, h.complete)
	cmd.Grace = seconds(e.set.Grace)
	h.cmd = cmd

	if err := cmd.Start(); err != nil {
		code := exitcode.RunCannotRun
		if errors.Is(err, fs.ErrNotExist) {
			code = exitcode.RunNotFound
		}
		fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("%s: cannot run %s: %v", h.who, leasefmt.Quote(h.argv[0]), err)))
		h.notStarted = true
		if h.end(false); h.lost {
			return exitcode.RunLost, childStatus{}
		}
		return code, childStatus{}
	}
	h.pgid = cmd.Pid()
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()

	// The keeper reports from its own goroutine; the reports are handled
	// here, in order, and the channel closes when Keep has returned.
	// Only CMD's end stops the keeping: a lease must be kept for as long
	// as CMD runs (signals go to CMD, which then exits).
	ctx, stopKeeping := context.WithCancel(context.Background())
	defer stopKeeping()
	reports := make(chan keepalive.Report, 8)
	go func() {
		keepalive.Keep(ctx, keepalive.Store(h.st), h.lease, h.keepConfig(), func(r keepalive.Report) { reports <- r })
		close(reports)
	}()

	keeping := (<-chan keepalive.Report)(reports)
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-waitc:
			break loop
		case sig := <-h.sigc:
			if s, ok := sig.(syscall.Signal); ok {
				h.fin.signalled(s)
				cmd.Signal(s)
			}
		case <-h.stop:
			// lease work was told to stop: CMD gets the signal, and the
			// whole tree SIGKILL after the grace unless it is gone by then.
			h.stop = nil
			if s, ok := stoppedBy(h.stopCtx).(syscall.Signal); ok {
				h.fin.signalled(s)
				cmd.Signal(s)
			}
			if h.killc == nil && !h.lost {
				h.killc = time.After(seconds(e.set.Grace))
			}
		case <-h.killc:
			h.killc = nil
			fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("%s: %s still running after SIGTERM; sending SIGKILL to every process of its tree, below process %d",
				h.who, leasefmt.Quote(h.argv[0]), h.pgid)))
			cmd.Kill()
		case r, ok := <-keeping:
			if !ok {
				keeping = nil // the keeping ended: lost, or done by CMD
				continue
			}
			h.reported(r)
		}
	}
	// Let what is in flight land before finishing: a renewal that finds
	// the lease gone still makes it lost.
	stopKeeping()
	if keeping != nil {
		for r := range keeping {
			h.reported(r)
		}
	}

	status := childStatus{}
	code := exitcode.OK
	var ee *exec.ExitError
	var se *proctree.StatusError
	switch {
	case errors.Is(waitErr, proctree.ErrSupervisorGone):
		// The supervisor was killed under CMD: the worker's failure, not
		// the item's. CMD died with it; what CMD started came here (a
		// child subreaper) or died with CMD's process group (the
		// sentinel). The item is finished only once nothing of that tree
		// runs, and counts no attempt.
		h.supGone = true
		code = exitcode.RunFailed
		if err := cmd.Bury(); err != nil {
			fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("%s: %v", h.who, err)))
		}
		fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("%s: supervisor %d of %s died (killed?); nothing of its tree runs now; %s token %d is released, no attempt counted (the worker's failure, not the item's)",
			h.who, h.pgid, leasefmt.Quote(h.argv[0]), h.item.ID, h.item.Token)))
	case waitErr == nil || errors.As(waitErr, &ee) || errors.As(waitErr, &se):
		ws := cmd.WaitStatus()
		if ws.Signaled() {
			code = exitcode.RunSignal + int(ws.Signal())
			status.signal = unix.SignalName(ws.Signal())
		} else {
			code = ws.ExitStatus()
		}
		c := code
		status.code = &c
	default: // only I/O copying errors reach here; CMD did end
		code = exitcode.RunFailed
		fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease run: waiting for %s: %v", leasefmt.Quote(h.argv[0]), waitErr)))
	}
	h.fin.exit = code
	fc := h.end(code == exitcode.OK)
	switch {
	case h.lost:
		return exitcode.RunLost, status
	case fc != exitcode.OK && code == exitcode.OK:
		return fc, status
	}
	return code, status
}

// reported handles one report of the keeper.
func (h *holder) reported(r keepalive.Report) {
	if h.lost || h.byCommand {
		return
	}
	e := h.e
	h.lease = r.Lease
	switch r.Event {
	case keepalive.Renewed:
		h.renewals++
		if h.chatty {
			fmt.Fprintf(e.errw, "%s: renewed %s token %d until %s (%s from now)\n", h.who, h.item.ID, h.item.Token,
				time.UnixMicro(int64(r.Result.Record.ExpiresAt*1e6)).UTC().Format(time.RFC3339), formatSeconds(h.lease.Duration))
		}
	case keepalive.Retry:
		fmt.Fprintln(e.errw, h.who+": renewal failed, retrying until the lease runs out: "+failLine(r.Result))
	case keepalive.Done:
		// Done passed the token check first (fenced): CMD, or someone it
		// gave LEASE_TOKEN to, completed the lease; done is final, so CMD
		// may finish in peace.
		h.byCommand = true
		if h.chatty && !r.Checked {
			fmt.Fprintf(e.errw, "%s: %s token %d was completed by the command; renewals stop\n", h.who, h.item.ID, h.item.Token)
		}
	case keepalive.Lost:
		if !r.Expired {
			h.lose(lostWhy(r.Result), seconds(e.set.Grace))
			return
		}
		// SIGKILL comes at the lost point, before any claimer can take the
		// lease over (expires_at + clock_skew). Past it (lease run itself
		// was stopped), CMD still gets a short grace to exit on SIGTERM.
		left := time.Until(h.lease.LostAt)
		why := fmt.Sprintf("no renewal of %s token %d succeeded; the lease counts as lost at expires_at - clock_skew, in %s",
			h.item.ID, h.item.Token, left.Round(time.Millisecond))
		if left <= 0 {
			why = fmt.Sprintf("no renewal of %s token %d succeeded; the lease counted as lost %s ago (was %s stopped?)",
				h.item.ID, h.item.Token, (-left).Round(time.Millisecond), h.who)
			left = min(seconds(e.set.Grace), time.Second)
		}
		h.lose(why, left)
	}
}

// lose stops CMD: SIGTERM to its group now, SIGKILL after wait.
func (h *holder) lose(why string, wait time.Duration) {
	h.lost, h.lostReason = true, why
	fmt.Fprintln(h.e.errw, leasefmt.Bound(fmt.Sprintf("%s: lease lost: %s; sending SIGTERM to %s (every process of its tree, below process %d), SIGKILL in %s",
		h.who, why, leasefmt.Quote(h.argv[0]), h.pgid, wait)))
	h.cmd.Terminate()
	h.killc = time.After(wait)
}

// lostWhy says why a lease is gone, for the line that stops CMD.
func lostWhy(r commit.Result) string {
	if r.Outcome == commit.Released {
		return "the lease was released or revoked (lease release, lease revoke); " + failLine(r)
	}
	return failLine(r)
}
