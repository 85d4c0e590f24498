package commands

// Streamed batches: lease add, claim (of a candidate list), renew-batch,
// complete, release and verify run a big input in chunks (revoke and retry
// read theirs whole: IDs an operator names, or the table's failed items), so that memory is bounded by a
// chunk, not by the input (docs/design.md#cli). The whole input is read
// and validated first, into an unlinked spool file (spool.go): a
// malformed line anywhere is exit 2 with nothing written. Then each chunk
// is one group commit (every shard directory it touched fsynced) and its
// lines are printed as soon as it is durable. A SIGINT or SIGTERM stops
// the batch after the chunk in flight, with a line on stderr saying how
// far it got, and exits 130 or 143. Under mpirun the batch runs unchunked
// (runDistributed: rank 0 reads the whole input and scatters it).

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// chunkSize is how many items a streamed batch commits at a time: big
// enough that a chunk shares each shard directory's fsync among many
// entries (at the default 256 shards, about 128 each for lease add),
// small enough that its results stay a few megabytes. The commands that
// write records (claim, renew-batch, complete) take half as many: each
// result holds its record, and complete holds two steps' results.
var chunkSize = 1 << 15

// recordChunk is the chunk of the commands that write records.
func recordChunk() int { return max(1, chunkSize/2) }

// streamMemory is the soft memory limit of a streamed batch (see
// runtime/debug.SetMemoryLimit): the garbage collector works harder near
// it, which is cheap next to the batch's fsyncs.
const streamMemory = 40 << 20

// progressDelay is how long a streamed batch runs before --progress auto
// draws its bar: a short run draws nothing.
var progressDelay = time.Second

// streamSpec is what runStream needs beyond a batchSpec.
type streamSpec struct {
	// scan reads and validates the whole input into the spool.
	scan func(c *cli.Context, sp *spool) error
	// unique: a repeated ID is a usage error (ID TOKEN commands).
	unique bool
	// chunk is the number of items of a chunk (default chunkSize).
	chunk int
	// enough, when set, is true once no further chunk should run (claim
	// --first has its N).
	enough func() bool
	// progress is the --progress mode; bar and units its words.
	progress, bar, units string
	// interrupted is the stderr line of a batch stopped by a signal after
	// done of total items, ok of them successful.
	interrupted func(done, total, ok int) string
}

// tokenStream is the streamSpec of a batch of `ID TOKEN` lines without a
// --progress flag of its own (release, verify): a bar only on a terminal,
// after progressDelay.
func tokenStream(cmd, done string) *streamSpec {
	return &streamSpec{progress: "auto", bar: cmd, units: "leases", unique: true, chunk: recordChunk(),
		scan: func(c *cli.Context, sp *spool) error { return spoolInput(c, c.Args().Slice(), formTokens, sp) },
		interrupted: func(n, total, ok int) string {
			return fmt.Sprintf("lease %s: interrupted after %d of %d leases: %d %s (the lines printed); the rest were not tried", cmd, n, total, ok, done)
		}}
}

// runStream runs a batch in chunks from a spool of its input.
func runStream(c *cli.Context, spec batchSpec, ss streamSpec) error {
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	// The heap of a streamed batch is a chunk's results and the input's
	// hashes (8 bytes an item): a soft limit keeps the collector from
	// letting garbage grow to twice that before it runs.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(streamMemory))
	sp, err := newSpool()
	if err != nil {
		return err
	}
	defer sp.close()
	if err := ss.scan(c, sp); err != nil {
		return err
	}
	if err := sp.finish(ss.unique); err != nil {
		return err
	}
	st, err := e.open(false)
	if err != nil {
		return err
	}
	if spec.before != nil {
		spec.before(e, st, sp.distinct)
	}
	flush := bufferedOutput(c, e)
	rep := newReporter(e, spec.name, spec.reportOpts)

	sr := newStreamRun(rep)
	defer sr.stop()
	stopBar := startProgress(c.App.ErrWriter, ss, st, sp.n, &sr.done)
	size := ss.chunk
	if size == 0 {
		size = chunkSize
	}
	err = sp.chunks(size, func(items []commit.Item) bool {
		if sr.signalled() || ss.enough != nil && ss.enough() {
			return false
		}
		return sr.reported(len(items), spec.run(e, st, items))
	})
	stopBar()
	if err != nil {
		flush() // what was reported, as for any other failure
		return err
	}
	if sr.err != nil {
		flush()
		return sr.err
	}
	reported := rep.finish(e.snapshot(st), sr.code())
	if err := flush(); err != nil {
		return err
	}
	if sr.stopped != nil && ss.interrupted != nil {
		fmt.Fprintln(e.errw, leasefmt.Bound(ss.interrupted(int(sr.done.Load()), sp.n, rep.counts[commit.OK])))
	}
	return reported
}

// streamRun is what a streamed batch keeps between its chunks: its report,
// the items done (for the progress bar) and the signal that stops it after
// the chunk in flight.
type streamRun struct {
	rep     *reporter
	sigc    chan os.Signal
	done    atomic.Int64
	stopped os.Signal // the signal that stopped it, if any
	err     error     // the report's failure to write, if any
}

func newStreamRun(rep *reporter) *streamRun {
	r := &streamRun{rep: rep, sigc: make(chan os.Signal, 1)}
	signal.Notify(r.sigc, os.Interrupt, syscall.SIGTERM)
	return r
}

func (r *streamRun) stop() { stopNotify(r.sigc) }

// signalled reports whether a signal has come to stop the batch.
func (r *streamRun) signalled() bool {
	if r.stopped == nil {
		select {
		case r.stopped = <-r.sigc:
		default:
		}
	}
	return r.stopped != nil
}

// reported writes res, the results of n items, and says whether the batch
// goes on: not when the report could not be written or a signal came.
func (r *streamRun) reported(n int, res []commit.Result) bool {
	r.done.Add(int64(n))
	if r.err = r.rep.results(res); r.err != nil {
		return false
	}
	return !r.signalled()
}

// code is the exit status: 128 plus the signal's number when one stopped
// the batch, else the report's.
func (r *streamRun) code() int {
	if r.stopped != nil {
		return 128 + int(r.stopped.(syscall.Signal))
	}
	return r.rep.code()
}

// startProgress draws the bar of a streamed batch of total items on w once
// it has run progressDelay (at once with --progress always), until the
// returned function is called; the bar is then cleared. Within a chunk it
// follows the store's count of items attempted.
func startProgress(w io.Writer, ss streamSpec, st *commit.Store, total int, done *atomic.Int64) func() {
	if total == 0 || !showProgress(ss.progress, w) {
		return func() {}
	}
	delay := progressDelay
	if ss.progress == "always" {
		delay = 0
	}
	base := st.Stats().Attempted.Load()
	at := func() int {
		d := int(done.Load())
		// Attempted runs ahead of done within a chunk, by at most a chunk
		// (complete attempts each item twice: clamp to the chunk).
		return max(d, min(int(st.Stats().Attempted.Load()-base), d+chunkSize, total))
	}
	stop, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-time.After(delay):
		case <-stop:
			return
		}
		bar := newBar(w, total, ss.bar, ss.units)
		bar.RenderBlank()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				bar.Set(at())
			case <-stop:
				finishBar(bar, at())
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-finished
		})
	}
}

func finishBar(bar *progressbar.ProgressBar, n int) {
	bar.Set(n)
	bar.Finish()
}
