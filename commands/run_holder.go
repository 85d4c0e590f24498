package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/internal/proctree"
	"github.com/leasetool/lease/keepalive"
	"github.com/leasetool/lease/leasefmt"
)

// holder runs CMD while keepalive.Keep keeps its lease alive: the keeper
// decides when the lease is renewed, retried, lost or done; the holder
// runs CMD, forwards signals to it and stops it when the lease is lost.
type holder struct {
	e     *env
	st    *commit.Store
	item  commit.Item
	argv  []string
	stage string // LEASE_STAGE: the staging directory of this token
	input string // LEASE_INPUT: the item's stored content, "" when none
	lease keepalive.Lease

	renewals   int
	byCommand  bool // CMD completed the lease itself: renewals stopped
	lost       bool
	lostReason string
	finish     string    // released, done, failed, lost, or the failure's reason word
	fin        runFinish // how CMD ended, for finishing the lease (run_finish.go)

	cmd   *proctree.Cmd
	pgid  int              // the supervisor's pid, for messages
	killc <-chan time.Time // SIGKILL for CMD's group, once the lease is lost
}

// keepConfig is how lease run keeps its lease alive.
func (h *holder) keepConfig() keepalive.Config {
	set := h.e.set
	return keepalive.Config{
		Interval:    seconds(set.RenewInterval),
		TTL:         seconds(h.e.renewTTL()),
		LockTimeout: seconds(set.LockTimeout),
		ClockSkew:   seconds(set.ClockSkew),
		Grace:       seconds(set.Grace),
	}
}

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
	cmd.Env = childEnv(h.item.ID, h.item.Token, e.root(), h.stage, h.input)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, h.fin.stderr(stderr, e.c.Bool("complete"))
	cmd.Grace = seconds(e.set.Grace)
	h.cmd = cmd

	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, forwardedSignals...)
	defer signal.Stop(sigc)

	if err := cmd.Start(); err != nil {
		code := exitcode.RunCannotRun
		if errors.Is(err, fs.ErrNotExist) {
			code = exitcode.RunNotFound
		}
		fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease run: cannot run %s: %v", leasefmt.Quote(h.argv[0]), err)))
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
		case sig := <-sigc:
			if s, ok := sig.(syscall.Signal); ok {
				h.fin.signalled(s)
				cmd.Signal(s)
			}
		case <-h.killc:
			h.killc = nil
			fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease run: %s still running after SIGTERM; sending SIGKILL to every process below supervisor %d",
				leasefmt.Quote(h.argv[0]), h.pgid)))
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
	switch {
	case waitErr == nil || errors.As(waitErr, &ee):
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
	fc := h.end(code == exitcode.OK && e.c.Bool("complete"))
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
		if e.verbose {
			fmt.Fprintf(e.errw, "lease run: renewed %s token %d until %s (%s from now)\n", h.item.ID, h.item.Token,
				time.UnixMicro(int64(r.Result.Record.ExpiresAt*1e6)).UTC().Format(time.RFC3339), formatSeconds(h.lease.Duration))
		}
	case keepalive.Retry:
		fmt.Fprintln(e.errw, "lease run: renewal failed, retrying until the lease runs out: "+failLine(r.Result))
	case keepalive.Done:
		// Done passed the token check first (fenced): CMD, or someone it
		// gave LEASE_TOKEN to, completed the lease; done is final, so CMD
		// may finish in peace.
		h.byCommand = true
		if e.verbose && !r.Checked {
			fmt.Fprintf(e.errw, "lease run: %s token %d was completed by the command; renewals stop\n", h.item.ID, h.item.Token)
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
			why = fmt.Sprintf("no renewal of %s token %d succeeded; the lease counted as lost %s ago (was lease run stopped?)",
				h.item.ID, h.item.Token, (-left).Round(time.Millisecond))
			left = min(seconds(e.set.Grace), time.Second)
		}
		h.lose(why, left)
	}
}

// lose stops CMD: SIGTERM to its group now, SIGKILL after wait.
func (h *holder) lose(why string, wait time.Duration) {
	h.lost, h.lostReason = true, why
	fmt.Fprintln(h.e.errw, leasefmt.Bound(fmt.Sprintf("lease run: lease lost: %s; sending SIGTERM to %s (every process below supervisor %d), SIGKILL in %s",
		why, leasefmt.Quote(h.argv[0]), h.pgid, wait)))
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

// end finishes the lease after CMD exited: complete (done) when asked and
// CMD succeeded, else release. A lease CMD finished itself under our token
// (done, or released at its end) is fine. It returns 0, exitcode.RunLost when the
// lease turns out to be gone, or exitcode.RunFailed when the table could not be
// written. An empty staging directory is removed.
func (h *holder) end(complete bool) int {
	defer h.removeStage()
	var res []commit.Result
	verb := "release"
	if complete {
		if code, published := h.publishStage(); published {
			return code
		}
		res, verb = h.st.Complete([]commit.Item{h.item}), "complete"
	} else {
		res = h.release()
	}
	switch r, ev := res[0], keepalive.Classify(res[0].Outcome); {
	case r.Outcome == commit.OK:
		h.finish = map[bool]string{true: "done", false: "released"}[complete]
		if r.Record != nil && r.Record.Status == leasefmt.Failed {
			h.finish = "failed"
		}
		return exitcode.OK
	case h.lost:
		h.finish = "lost"
		return exitcode.RunLost
	case ev == keepalive.Done || r.Outcome == commit.Released:
		h.finish = "by-command-" + r.Outcome.Reason()
		return exitcode.OK
	case ev == keepalive.Lost:
		h.finish = "lost"
		h.lost, h.lostReason = true, failLine(r)
		fmt.Fprintln(h.e.errw, leasefmt.Bound("lease run: lease lost before it could be finished: "+failLine(r)))
		return exitcode.RunLost
	default:
		h.finish = r.Outcome.Reason()
		fmt.Fprintln(h.e.errw, leasefmt.Bound(fmt.Sprintf("lease run: could not %s the lease: %s", verb, failLine(r))))
		return exitcode.RunFailed
	}
}

// removeStage removes the staging directory when CMD left nothing in it
// (a published result was moved out by lease complete --publish); what
// is left stays for lease fsck to move to lost+found/.
func (h *holder) removeStage() {
	if h.stage != "" {
		h.st.FS.Remove(commit.StagePath(h.item.ID, h.item.Token))
	}
}
