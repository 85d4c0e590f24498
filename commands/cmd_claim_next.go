package commands

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/internal/worker"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// claim --next N [--wait [SECONDS]]: claim from the table's own queue
// (docs/design.md#queue, #cli), without a candidate list.

// queueJSON is what claim --next found, in --json output.
type queueJSON struct {
	// Answer is granted, empty (nothing left: every queued item is done),
	// busy (items remain, all held) or blocked (items remain, none
	// claimable for an error of its record).
	Answer  string  `json:"answer"`
	Held    int     `json:"held"`
	Cleaned int     `json:"cleaned"`
	Foreign int     `json:"foreign"`
	Read    int     `json:"entries_read"`
	Shards  int     `json:"shards_read"`
	Tries   int     `json:"tries"`
	WaitedS float64 `json:"waited_s"`
}

// nextClaim is the outcome of claiming from the queue, with --wait's
// retries: the last try's results and answer, the counts of every try.
type nextClaim struct {
	commit.Next
	q queueJSON
	// started is when the last try began: a lease it granted counts as
	// lost from there (its expires_at - clock_skew), not from before the
	// wait.
	started time.Time
}

// claimNext claims up to n items of the queue; with wait, a busy queue is
// tried again with backoff until an item is granted, the queue is empty,
// the deadline passes, ctx is done or a signal (SIGINT, SIGTERM) comes.
func claimNext(ctx context.Context, e *env, st *commit.Store, n int, wait bool, deadline time.Time) nextClaim {
	return claimNextEach(ctx, e, st, n, wait, deadline, nil)
}

// claimNextEach is claimNext handing the items granted to each, a chunk at
// a time, as soon as each chunk is durable (worker.ClaimNextEach).
func claimNextEach(ctx context.Context, e *env, st *commit.Store, n int, wait bool, deadline time.Time, each func([]commit.Result) bool) nextClaim {
	if wait {
		sctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		ctx = sctx
	}
	chunk := 0
	if each != nil {
		chunk = recordChunk()
	}
	var o *worker.Outage
	if wait {
		// A waiting claimer waits out a table that cannot be written as
		// well (lease work does the same), up to max_wait.
		o = e.outage("lease " + e.c.Command.Name)
		if e.c.Command.Name == "run" {
			// lease run --next --wait runs CMD on what it claims: no
			// claim while the table's filesystem has no room
			// (worker.NoRoom), as lease work.
			o.Room = st.Root()
		}
	}
	cl := worker.ClaimNextEach(ctx, st, worker.NewRand(), n, e.set.Owner, e.set.TTL, wait, deadline, chunk, each, o)
	out := nextClaim{Next: cl.Next, started: cl.Started}
	out.q = queueJSON{Answer: cl.Answer.String(), Held: cl.Held, Cleaned: cl.Cleaned, Foreign: cl.Foreign,
		Read: cl.Read, Shards: cl.Shards, Tries: cl.Tries, WaitedS: cl.Waited.Seconds()}
	return out
}

// outage is the wait of a worker (who: "lease work") for a table that
// cannot be written: its messages on stderr, bounded by max_wait.
func (e *env) outage(who string) *worker.Outage {
	return &worker.Outage{MaxWait: seconds(e.set.MaxWait), Say: func(msg string) {
		fmt.Fprintln(e.errw, leasefmt.Bound(who+": "+msg))
	}}
}

// runClaimNext is lease claim --next.
func runClaimNext(c *cli.Context, n int) error {
	if n < 1 {
		return usageErr("--next %d: want at least 1", n)
	}
	if c.IsSet("first") {
		return usageErr("--next and --first exclude each other: --next claims from the queue, --first from a candidate list")
	}
	if l := launch(); l.Distributed() {
		return usageErr("claim --next %s", aloneMessage(true, l))
	}
	wait, deadline, rest, err := waiting(c, c.Args().Slice(), true)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErr("claim --next takes no IDs (it claims from the queue); got %s: to claim named items use lease claim ID...", leasefmt.Quote(rest[0]))
	}
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	st, err := e.open(false)
	if err != nil {
		return err
	}
	// The grants are printed a chunk at a time, each as soon as it is
	// durable (stream.go); a signal stops the claim after the chunk in
	// flight. Only a try that grants something calls each, so the signal
	// that ends a --wait before anything was granted still ends it busy.
	var q queueJSON
	o := reportOpts{queue: &q}
	rep := newReporter(e, "claim", o)
	sr := newStreamRun(rep)
	defer sr.stop()
	stopBar := startProgress(e.errw, streamSpec{progress: c.String("progress"), bar: "claiming", units: "items"}, st, n, &sr.done)
	nx := claimNextEach(c.Context, e, st, n, wait, deadline, func(granted []commit.Result) bool {
		return sr.reported(len(granted), granted)
	})
	stopBar()
	if sr.err != nil {
		return sr.err
	}
	q = nx.q
	if !e.json {
		if msg := answerLine(st, nx); msg != "" {
			fmt.Fprintln(e.errw, msg)
		}
	}
	if err := rep.results(nx.Results); err != nil {
		return err
	}
	rep.o.code = nextCode(nx.Answer)
	reported := rep.finish(e.snapshot(st), sr.code())
	if sr.stopped != nil {
		fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease claim: interrupted after %d granted of --next %d (the lines printed, each durable); the rest were not claimed", sr.done.Load(), n)))
	}
	return reported
}

// answerLine is the stderr line of a claim that got nothing: it starts
// with the answer word, so that a script can tell "stop" from "wait".
func answerLine(st *commit.Store, nx nextClaim) string {
	q := st.Abs(layout.QueueDir)
	switch nx.Answer {
	case commit.Empty:
		return fmt.Sprintf("empty: nothing left to do: every queued item is done (%s)", q)
	case commit.Busy:
		msg := fmt.Sprintf("busy: %d queued items met, all held", nx.Held)
		if nx.ReadLocked > 0 {
			msg = fmt.Sprintf("busy: %d queued items met held, %d more behind a read lock that no lease takes (lease fsck names it)", nx.Held, nx.ReadLocked)
		}
		if nx.Expiring > 0 {
			if d := nx.Expiring - st.Now(); d > 0 {
				msg += fmt.Sprintf("; the first may be free in %s", humanSeconds(d))
			} else {
				msg += "; one may be free now"
			}
		}
		return msg + " (use --wait to wait for one) (" + q + ")"
	}
	return ""
}

// nextCode is the exit status of claim --next: 0 when it got at least one
// (lease-claim(1): what it printed is held; an I/O error that stopped it
// all the same is reported on stderr); 1 when the queue is empty or busy;
// else the most serious outcome of the records that blocked it, 4 for an
// I/O error (a full or read-only filesystem included).
func nextCode(a commit.Answer) func(res []commit.Result) int {
	return func(res []commit.Result) int {
		code := exitcode.OK
		for _, r := range res {
			if r.Outcome == commit.OK {
				return exitcode.OK
			}
		}
		for _, r := range res {
			if r.Outcome == commit.IOError || a == commit.Blocked {
				code = exitcode.Worse(code, exitcode.Of(r.Outcome))
			}
		}
		switch a {
		case commit.Empty, commit.Busy:
			code = exitcode.Worse(code, exitcode.Negative)
		}
		return code
	}
}

// humanSeconds renders a duration in seconds as people read it: 950ms,
// 41s, 2m3s, 1h2m.
func humanSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}
