package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/cluster"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/keepalive"
	"github.com/leasetool/lease/leasefmt"
)

// renew-batch --watch: keep leases alive round after round, in one process
// or as one program across the ranks of an mpirun job (package cluster).
// Rank 0 reads the inputs and reports; every rank renews its shards each
// round; the ranks agree at the start of each round whether to stop.

// watchSignals stop renew-batch --watch after the round in progress.
// SIGUSR1 is for mpirun, which forwards it to every rank (SIGTERM and SIGINT
// make mpirun abort the job and exit non-zero).
var watchSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1}

// watchSource is one input of --watch: a FILE re-read every round, or
// stdin, read once.
type watchSource struct {
	name    string
	stdin   bool
	lines   []inputLine // the last lines read
	pending string      // an unterminated last line seen in the previous round
	gone    bool        // the file could not be read; its last lines are kept
}

// watcher is rank 0's state of renew-batch --watch. mu guards it: the
// rounds update it in the main goroutine while a signal may make
// stopNow (watch_stop.go) report from it in another.
type watcher struct {
	mu        sync.Mutex
	e         *env
	st        *commit.Store
	sources   []*watchSource
	stdinOnly bool
	set       *keepalive.Set
	warned    map[string]bool
	first     []commit.Item // the items of the first round
	order     []commit.Item // the items of the last round, in input order
	rounds    int
	lost      []commit.Result
	code      int // worst status of the last round's failures that may pass
	// output is --output's FILE ("": stdout); written is the held set it
	// holds now.
	output  string
	written []commit.Item
	// stats are the statistics as of the last round (rank 0's sum).
	stats commit.Snapshot
	// finished: the final report was made (by a signal, before the loop
	// ended); reported is its outcome.
	finished bool
	reported error
}

func runWatch(c *cli.Context) error {
	// Signals are caught from the start: one that arrives while the input
	// is read or the first round runs stops the watch after that round,
	// which still prints the held set.
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, watchSignals...)
	defer stopNotify(sigc)
	e, w, setErr, err := joinWorld(c)
	if err != nil {
		return err
	}
	defer w.Finalize()
	if setErr == nil {
		setErr = watchSettings(c, e, w.Size())
	}
	if err := cluster.Agree(w, setErr, exitOf); err != nil {
		return ranked(c, w, err)
	}
	var wt *watcher
	var items []commit.Item
	var inErr error
	if w.Rank() == 0 {
		wt, items, inErr = newWatcher(c, e)
	}
	if err := cluster.Agree(w, inErr, exitOf); err != nil {
		return ranked(c, w, err)
	}
	// A watch's lock waits are bounded as a holder's renewal's are
	// (keepalive.LockWait), not by lock_timeout: a wait longer than the
	// lease's margin would let it expire while waiting.
	sess, err := cluster.Open(w, func() (*commit.Store, error) {
		return e.openWaiting(false, renewLockTimeout(e.set))
	}, exitOf)
	if err != nil {
		return ranked(c, w, err)
	}
	ticks := (<-chan os.Signal)(sigc)
	if wt != nil {
		wt.st = sess.Store
		var done func()
		ticks, done = wt.stopOnSignal(sigc)
		defer done()
	}
	ctx, stop := onSignal(c.Context, ticks)
	defer stop()
	stopped, err := watchLoop(ctx, e, sess, wt, items)
	if err != nil {
		return ranked(c, w, err)
	}
	var reported error
	if wt != nil {
		reported = wt.finishOnce(stopped, sess.Stats(time.Since(e.started)))
	}
	reported = sayFirst(c, w, reported)
	code, err := sess.Exit(exitOf(reported))
	if err != nil {
		return ranked(c, w, err)
	}
	if wt != nil {
		return reported
	}
	if code != exitcode.OK {
		return cli.Exit("", code)
	}
	return nil
}

// watchLoop runs rounds on every rank until the ranks agree to stop: after
// a signal to any of them (which ends ctx), or, with stdin as rank 0's
// only input, once nothing is left to renew. The first round always runs,
// so that what is printed at the end was checked. Every rank takes part in
// every round's batch, also one in which rank 0 has nothing to renew. It
// returns the signal that stopped the ranks (this one's, or another's), nil when none did.
func watchLoop(ctx context.Context, e *env, sess *cluster.Session, wt *watcher, items []commit.Item) (os.Signal, error) {
	t := keepalive.NewTicker(e.set.RenewInterval)
	batch := cluster.Batch{Kind: leasefmt.Work, Spread: true,
		Run: func(ctx context.Context, mine []commit.Item) []commit.Result {
			return sess.Store.Renew(ctx, mine, e.renewTTL())
		}}
	for rounds := 0; ; rounds++ {
		done := wt != nil && wt.nothingLeft()
		stop, err := sess.Max(stopVote(rounds > 0 && (ctx.Err() != nil || done), ctx))
		if err != nil {
			return stoppedBy(ctx), err
		}
		if stop > 0 {
			if sig := stoppedBy(ctx); sig != nil {
				return sig, nil
			}
			if stop > 1 { // another rank's signal: mpirun may deliver it to this one later, or never
				return syscall.Signal(stop - 2), nil
			}
			return nil, nil
		}
		started := time.Now()
		res, err := sess.Batch(e.ctx(), batch, items)
		if err != nil {
			return stoppedBy(ctx), err
		}
		if wt != nil {
			wt.round(res, started, sess)
		}
		t.Wait(ctx)
		if wt != nil {
			items = wt.reread()
		}
	}
}

// stopVote is this rank's vote in the agreement to stop (Session.Max): 0
// to go on, 1 to stop, 2+N to stop by signal N. The largest vote wins, so
// that every rank, rank 0 too, reports the signal one of them received.
func stopVote(stop bool, ctx context.Context) int {
	if !stop {
		return 0
	}
	if sig, ok := stoppedBy(ctx).(syscall.Signal); ok {
		return 2 + int(sig)
	}
	return 1
}

// watchSettings refuses settings under which a renewal cannot arrive in
// time: a fixed clock, an interval that does not fit the TTL, and under
// mpirun an interval the collectives' watchdog would not wait for.
func watchSettings(c *cli.Context, e *env, ranks int) error {
	if c.IsSet("now") {
		return usageErr("--now cannot be used with --watch: renewals follow the system clock")
	}
	if err := e.set.CheckRenewInterval(); err != nil {
		return cli.Exit(err.Error(), exitcode.Usage)
	}
	if ranks > 1 && e.set.MPITimeout > 0 && e.set.RenewInterval >= e.set.MPITimeout {
		return usageErr("renew_interval %g (%s) must be less than mpi_timeout %g (%s): ranks wait for each other once per round",
			e.set.RenewInterval, e.set.Origin("renew_interval"), e.set.MPITimeout, e.set.Origin("mpi_timeout"))
	}
	return nil
}

// newWatcher reads the inputs and validates the first round whole.
func newWatcher(c *cli.Context, e *env) (*watcher, []commit.Item, error) {
	if err := checkOutput(c); err != nil {
		return nil, nil, err
	}
	w := &watcher{e: e, stdinOnly: true, set: keepalive.NewSet(e.set.TTL, e.set.ClockSkew), warned: map[string]bool{}, output: c.String("output")}
	args := c.Args().Slice()
	if len(args) == 0 {
		args = []string{"-"}
	}
	for _, a := range args {
		src := &watchSource{name: a, stdin: a == "-"}
		if src.stdin {
			var err error
			if src.lines, err = scanLines(c.App.Reader, "stdin"); err != nil {
				return nil, nil, err
			}
		} else {
			w.stdinOnly = false
			if err := w.readFile(src, true); err != nil {
				return nil, nil, err
			}
		}
		w.sources = append(w.sources, src)
	}
	var first []inputLine
	for _, s := range w.sources {
		first = append(first, s.lines...)
	}
	items, err := parseItems(first, true) // the first round is validated whole
	if err != nil {
		return nil, nil, err
	}
	w.first = items
	return w, items, nil
}

// maxWatchFile bounds a FILE source, read whole every round: 256 MiB holds
// a million lines of a long ID and its token more than twice over, and a
// FIFO, a device or a bigger file is refused (userfile) instead of hanging
// the holder or growing without bound.
const maxWatchFile = 256 << 20

// readFile reads a FILE source. The first read must succeed; later a file
// that went away keeps its last lines (with a warning).
func (w *watcher) readFile(src *watchSource, first bool) error {
	data, err := userfile.Read(src.name, maxWatchFile)
	if err != nil {
		if first {
			return usageErr("input %v", err)
		}
		w.warnOnce("read "+src.name, fmt.Sprintf("lease renew-batch: input %v; keeping its last %d lines", err, len(src.lines)))
		src.gone = true
		return nil
	}
	src.gone = false
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		tail := string(data[i+1:])
		// A last line without its newline may be half written: take it when
		// it is unchanged since the previous round (or in the first round),
		// and in later rounds only when it is a whole ID TOKEN line.
		if !first && (tail != src.pending || !wholeLine(tail)) {
			data = data[:i+1]
		}
		src.pending = tail
	} else {
		src.pending = ""
	}
	lines, err := scanLines(bytes.NewReader(data), src.name)
	if err != nil {
		if first {
			return err
		}
		w.warnOnce("scan "+src.name+err.Error(), "lease renew-batch: "+err.Error()+"; keeping the lines read before")
		return nil
	}
	src.lines = lines
	return nil
}

// wholeLine reports whether s is a well-formed `ID TOKEN` line.
func wholeLine(s string) bool {
	lines, err := scanLines(strings.NewReader(s), "")
	if err != nil || len(lines) != 1 {
		return false
	}
	_, err = parseItems(lines, true)
	return err == nil
}

// reread reads the FILEs again and returns the items of the next round:
// every well-formed line not dropped as lost, of two lines with one ID the
// larger token.
func (w *watcher) reread() []commit.Item {
	var items []commit.Item
	at := map[leasefmt.ID]int{}
	for _, src := range w.sources {
		if !src.stdin {
			w.readFile(src, false)
		}
		for _, l := range src.lines {
			one, err := parseItems([]inputLine{l}, true)
			if err != nil {
				w.warnOnce(fmt.Sprintf("%s:%d:%q", l.src, l.n, l.fields), fmt.Sprintf("lease renew-batch: %v (skipped)", err))
				continue
			}
			it := one[0]
			if w.set.Dropped(it) {
				continue
			}
			if i, dup := at[it.ID]; dup {
				prev := items[i]
				keep := max(prev.Token, it.Token)
				w.warnOnce(fmt.Sprintf("dup %s %d %d", it.ID, prev.Token, it.Token),
					fmt.Sprintf("lease renew-batch: %s:%d: %s appears with tokens %d and %d; renewing token %d", l.src, l.n, it.ID, prev.Token, it.Token, keep))
				items[i].Token = keep
				continue
			}
			at[it.ID] = len(items)
			items = append(items, it)
		}
	}
	return items
}

func (w *watcher) warnOnce(key, msg string) {
	if w.warned[key] {
		return
	}
	w.warned[key] = true
	fmt.Fprintln(w.e.errw, leasefmt.Bound(msg))
}

// round reports what one round did: losses as they happen, failures that
// may pass with "(will retry)".
func (w *watcher) round(res []commit.Result, started time.Time, sess *cluster.Session) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats = sess.Stats(time.Since(w.e.started))
	w.rounds++
	w.code = exitcode.OK
	renewed, lost, failed := 0, 0, 0
	kept := make([]commit.Item, 0, len(res))
	for _, o := range w.set.Round(res, started) {
		switch o.Event {
		case keepalive.Renewed:
			renewed++
		case keepalive.Retry:
			failed++
			w.code = exitcode.Worse(w.code, exitcode.Of(o.Result.Outcome))
			fmt.Fprintln(w.e.errw, failLine(o.Result)+" (will retry)")
		default:
			lost++
			w.lost = append(w.lost, o.Result)
			fmt.Fprintln(w.e.errw, failLine(o.Result))
			continue
		}
		kept = append(kept, o.Result.Item)
	}
	w.order = kept
	if !w.finished {
		w.writeRound(kept) // before the -v line, which says the round is over
	}
	if w.e.verbose {
		line := fmt.Sprintf("lease renew-batch: round %d: renewed=%d lost=%d failures=%d held=%d time=%.3fs",
			w.rounds, renewed, lost, failed, renewed, time.Since(started).Seconds())
		if sess.World().Size() > 1 {
			line += fmt.Sprintf(" ranks=%d collective_time=%.6fs", sess.World().Size(), sess.RoundCollectives().Seconds())
		}
		fmt.Fprintln(w.e.errw, line)
	}
}

// signalName is SIGTERM for syscall.SIGTERM.
func signalName(s os.Signal) string {
	if n, ok := s.(syscall.Signal); ok && unix.SignalName(n) != "" {
		return unix.SignalName(n)
	}
	return s.String()
}

// watchHeld is one lease of the final --json document.
type watchHeld struct {
	ID        string  `json:"id"`
	Token     int64   `json:"token"`
	ExpiresAt float64 `json:"expires_at"`
}

// finish prints the lines still held and the statistics, and returns the
// exit status. A lease is still held when the last round renewed it and a
// last fencing check (lease verify) passes now: one completed, released
// or taken over since the last round is reported lost instead.
func (w *watcher) finish(stopped os.Signal, snap commit.Snapshot) error {
	// Every lease of the last round that is not lost: also one whose last
	// renewal failed in a way that may pass (a lock timeout), which is
	// still held when the check below passes.
	candidates := w.order
	if w.rounds == 0 { // stopped before the first round ended
		candidates = w.first
	}
	var held []watchHeld
	for _, r := range w.st.Verify(w.e.ctx(), candidates) {
		switch keepalive.Classify(r.Outcome) {
		case keepalive.Renewed:
			held = append(held, watchHeld{string(r.ID), r.Item.Token, r.Record.ExpiresAt})
		case keepalive.Retry: // cannot tell now: kept, so that the held set loses no lease
			exp := 0.0
			if l := w.set.Lease(r.Item); l != nil {
				exp = l.ExpiresAt
			}
			fmt.Fprintln(w.e.errw, failLine(r)+" (kept: it was not lost)")
			held = append(held, watchHeld{string(r.ID), r.Item.Token, exp})
		default:
			w.lost = append(w.lost, r)
			fmt.Fprintln(w.e.errw, failLine(r))
		}
	}
	code := w.code
	if stopped == nil && w.stdinOnly && len(w.lost) > 0 && len(held) == 0 {
		code = exitcode.Worse(code, exitcode.Negative) // every lease was lost: nothing left to keep alive
	}
	if w.e.json {
		doc := struct {
			Command string          `json:"command"`
			Watch   bool            `json:"watch"`
			Rounds  int             `json:"rounds"`
			Signal  string          `json:"signal,omitempty"`
			Held    []watchHeld     `json:"held"`
			Lost    []resultJSON    `json:"lost"`
			Stats   commit.Snapshot `json:"stats"`
			Exit    int             `json:"exit"`
		}{Command: "renew-batch", Watch: true, Rounds: w.rounds, Held: held, Lost: []resultJSON{}, Stats: snap, Exit: code}
		if doc.Held == nil {
			doc.Held = []watchHeld{}
		}
		if stopped != nil {
			doc.Signal = signalName(stopped)
		}
		for _, r := range w.lost {
			doc.Lost = append(doc.Lost, resultJSON{ID: string(r.ID), Token: r.Item.Token, Reason: r.Outcome.Reason(),
				Detail: leasefmt.Bound(r.Detail), CurrentToken: r.Token, Path: r.Path})
		}
		if err := json.NewEncoder(w.e.out).Encode(doc); err != nil {
			return cli.Exit(fmt.Sprintf("stdout: %v", err), exitcode.IO)
		}
	} else {
		var out bytes.Buffer
		for _, h := range held {
			fmt.Fprintf(&out, "%s %d\n", h.ID, h.Token)
		}
		if w.output != "" {
			if err := replaceFile(w.output, out.Bytes()); err != nil {
				return outputErr(w.output, err)
			}
		} else if _, err := w.e.out.Write(out.Bytes()); err != nil { // one write: one chunk for mpirun to forward
			return cli.Exit(fmt.Sprintf("stdout: %v", err), exitcode.IO)
		}
		why := "every lease lost"
		if stopped != nil {
			why = "stopped by " + signalName(stopped)
		} else if len(w.lost) == 0 {
			why = "nothing to renew"
		}
		fmt.Fprintf(w.e.errw, "lease renew-batch: %s after %d rounds: held=%d lost=%d\n", why, w.rounds, len(held), len(w.lost))
		w.e.printStats("renew-batch", snap)
	}
	if code != exitcode.OK {
		return cli.Exit("", code)
	}
	return nil
}
