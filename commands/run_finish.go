package commands

// How lease run finishes a lease once CMD exited (lease-run(1)): with
// --complete, what CMD left in LEASE_STAGE is published as the item's
// result, ROOT/public/ID/, and the item is done only when that publish
// succeeded; a CMD that failed counts an attempt (the item becomes failed
// at max_attempts), with its exit status and the end of its stderr.

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/keepalive"
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

// release releases the lease after CMD exited: with --complete, a CMD
// that failed (and was not stopped, and did not lose its lease) counts an
// attempt.
func (h *holder) release() []commit.Result {
	items := []commit.Item{h.item}
	if !h.e.c.Bool("complete") || h.fin.exit == 0 || h.fin.stopped || h.lost {
		return h.st.Release(items)
	}
	res := h.st.ReleaseFailed(items, commit.Failure{ExitStatus: h.fin.exit, Stderr: h.fin.tail.bytes()}, h.e.set.MaxAttempts)
	h.sayAttempt(res[0], fmt.Sprintf("%s exited %d", leasefmt.Quote(h.argv[0]), h.fin.exit))
	return res
}

// sayAttempt reports on stderr an attempt counted.
func (h *holder) sayAttempt(r commit.Result, why string) {
	if r.Outcome != commit.OK || r.Record == nil {
		return
	}
	rec := r.Record
	if rec.Status == leasefmt.Failed {
		fmt.Fprintln(h.e.errw, leasefmt.Bound(fmt.Sprintf("lease run: %s: %s token %d failed after %d attempts (max_attempts %d); lease retry puts it back",
			why, rec.ID, rec.Token, rec.Attempts, h.e.set.MaxAttempts)))
		return
	}
	limit := " (max_attempts 0: no limit)"
	if h.e.set.MaxAttempts > 0 {
		limit = fmt.Sprintf(" of %d", h.e.set.MaxAttempts)
	}
	fmt.Fprintln(h.e.errw, leasefmt.Bound(fmt.Sprintf("lease run: %s: failed attempt %d%s counted for %s token %d; released for another try",
		why, rec.Attempts, limit, rec.ID, rec.Token)))
}

// publishStage publishes what CMD left in LEASE_STAGE as the item's
// result, ROOT/public/ID/, when it left anything: the lease is then done
// only if the publish succeeded. A result that cannot be published (a
// symbolic link in it, public/ID taken) releases the item with an attempt
// counted and leaves the staging directory for lease fsck (moved to
// lost+found/, never deleted). It reports lease run's exit status, and
// false when LEASE_STAGE is empty (the lease is completed as usual).
func (h *holder) publishStage() (int, bool) {
	empty, err := h.st.StageEmpty(h.item.ID, h.item.Token)
	if err == nil && empty {
		return 0, false
	}
	if err != nil {
		fmt.Fprintln(h.e.errw, leasefmt.Bound(fmt.Sprintf("lease run: cannot read LEASE_STAGE %s: %v; the item is released, not done", h.stage, err)))
		h.st.Release([]commit.Item{h.item})
		h.finish = "io-error"
		return exitcode.RunFailed, true
	}
	r, err := h.st.CompleteStage(h.item)
	refused := ""
	switch {
	case errors.Is(err, commit.ErrStaged):
		refused = err.Error()
	case r.Outcome == commit.Exists:
		refused = r.Detail
	}
	if refused != "" {
		why := "its result cannot be published: " + refused
		res := h.st.ReleaseFailed([]commit.Item{h.item}, commit.Failure{Stderr: []byte("lease run: " + why)}, h.e.set.MaxAttempts)
		fmt.Fprintln(h.e.errw, leasefmt.Bound(fmt.Sprintf("lease run: %s token %d is not done: %s; LEASE_STAGE stays (lease fsck moves it to lost+found/)",
			h.item.ID, h.item.Token, why)))
		h.sayAttempt(res[0], "the publish was refused")
		h.finish = "publish-refused"
		return exitcode.RunFailed, true
	}
	switch ev := keepalive.Classify(r.Outcome); {
	case r.Outcome == commit.OK:
		h.finish = "done"
		return 0, true
	case ev == keepalive.Done:
		// CMD completed the lease itself, without this result.
		fmt.Fprintln(h.e.errw, leasefmt.Bound(fmt.Sprintf("lease run: %s token %d was completed by the command; what it left in LEASE_STAGE is not published (lease fsck moves it to lost+found/)",
			h.item.ID, h.item.Token)))
		h.finish = "by-command-done"
		return 0, true
	case ev == keepalive.Lost:
		h.finish = "lost"
		h.lost, h.lostReason = true, failLine(r)
		fmt.Fprintln(h.e.errw, leasefmt.Bound("lease run: lease lost before its result could be published: "+failLine(r)))
		return exitcode.RunLost, true
	}
	// An I/O error, a lock timeout, a corrupt record: the record may be
	// committing; the release settles it (done if the result moved).
	fmt.Fprintln(h.e.errw, leasefmt.Bound(fmt.Sprintf("lease run: could not publish the result: %s", failLine(r))))
	rel := h.st.Release([]commit.Item{h.item})[0]
	if rel.Outcome == commit.Done {
		h.finish = "done"
		return 0, true
	}
	h.finish = r.Outcome.Reason()
	return exitcode.RunFailed, true
}
