package commands

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/config"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/mpi"
)

var renewBatchCommand = &cli.Command{
	Name:      "renew-batch",
	Usage:     "renew held leases with one shard group commit; a filter over ID TOKEN lines",
	ArgsUsage: "[FILE...]",
	Description: "Reads `ID TOKEN` lines from the FILEs or stdin, validates all of them, then renews every\n" +
		"lease whose token is current and live (not within clock_skew of its expiry) until now + --ttl,\n" +
		"or, without --ttl, for the lease's own duration (expires_at - renewed_at), the clock read\n" +
		"while each record's lock is held. A renewal whose lease is over by the time it is durable is\n" +
		"reported `expired`. Records are written in (shard, ID)\n" +
		"order by a pool of concurrent writers: each record is written to a temp file, fsynced and\n" +
		"renamed over the old one, and each touched shard directory is fsynced once. stdout carries\n" +
		"exactly the lines renewed, in input order, so `lease renew-batch < held > held.new` keeps the\n" +
		"held set current; each other line goes to stderr as `REASON ID TOKEN detail`. While it runs,\n" +
		"a progress bar goes to stderr when stderr is a terminal, and is cleared at the end (--progress\n" +
		"always|never overrides; no bar with --watch or under mpirun).\n" +
		"\n" +
		"With --watch it keeps the leases alive like `etcdctl lease keep-alive`: one round every\n" +
		"renewal interval (--interval) until SIGINT, SIGTERM, SIGHUP or SIGUSR1. Each round re-reads\n" +
		"the FILEs, so a wrapper can append `ID TOKEN` lines for new claims (stdin is read once); a\n" +
		"last line without its newline is taken once it is whole and unchanged for a round. A lease\n" +
		"that is lost (stale token, expired, released, done, missing) is reported on stderr as it\n" +
		"happens and dropped from later rounds; a failure that may pass (lock timeout, I/O error,\n" +
		"corrupt record) is reported and retried until the lease's own expiry. Nothing is printed on\n" +
		"stdout while it runs; when it stops (also on a signal that arrived during the first round,\n" +
		"which always runs to its end) it prints the lines it still holds, in input order, each\n" +
		"checked once more as lease verify does (one completed or released since is reported lost), so\n" +
		"`lease renew-batch --watch held > held.new` works, and statistics on stderr (with -v also\n" +
		"after every round). Lines that are malformed or duplicate in the first round are a usage\n" +
		"error (exit 2, nothing written); in later rounds they are reported once and skipped, and of\n" +
		"two lines with the same ID the larger token is kept. Record locks are waited for at most\n" +
		"ttl - interval, so that a renewal cannot land after the expiry it was meant to prevent; --now\n" +
		"is refused with --watch. With stdin as the only input, it stops by itself once every lease\n" +
		"is lost.\n" +
		"\n" +
		"Under mpirun (built with MPI support) one renew-batch runs as one program: rank 0 reads the\n" +
		"input and broadcasts it, each rank renews the shards s with s % size == rank, and rank 0\n" +
		"prints the results exactly as one process would; every rank exits with the same status.\n" +
		"With --watch the ranks agree at the start of every round whether to stop, so a signal to any\n" +
		"rank stops them all after the round in progress; stop a watch under mpirun with\n" +
		"`kill -USR1 MPIRUN_PID` (mpirun forwards SIGUSR1 to every rank; SIGTERM makes mpirun abort\n" +
		"the job and exit non-zero). The renewal interval must be less than mpi_timeout.",
	Flags: flags(commonFlags(), batchFlags(), []cli.Flag{
		&cli.BoolFlag{Name: "watch", Usage: "renew every renewal interval until SIGINT/SIGTERM/SIGHUP/SIGUSR1, re-reading the FILEs each round; print the lines still held at the end"},
		settingFlag("interval"),
		&cli.StringFlag{Name: "progress", Value: "auto", Usage: "progress bar on stderr: auto (when stderr is a terminal), always, never; not with --watch or under mpirun"},
	}),
	Action: runRenewBatch,
}

func runRenewBatch(c *cli.Context) error {
	mode := c.String("progress")
	if err := checkProgress(mode); err != nil {
		return usageErr("%v", err)
	}
	if c.Bool("watch") {
		return runWatch(c)
	}
	if c.IsSet("interval") {
		return usageErr("--interval applies only with --watch")
	}
	return runBatch(c, batchSpec{name: "renew-batch", kind: leasefmt.Work, spread: true, input: tokenLines,
		run: func(e *env, st *commit.Store, items []commit.Item) []commit.Result {
			defer renewProgress(c.App.ErrWriter, mode, st, len(items))()
			return st.Renew(items, e.renewTTL())
		}})
}

// renewProgress draws a progress bar of a renew batch on w, from the
// store's count of attempted items, until the returned function is called;
// the bar is then cleared. Only for one process: under mpirun each rank
// renews a share, and their bars would interleave on one terminal.
func renewProgress(w io.Writer, mode string, st *commit.Store, total int) func() {
	if size, _, ok := mpi.Launched(); (ok && size > 1) || total == 0 || !showProgress(mode, w) {
		return func() {}
	}
	base := st.Stats.Attempted.Load()
	bar := newBar(w, total, "renewing", "leases")
	bar.RenderBlank() // at once, not only after the first tick: the batch may end before it
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				bar.Set(int(st.Stats.Attempted.Load() - base))
			case <-stop:
				bar.Set(int(st.Stats.Attempted.Load() - base))
				bar.Finish()
				return
			}
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

// lostOutcome: the lease is gone for good (a negative answer, exit 1),
// unlike a lock timeout, an I/O error or a corrupt record, which may pass.
func lostOutcome(o commit.Outcome) bool { return o != commit.OK && o.Exit() == 1 }

// failLine is the stderr line of a result that did not succeed:
// `REASON ID TOKEN detail (path)`, as the batch filters print it.
func failLine(r commit.Result) string {
	tok := "-"
	if r.Item.Token != 0 {
		tok = fmt.Sprint(r.Item.Token)
	} else if r.Token != 0 {
		tok = fmt.Sprint(r.Token)
	}
	return leasefmt.Bound(fmt.Sprintf("%s %s %s %s (%s)", r.Outcome.Reason(), r.ID, tok, r.Detail, r.Path))
}

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

// watchLease is what --watch knows about one held lease.
type watchLease struct {
	expires float64 // expires_at of the last renewal that succeeded, 0 before any
	seen    float64 // when it was first read
	ok      bool    // the last round renewed it
}

// watcher is the state of renew-batch --watch.
type watcher struct {
	e         *env
	st        *commit.Store
	sources   []*watchSource
	stdinOnly bool
	leases    map[commit.Item]*watchLease
	dropped   map[commit.Item]bool
	warned    map[string]bool
	order     []commit.Item // the items of the last round, in input order
	rounds    int
	lost      []commit.Result
	code      int // worst status of the last round's failures that may pass

	// renew renews one round's items: one group commit here, a collective
	// round under mpirun.
	renew func(items []commit.Item) []commit.Result
	// agreeStop turns this process's wish to stop into the job's decision.
	agreeStop func(stop bool) (bool, error)
}

func runWatch(c *cli.Context) error {
	// Signals are caught from the start: one that arrives while the input
	// is read or the first round runs stops the watch after that round,
	// which still prints the held set.
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, watchSignals...)
	defer signal.Stop(sigc)
	if size, _, ok := mpi.Launched(); ok && size > 1 {
		if !mpi.Compiled {
			return usageErr("started by mpirun as %d ranks, but this lease was built without MPI support: build it with `make` (Open MPI installed) or `go build -tags mpi`", size)
		}
		return runWatchDistributed(c, sigc)
	}
	w, items, err := newWatcher(c)
	if err != nil {
		return err
	}
	w.renew = func(items []commit.Item) []commit.Result { return w.st.Renew(items, w.e.renewTTL()) }
	w.agreeStop = func(stop bool) (bool, error) { return stop, nil }
	stopped, err := w.loop(items, sigc)
	if err != nil {
		return err
	}
	return w.finish(stopped, w.e.snapshot(w.st))
}

// watchSettings refuses settings under which a renewal cannot arrive in
// time: a fixed clock, and under mpirun an interval the collectives'
// watchdog would not wait for (interval >= ttl is refused by LoadSettings).
func watchSettings(c *cli.Context, e *env, ranks int) error {
	if c.IsSet("now") {
		return usageErr("--now cannot be used with --watch: renewals follow the system clock")
	}
	if err := e.set.CheckRenewInterval(); err != nil {
		return err
	}
	if ranks > 1 && e.set.MPITimeout > 0 && e.set.RenewInterval >= e.set.MPITimeout {
		return usageErr("renew_interval %g (%s) must be less than mpi_timeout %g (%s): ranks wait for each other once per round",
			e.set.RenewInterval, e.set.Origin("renew_interval"), e.set.MPITimeout, e.set.Origin("mpi_timeout"))
	}
	return nil
}

// newWatcher reads the inputs, validates the first round whole and opens
// the table.
func newWatcher(c *cli.Context) (*watcher, []commit.Item, error) {
	e, err := newEnv(c)
	if err != nil {
		return nil, nil, err
	}
	size, _, _ := mpi.Launched()
	if err := watchSettings(c, e, size); err != nil {
		return nil, nil, err
	}
	w := &watcher{e: e, stdinOnly: true, leases: map[commit.Item]*watchLease{}, dropped: map[commit.Item]bool{}, warned: map[string]bool{}}
	args := c.Args().Slice()
	if len(args) == 0 {
		args = []string{"-"}
	}
	for _, a := range args {
		src := &watchSource{name: a, stdin: a == "-"}
		if src.stdin {
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
	st, err := e.open(false)
	if err != nil {
		return nil, nil, err
	}
	st.LockTimeout = renewLockTimeout(e.set)
	w.st = st
	return w, items, nil
}

// watchTicker paces the rounds: one every renewal interval (at once when a
// round took longer), interrupted by SIGINT, SIGTERM or SIGHUP.
type watchTicker struct {
	sigc     chan os.Signal
	next     time.Time
	interval time.Duration
	stopped  os.Signal
}

func newWatchTicker(interval float64, sigc chan os.Signal) *watchTicker {
	return &watchTicker{sigc: sigc, next: time.Now(), interval: seconds(interval)}
}

// wait waits for the next round; it returns at once after a signal.
func (t *watchTicker) wait() {
	t.next = t.next.Add(t.interval)
	if now := time.Now(); t.next.Before(now) {
		t.next = now
	}
	if t.stopped != nil {
		return
	}
	select {
	case t.stopped = <-t.sigc:
	case <-time.After(time.Until(t.next)):
	}
}

// signalled reports a signal received so far, without waiting.
func (t *watchTicker) signalled() bool {
	if t.stopped == nil {
		select {
		case t.stopped = <-t.sigc:
		default:
		}
	}
	return t.stopped != nil
}

// loop runs rounds until the job agrees to stop: after a signal, or with
// stdin as the only input once nothing is left to renew. The first round
// always runs, so that what is printed at the end was checked.
func (w *watcher) loop(items []commit.Item, sigc chan os.Signal) (os.Signal, error) {
	t := newWatchTicker(w.e.set.RenewInterval, sigc)
	for {
		done := w.stdinOnly && w.rounds > 0 && len(w.order) == 0
		stop, err := w.agreeStop(w.rounds > 0 && (t.signalled() || done))
		if err != nil {
			return t.stopped, err
		}
		if stop {
			return t.stopped, nil
		}
		w.round(items)
		t.wait()
		items = w.reread()
	}
}

// readFile reads a FILE source. The first read must succeed; later a file
// that went away keeps its last lines (with a warning).
func (w *watcher) readFile(src *watchSource, first bool) error {
	data, err := os.ReadFile(src.name)
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
			if w.dropped[it] {
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

// round renews items once and reports what was lost.
func (w *watcher) round(items []commit.Item) {
	w.rounds++
	w.order = items
	w.code = 0
	if len(items) == 0 {
		return
	}
	started := time.Now()
	now := w.e.clock()
	res := w.renew(items)
	renewed, lost, failed := 0, 0, 0
	kept := items[:0:0]
	for _, r := range res {
		l := w.leases[r.Item]
		if l == nil {
			l = &watchLease{seen: now}
			w.leases[r.Item] = l
		}
		switch {
		case r.Outcome == commit.OK:
			renewed++
			l.ok, l.expires = true, r.Record.ExpiresAt
		case lostOutcome(r.Outcome):
			lost++
			w.drop(r)
			continue
		default:
			failed++
			l.ok = false
			// It may pass, but not past the lease's own expiry (or, never
			// renewed here, one TTL after it was first read).
			end := l.expires - w.e.set.ClockSkew
			if l.expires == 0 {
				end = l.seen + w.e.set.TTL - w.e.set.ClockSkew
			}
			if w.e.clock() >= end {
				lost++
				r.Detail = fmt.Sprintf("%s; not renewed before its expiry, dropped", r.Detail)
				w.drop(r)
				continue
			}
			w.code = commit.Worse(w.code, r.Outcome.Exit())
			fmt.Fprintln(w.e.errw, failLine(r)+" (will retry)")
		}
		kept = append(kept, r.Item)
	}
	w.order = kept
	if w.e.verbose {
		fmt.Fprintf(w.e.errw, "lease renew-batch: round %d: renewed=%d lost=%d failures=%d held=%d time=%.3fs\n",
			w.rounds, renewed, lost, failed, renewed, time.Since(started).Seconds())
	}
}

func (w *watcher) drop(r commit.Result) {
	w.dropped[r.Item] = true
	delete(w.leases, r.Item)
	w.lost = append(w.lost, r)
	fmt.Fprintln(w.e.errw, failLine(r))
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
	var candidates []commit.Item
	for _, it := range w.order {
		if l := w.leases[it]; l != nil && l.ok {
			candidates = append(candidates, it)
		}
	}
	var held []watchHeld
	for _, r := range w.st.Verify(candidates) {
		switch {
		case r.Outcome == commit.OK:
			held = append(held, watchHeld{string(r.ID), r.Item.Token, r.Record.ExpiresAt})
		case lostOutcome(r.Outcome):
			w.drop(r)
		default: // cannot tell now: kept, so that the held set loses no lease
			fmt.Fprintln(w.e.errw, failLine(r)+" (kept: the last round renewed it)")
			held = append(held, watchHeld{string(r.ID), r.Item.Token, w.leases[r.Item].expires})
		}
	}
	code := w.code
	if stopped == nil && w.stdinOnly && len(w.lost) > 0 && len(held) == 0 {
		code = commit.Worse(code, 1) // every lease was lost: nothing left to keep alive
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
			return cli.Exit(fmt.Sprintf("stdout: %v", err), 4)
		}
	} else {
		out := bufio.NewWriter(w.e.out)
		for _, h := range held {
			fmt.Fprintf(out, "%s %d\n", h.ID, h.Token)
		}
		if err := out.Flush(); err != nil {
			return cli.Exit(fmt.Sprintf("stdout: %v", err), 4)
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
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// ---- under mpirun ----

// watchPlan is what rank 0 broadcasts each round.
type watchPlan struct {
	Items []commit.Item `json:"items"`
}

// watchResult is one rank's result for item I of a round.
type watchResult struct {
	I int            `json:"i"`
	O commit.Outcome `json:"o"`
	T int64          `json:"t,omitempty"`
	D string         `json:"d,omitempty"`
	P string         `json:"p"`
	E float64        `json:"e,omitempty"` // expires_at as renewed
}

// watchStats is one rank's statistics at the end.
type watchStats struct {
	Stats commit.Snapshot `json:"stats"`
	Lat   []float64       `json:"lat"`
}

// watchErr carries a setup error between ranks.
type watchErr struct {
	Err  string `json:"err,omitempty"`
	Code int    `json:"code,omitempty"`
}

// runWatchDistributed runs --watch as one program across the ranks of an
// mpirun job (SPEC §8): rank 0 reads the inputs and broadcasts each round's
// items, every rank renews the shards s with s % size == rank, rank 0
// gathers the results and reports exactly as one process would. Each round
// begins with the ranks agreeing whether to stop (a signal on any rank
// stops them all), and every rank exits with rank 0's status. A collective
// that does not complete within mpi_timeout aborts the job (exit 4).
func runWatchDistributed(c *cli.Context, sigc chan os.Signal) error {
	e, setErr := newEnv(c)
	timeout := time.Duration(config.DefaultMPITimeout * float64(time.Second))
	if setErr == nil {
		timeout = seconds(e.set.MPITimeout)
	}
	world, err := mpi.Init(timeout)
	if err != nil {
		return cli.Exit(leasefmt.Bound(fmt.Sprintf("mpi: %v", err)), 4)
	}
	defer world.Finalize()
	rank0 := world.Rank() == 0
	var w *watcher
	var items []commit.Item
	var st *commit.Store
	if setErr == nil && rank0 {
		if w, items, setErr = newWatcher(c); setErr == nil {
			st = w.st
		}
	}
	// Only rank 0 may create the table: a rank whose root is missing must
	// fail, not make a second, empty table. The others open it after rank 0.
	world.Barrier()
	if setErr == nil && !rank0 {
		if setErr = watchSettings(c, e, world.Size()); setErr == nil {
			if st, setErr = e.open(false); setErr == nil {
				st.LockTimeout = renewLockTimeout(e.set)
			}
		}
	}
	quiet := func(code int) error {
		if code == 0 {
			return nil
		}
		return cli.Exit("", code)
	}
	if agreed := watchAgree(world, setErr); agreed != nil {
		if rank0 {
			return agreed
		}
		return quiet(agreed.(cli.ExitCoder).ExitCode())
	}
	if !rank0 {
		return quiet(watchFollow(world, e, st, sigc))
	}
	w.agreeStop = func(stop bool) (bool, error) {
		v := 0
		if stop {
			v = 1
		}
		n, err := world.AllMaxInt(v)
		return n > 0, err
	}
	w.renew = func(items []commit.Item) []commit.Result {
		res, err := watchCollectiveRound(world, e, st, watchPlan{Items: items})
		if err != nil {
			res = make([]commit.Result, len(items))
			for i, it := range items {
				res[i] = commit.Result{Item: it, Outcome: commit.IOError, Detail: leasefmt.Bound("mpi: " + err.Error())}
			}
		}
		return res
	}
	stopped, loopErr := w.loop(items, sigc)
	if loopErr != nil {
		return cli.Exit(leasefmt.Bound("mpi: "+loopErr.Error()), 4)
	}
	snap, err := watchGatherStats(world, e, st)
	if err != nil {
		return cli.Exit(leasefmt.Bound("mpi: "+err.Error()), 4)
	}
	reported := w.finish(stopped, snap)
	code := 0
	var ec cli.ExitCoder
	if errors.As(reported, &ec) {
		code = ec.ExitCode()
	}
	world.Bcast(0, []byte(strconv.Itoa(code)))
	return reported
}

// watchAgree makes every rank see the first failing rank's setup error.
func watchAgree(world *mpi.World, err error) error {
	var mine watchErr
	if err != nil {
		mine = watchErr{Err: err.Error(), Code: 1}
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			mine.Code = ec.ExitCode()
		}
	}
	b, _ := json.Marshal(mine)
	all, cerr := world.AllGather(b)
	if cerr != nil {
		return cli.Exit(leasefmt.Bound("mpi: "+cerr.Error()), 4)
	}
	for r, raw := range all {
		var we watchErr
		if json.Unmarshal(raw, &we) != nil {
			return cli.Exit(fmt.Sprintf("mpi: rank %d sent a malformed message", r), 4)
		}
		if we.Code != 0 {
			return cli.Exit(leasefmt.Bound(fmt.Sprintf("rank %d of %d: %s", r, world.Size(), we.Err)), we.Code)
		}
	}
	return nil
}

// watchFollow is the loop of a rank other than 0: it mirrors rank 0's
// collectives round by round and returns the agreed exit status.
func watchFollow(world *mpi.World, e *env, st *commit.Store, sigc chan os.Signal) int {
	t := newWatchTicker(e.set.RenewInterval, sigc)
	for rounds := 0; ; rounds++ {
		v := 0
		if rounds > 0 && t.signalled() {
			v = 1
		}
		n, err := world.AllMaxInt(v)
		if err != nil {
			return 4
		}
		if n > 0 {
			break
		}
		if _, err := watchCollectiveRound(world, e, st, watchPlan{}); err != nil {
			return 4
		}
		t.wait()
	}
	if _, err := watchGatherStats(world, e, st); err != nil {
		return 4
	}
	b, err := world.Bcast(0, nil)
	if err != nil {
		return 4
	}
	code, err := strconv.Atoi(string(b))
	if err != nil {
		return 4
	}
	return code
}

// watchCollectiveRound runs one round on every rank: rank 0's plan is
// broadcast, each rank renews its shards, and rank 0 gets the results in
// plan order (nil elsewhere). An I/O error on any rank fails the whole
// round (G6 across ranks).
func watchCollectiveRound(world *mpi.World, e *env, st *commit.Store, plan watchPlan) ([]commit.Result, error) {
	b, _ := json.Marshal(plan)
	b, err := world.Bcast(0, b)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &plan); err != nil {
		return nil, fmt.Errorf("malformed round broadcast: %v", err)
	}
	n := st.Table.Shards(leasefmt.Work)
	var mine []commit.Item
	var index []int
	for i, it := range plan.Items {
		if it.ID.Shard(n)%world.Size() == world.Rank() {
			mine = append(mine, it)
			index = append(index, i)
		}
	}
	var out []watchResult
	if len(mine) > 0 {
		for j, r := range st.Renew(mine, e.renewTTL()) {
			wr := watchResult{I: index[j], O: r.Outcome, T: r.Token, D: r.Detail, P: r.Path}
			if r.Outcome == commit.OK {
				wr.E = r.Record.ExpiresAt
			}
			out = append(out, wr)
		}
	}
	b, _ = json.Marshal(out)
	parts, err := world.Gather(0, b)
	if err != nil || world.Rank() != 0 {
		return nil, err
	}
	res := make([]commit.Result, len(plan.Items))
	filled := make([]bool, len(plan.Items))
	ioErr := ""
	for r, p := range parts {
		var rs []watchResult
		if err := json.Unmarshal(p, &rs); err != nil {
			return nil, fmt.Errorf("rank %d sent malformed results", r)
		}
		for _, x := range rs {
			if x.I < 0 || x.I >= len(res) {
				continue
			}
			res[x.I] = commit.Result{Item: plan.Items[x.I], Outcome: x.O, Token: x.T, Detail: x.D, Path: x.P}
			if x.O == commit.OK {
				it := plan.Items[x.I]
				res[x.I].Record = &leasefmt.Record{Kind: leasefmt.Work, ID: it.ID, Token: x.T, Status: leasefmt.Leased, ExpiresAt: x.E}
			}
			filled[x.I] = true
			if x.O == commit.IOError && ioErr == "" {
				ioErr = x.D
			}
		}
	}
	for i := range res {
		if !filled[i] {
			res[i] = commit.Result{Item: plan.Items[i], Outcome: commit.IOError, Detail: "no rank reported this item"}
			if ioErr == "" {
				ioErr = res[i].Detail
			}
		}
	}
	if ioErr != "" {
		for i := range res {
			if res[i].Outcome == commit.OK {
				res[i].Outcome, res[i].Detail = commit.IOError, leasefmt.Bound("round failed on another rank, not renewed: "+ioErr)
			}
		}
	}
	return res, nil
}

// watchGatherStats sums every rank's statistics on rank 0.
func watchGatherStats(world *mpi.World, e *env, st *commit.Store) (commit.Snapshot, error) {
	snap := e.snapshot(st)
	b, _ := json.Marshal(watchStats{Stats: snap, Lat: snap.Latencies})
	parts, err := world.Gather(0, b)
	if err != nil || world.Rank() != 0 {
		return snap, err
	}
	var total commit.Snapshot
	for r, p := range parts {
		var ws watchStats
		if err := json.Unmarshal(p, &ws); err != nil {
			return snap, fmt.Errorf("rank %d sent malformed statistics", r)
		}
		ws.Stats.Latencies = ws.Lat
		if r == 0 {
			total = ws.Stats
		} else {
			total.Add(ws.Stats)
		}
	}
	total.Ranks = world.Size()
	return total, nil
}
