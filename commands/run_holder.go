package commands

import (
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
	"github.com/leasetool/lease/keepalive"
	"github.com/leasetool/lease/leasefmt"
)

// holder runs CMD while keeping one lease alive.
type holder struct {
	e     *env
	st    *commit.Store
	item  commit.Item
	argv  []string
	stage string // LEASE_STAGE: the staging directory of this token
	lease keepalive.Lease

	renewals   int
	byCommand  bool // CMD completed the lease itself: renewals stopped
	lost       bool
	lostReason string
	finish     string // released, done, lost, or the failure's reason word
}

// extend records a write of the lease begun at started.
func (h *holder) extend(started time.Time, rec *leasefmt.Record) {
	h.lease.Extend(started, rec, h.e.set.ClockSkew)
}

// grace is the time between SIGTERM and SIGKILL when renewals keep
// failing, which ends at the lost point, so that CMD is gone before the
// lease counts as lost (and long before a claimer may take it over):
// --grace, shortened to half of what the lease leaves after the first
// retry, so that renewals are retried before CMD is told to stop.
func (h *holder) grace() time.Duration {
	room := h.lease.Duration - h.e.set.ClockSkew - h.e.set.RenewInterval
	return seconds(max(0, min(h.e.set.Grace, room/2)))
}

// stopAt is when CMD gets SIGTERM if no renewal succeeds before.
func (h *holder) stopAt() time.Time { return h.lease.LostAt.Add(-h.grace()) }

// pollInterval is how often the lease is checked, read-only, between
// renewals, so that a revoke or a release from outside stops CMD within
// about a second.
func (h *holder) pollInterval() time.Duration {
	return min(time.Second, seconds(h.e.set.RenewInterval))
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
	cmd := exec.Command(path, h.argv[1:]...)
	cmd.Args[0] = h.argv[0]
	cmd.Env = childEnv(h.item.ID, h.item.Token, e.root(), h.stage)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = childProcAttr() // its own process group, told of our death

	cmd.WaitDelay = time.Second

	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, forwardedSignals...)
	defer signal.Stop(sigc)

	if err := cmd.Start(); err != nil {
		code := exitCannotRun
		if errors.Is(err, fs.ErrNotExist) {
			code = exitNotFound
		}
		fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease run: cannot run %s: %v", leasefmt.Quote(h.argv[0]), err)))
		if h.end(false); h.lost {
			return exitLost, childStatus{}
		}
		return code, childStatus{}
	}
	pgid := cmd.Process.Pid
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()

	ticker := time.NewTicker(seconds(e.set.RenewInterval))
	defer ticker.Stop()
	poll := time.NewTicker(h.pollInterval())
	defer poll.Stop()
	expiry := time.NewTimer(time.Until(h.stopAt()))
	defer expiry.Stop()
	var killc <-chan time.Time
	renewc := make(chan renewal, 1)
	checkc := make(chan commit.Result, 1)
	renewing, checking := false, false

	stopRenewing := func() {
		ticker.Stop()
		poll.Stop()
		expiry.Stop()
	}
	loseLease := func(why string, wait time.Duration) {
		if h.lost {
			return
		}
		h.lost, h.lostReason = true, why
		stopRenewing()
		fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease run: lease lost: %s; sending SIGTERM to %s (process group %d), SIGKILL in %s",
			why, leasefmt.Quote(h.argv[0]), pgid, wait)))
		syscall.Kill(-pgid, syscall.SIGTERM)
		killc = time.After(wait)
	}
	lose := func(why string) { loseLease(why, seconds(e.set.Grace)) }

	var waitErr error
loop:
	for {
		select {
		case waitErr = <-waitc:
			break loop
		case sig := <-sigc:
			if s, ok := sig.(syscall.Signal); ok {
				syscall.Kill(-pgid, s)
			}
		case <-killc:
			killc = nil
			fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease run: %s still running after SIGTERM; sending SIGKILL to process group %d",
				leasefmt.Quote(h.argv[0]), pgid)))
			syscall.Kill(-pgid, syscall.SIGKILL)
		case <-ticker.C:
			if renewing || h.lost || h.byCommand {
				continue
			}
			renewing = true
			go h.renew(renewc)
		case r := <-renewc:
			renewing = false
			h.renewed(r, lose, stopRenewing, expiry)
		case <-poll.C:
			if checking || renewing || h.lost || h.byCommand {
				continue
			}
			checking = true
			go func() { checkc <- h.st.Verify(h.e.ctx(), []commit.Item{h.item})[0] }()
		case r := <-checkc:
			checking = false
			h.checked(r, lose, stopRenewing)
		case <-expiry.C:
			if !h.lost && !h.byCommand {
				// SIGKILL comes at the lost point, before any claimer can
				// take the lease over (expires_at + clock_skew). Past it
				// (lease run itself was stopped), CMD still gets a short
				// grace to exit on SIGTERM.
				left := time.Until(h.lease.LostAt)
				why := fmt.Sprintf("no renewal of %s token %d succeeded; the lease counts as lost at expires_at - clock_skew, in %s",
					h.item.ID, h.item.Token, left.Round(time.Millisecond))
				if left <= 0 {
					why = fmt.Sprintf("no renewal of %s token %d succeeded; the lease counted as lost %s ago (was lease run stopped?)",
						h.item.ID, h.item.Token, (-left).Round(time.Millisecond))
					left = min(seconds(e.set.Grace), time.Second)
				}
				loseLease(why, left)
			}
		}
	}
	if renewing { // let the renewal in flight land before finishing
		h.renewed(<-renewc, lose, stopRenewing, expiry)
	}
	if checking {
		<-checkc
	}

	status := childStatus{}
	code := 0
	var ee *exec.ExitError
	switch {
	case waitErr == nil || errors.As(waitErr, &ee):
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			code = 128 + int(ws.Signal())
			status.signal = unix.SignalName(ws.Signal())
		} else {
			code = ws.ExitStatus()
		}
		c := code
		status.code = &c
	default: // only I/O copying errors reach here; CMD did end
		code = exitToolFailed
		fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease run: waiting for %s: %v", leasefmt.Quote(h.argv[0]), waitErr)))
	}
	fc := h.end(code == 0 && e.c.Bool("complete"))
	switch {
	case h.lost:
		return exitLost, status
	case fc != 0 && code == 0:
		return fc, status
	}
	return code, status
}

// renewal is the result of one renewal attempt.
type renewal struct {
	started time.Time
	res     commit.Result
}

func (h *holder) renew(out chan<- renewal) {
	started := time.Now()
	res := h.st.Renew(h.e.ctx(), []commit.Item{h.item}, h.e.renewTTL())
	out <- renewal{started, res[0]}
}

// renewed handles the result of a renewal: a success extends the local
// deadline, a refusal loses the lease, and a failure (lock timeout, I/O,
// corrupt record) is reported and retried until the deadline passes.
func (h *holder) renewed(r renewal, lose func(string), stop func(), expiry *time.Timer) {
	if h.lost || h.byCommand {
		return
	}
	switch keepalive.Classify(r.res.Outcome) {
	case keepalive.Renewed:
		h.renewals++
		h.extend(r.started, r.res.Record)
		expiry.Reset(time.Until(h.stopAt()))
		if h.e.verbose {
			fmt.Fprintf(h.e.errw, "lease run: renewed %s token %d until %s (%s from now)\n", h.item.ID, h.item.Token,
				time.UnixMicro(int64(r.res.Record.ExpiresAt*1e6)).UTC().Format(time.RFC3339), formatSeconds(h.lease.Duration))
		}
	case keepalive.Done:
		// Done passed the token check first (fenced): CMD, or someone it
		// gave LEASE_TOKEN to, completed the lease; done is final, so CMD
		// may finish in peace.
		h.byCommand = true
		stop()
		if h.e.verbose {
			fmt.Fprintf(h.e.errw, "lease run: %s token %d was completed by the command; renewals stop\n", h.item.ID, h.item.Token)
		}
	case keepalive.Lost:
		lose(lostWhy(r.res))
	default:
		fmt.Fprintln(h.e.errw, "lease run: renewal failed, retrying until the lease runs out: "+failLine(r.res))
	}
}

// checked handles the read-only check between renewals: a lease that is
// no longer this token's (revoked, released, taken over) stops CMD now.
func (h *holder) checked(r commit.Result, lose func(string), stop func()) {
	if h.lost || h.byCommand {
		return
	}
	switch ev := keepalive.Classify(r.Outcome); {
	case ev == keepalive.Done:
		h.byCommand = true
		stop()
	case r.Outcome == commit.Expired:
		// The local deadline decides expiry: it counts from before the
		// write, on the monotonic clock.
	case ev == keepalive.Lost:
		lose(lostWhy(r))
	}
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
// (done, or released at its end) is fine. It returns 0, exitLost when the
// lease turns out to be gone, or exitToolFailed when the table could not be
// written. An empty staging directory is removed.
func (h *holder) end(complete bool) int {
	defer h.removeStage()
	var res []commit.Result
	verb := "release"
	if complete {
		res, verb = h.st.Complete(h.e.ctx(), []commit.Item{h.item}), "complete"
	} else {
		res = h.st.Release(h.e.ctx(), []commit.Item{h.item})
	}
	switch r, ev := res[0], keepalive.Classify(res[0].Outcome); {
	case r.Outcome == commit.OK:
		h.finish = map[bool]string{true: "done", false: "released"}[complete]
		return 0
	case h.lost:
		h.finish = "lost"
		return exitLost
	case ev == keepalive.Done || r.Outcome == commit.Released:
		h.finish = "by-command-" + r.Outcome.Reason()
		return 0
	case ev == keepalive.Lost:
		h.finish = "lost"
		h.lost, h.lostReason = true, failLine(r)
		fmt.Fprintln(h.e.errw, leasefmt.Bound("lease run: lease lost before it could be finished: "+failLine(r)))
		return exitLost
	default:
		h.finish = r.Outcome.Reason()
		fmt.Fprintln(h.e.errw, leasefmt.Bound(fmt.Sprintf("lease run: could not %s the lease: %s", verb, failLine(r))))
		return exitToolFailed
	}
}

// removeStage removes the staging directory when CMD left nothing in it
// (a published result was moved out by lease complete --publish); what
// is left stays for lease fsck to move to lost+found/.
func (h *holder) removeStage() {
	if h.stage != "" {
		h.st.FS().Remove(commit.StagePath(h.item.ID, h.item.Token))
	}
}
