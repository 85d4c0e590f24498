package commands

// How lease run finishes a lease once CMD exited (lease-run(1)): with
// --complete, what CMD left in LEASE_STAGE is published as the item's
// result, ROOT/public/ID/, and the item is done only when that publish
// succeeded; a CMD that failed counts an attempt (the item becomes failed
// at max_attempts), with its exit status and the end of its stderr.

import (
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/internal/worker"
	"github.com/leasetool/lease/leasefmt"
)

// runFinish is what lease run knows of how CMD ended.
type runFinish struct {
	exit    int  // CMD's status as lease run reports it (128+n: signal n)
	stopped bool // lease run was told to stop (a signal it forwarded)
	tail    *tailBuffer
}

// stderr is CMD's standard error: lease run's own, and with --complete
// also kept (its end) for the record of a failed run.
func (f *runFinish) stderr(w io.Writer, complete bool) io.Writer {
	if !complete {
		return w
	}
	f.tail = &tailBuffer{}
	if w == nil {
		return f.tail
	}
	return io.MultiWriter(w, f.tail)
}

// signalled notes a signal forwarded to CMD: one that stops the worker
// (SIGINT, SIGTERM, SIGHUP, SIGQUIT) is not the item's failure.
func (f *runFinish) signalled(s syscall.Signal) {
	switch s {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		f.stopped = true
	}
}

// tailBuffer keeps the last bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const keepTail = 4 * leasefmt.MaxTail

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= keepTail {
		t.buf = append(t.buf[:0], p[len(p)-keepTail:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*keepTail {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-keepTail:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...)
}

// end finishes the lease after CMD exited, by the rules of
// worker.Finish: with --complete (lease work always), succeeded says CMD
// exited 0, and a CMD that failed (was not stopped by a signal sent to
// its holder, did not lose its lease, did start) counts an attempt. A
// lease CMD finished itself under our token (done, or released at its
// end) is fine. It returns 0, exitcode.RunLost when the lease turns out
// to be gone, or exitcode.RunFailed when the item is not done for its
// result's sake or the table could not be written.
func (h *holder) end(succeeded bool) int {
	e := worker.End{Complete: h.complete, Succeeded: succeeded, Lost: h.lost}
	if h.complete && !succeeded && !h.fin.stopped && !h.lost && !h.notStarted && h.fin.exit != 0 && !h.supGone {
		// An attempt, unless the table's filesystem has no room now: the
		// machine's failure (worker.Failed).
		e = worker.Failed(h.st, e, commit.Failure{ExitStatus: h.fin.exit, Stderr: h.fin.tail.bytes()})
	}
	h.ended = e
	return h.finishAgain()
}

// finishAgain finishes the lease as end decided (again, after a finish
// that failed for the machine's sake: lease work waits that out) and
// returns end's exit status.
func (h *holder) finishAgain() int {
	e, succeeded := h.ended, h.ended.Succeeded
	var f worker.Finished
	if h.finisher != nil {
		f = h.finisher(e)
	} else {
		ctx, cancel := worker.FinishContext(h.e.timing().FinishWait())
		f = worker.Finish(ctx, h.st, h.item, e, h.e.set.MaxAttempts)
		cancel()
	}
	h.finished, h.finish = f, f.How
	r := f.Result
	switch {
	case f.StageErr != nil:
		h.say("cannot read LEASE_STAGE %s: %v; the item is released, not done", h.stage, f.StageErr)
		return exitcode.RunFailed
	case f.How == worker.HowPublishRefused:
		h.say("%s token %d is not done: its result cannot be published: %s; LEASE_STAGE stays (lease fsck moves it to lost+found/)",
			h.item.ID, h.item.Token, f.Refused)
		h.sayAttempt(f, "the publish was refused")
		return exitcode.RunFailed
	case f.Unpublished:
		h.say("%s token %d was completed by the command; what it left in LEASE_STAGE is not published (lease fsck moves it to lost+found/)",
			h.item.ID, h.item.Token)
		return exitcode.OK
	case f.PublishErr != nil:
		h.say("could not publish the result: %s", failLine(*f.PublishErr))
		return exitcode.RunFailed
	case f.How == worker.HowDone || f.How == worker.HowReleased || f.How == worker.HowFailed:
		if f.Attempt {
			h.sayAttempt(f, fmt.Sprintf("%s exited %d", leasefmt.Quote(h.argv[0]), h.fin.exit))
		}
		if e.NoRoom != nil && f.How == worker.HowReleased {
			h.say("%s", worker.NoRoomMessage(string(h.item.ID), fmt.Sprintf("%s (exit %d)", leasefmt.Quote(h.argv[0]), h.fin.exit), e.NoRoom))
		}
		return exitcode.OK
	case f.How == worker.HowByHolderDone || f.How == worker.HowByHolderReleased:
		return exitcode.OK
	case f.How == worker.HowLost:
		if !h.lost {
			h.lost, h.lostReason = true, failLine(r)
			what := "finished"
			if succeeded && h.complete {
				what = "completed"
			}
			h.say("lease lost before it could be %s: %s", what, failLine(r))
		}
		return exitcode.RunLost
	}
	verb := "release"
	if succeeded && h.complete {
		verb = "complete"
	}
	h.say("could not %s the lease: %s", verb, failLine(r))
	return exitcode.RunFailed
}

// say writes one bounded line of the holder on stderr.
func (h *holder) say(format string, args ...any) {
	fmt.Fprintln(h.e.errw, leasefmt.Bound(h.who+": "+fmt.Sprintf(format, args...)))
}

// sayAttempt reports on stderr an attempt counted.
func (h *holder) sayAttempt(f worker.Finished, why string) {
	rec := f.Result.Record
	if !f.Attempt || rec == nil {
		return
	}
	if rec.Status == leasefmt.Failed {
		h.say("%s: %s token %d failed after %d attempts (max_attempts %d); lease retry puts it back",
			why, rec.ID, rec.Token, rec.Attempts, h.e.set.MaxAttempts)
		return
	}
	limit := " (max_attempts 0: no limit)"
	if h.e.set.MaxAttempts > 0 {
		limit = fmt.Sprintf(" of %d", h.e.set.MaxAttempts)
	}
	h.say("%s: failed attempt %d%s counted for %s token %d; released for another try",
		why, rec.Attempts, limit, rec.ID, rec.Token)
}
