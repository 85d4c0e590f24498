package commands

// Streamed batches: lease add, claim (of a candidate list), renew-batch
// and complete run a big input in chunks, so that memory is bounded by a
// chunk, not by the input (docs/design.md#cli). The whole input is read
// and validated first, into an unlinked spool file (spool.go): a
// malformed line anywhere is exit 2 with nothing written. Then each chunk
// is one group commit (every shard directory it touched fsynced) and its
// lines are printed as soon as it is durable. A SIGINT or SIGTERM stops
// the batch after the chunk in flight, with a line on stderr saying how
// far it got, and exits 130 or 143. Under mpirun the batch runs unchunked
// (runDistributed: rank 0 reads the whole input and scatters it).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
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
	rep := newStreamReport(e, spec.name, spec.reportOpts)

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
	rep     *streamReport
	sigc    chan os.Signal
	done    atomic.Int64
	stopped os.Signal // the signal that stopped it, if any
	err     error     // the report's failure to write, if any
}

func newStreamRun(rep *streamReport) *streamRun {
	r := &streamRun{rep: rep, sigc: make(chan os.Signal, 1)}
	signal.Notify(r.sigc, os.Interrupt, syscall.SIGTERM)
	return r
}

func (r *streamRun) stop() { signal.Stop(r.sigc) }

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
	if r.err = r.rep.chunk(res); r.err != nil {
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

// streamReport writes the report of a batch chunk by chunk, exactly as
// reportWith writes it for the whole batch at once: the lines of a chunk
// as soon as it is done; with --json one document, its results written
// as they come and the counts, statistics and exit status at the end.
type streamReport struct {
	e    *env
	cmd  string
	o    reportOpts
	w    *bufio.Writer
	ew   *bufio.Writer
	n    int
	seen map[commit.Outcome]commit.Result
	// counts of the results by outcome, for -v and --json.
	counts map[commit.Outcome]int
	// space: the results that failed for want of space (said once at the
	// end, nospace.go); the first of them.
	space      int
	spaceFirst commit.Result
	// access: the batch could not start (accessFailure of the first chunk).
	access *commit.AccessError
}

func newStreamReport(e *env, cmd string, o reportOpts) *streamReport {
	r := &streamReport{e: e, cmd: cmd, o: o, w: bufio.NewWriterSize(e.out, 1<<16), ew: bufio.NewWriter(e.errw),
		seen: map[commit.Outcome]commit.Result{}, counts: map[commit.Outcome]int{}}
	if e.json {
		fmt.Fprintf(r.w, "{\"command\":%s,\"results\":[", mustJSON(cmd))
	}
	return r
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the report's own types are encoded
	}
	return b
}

// chunk writes the results of one chunk.
func (r *streamReport) chunk(res []commit.Result) error {
	if r.n == 0 && len(res) > 0 {
		if ae := accessFailure(res); ae != nil {
			r.access = ae
			if !r.e.json {
				return r.e.accessError(r.cmd, ae.Path, ae.Err, true)
			}
		}
	}
	for _, x := range res {
		r.counts[x.Outcome]++
		if _, ok := r.seen[x.Outcome]; !ok {
			r.seen[x.Outcome] = x
		}
		if r.e.json {
			if r.n > 0 {
				r.w.WriteByte(',')
			}
			r.w.Write(mustJSON(row{Result: x}.json()))
			r.n++
			continue
		}
		r.n++
		switch {
		case x.Outcome == commit.OK:
			r.w.WriteString(string(x.ID))
			if !r.o.idOnly {
				r.w.WriteByte(' ')
				r.w.WriteString(strconv.FormatInt(x.Token, 10))
			}
			r.w.WriteByte('\n')
		case r.o.silent != nil && r.o.silent(x):
		case outOfSpace(x):
			if r.space == 0 {
				r.spaceFirst = x
			}
			r.space++
		default:
			fmt.Fprintln(r.ew, failLine(x))
		}
	}
	if err := r.w.Flush(); err != nil {
		return cli.Exit(fmt.Sprintf("lease %s: stdout: %v", r.cmd, err), exitcode.IO)
	}
	r.ew.Flush()
	return nil
}

// code is the exit status of the results so far. Every exit status rule
// of a batch (worstCode, addCode, firstCode, nextCode) depends only on
// which outcomes occur, so one result of each outcome stands for all.
func (r *streamReport) code() int {
	some := make([]commit.Result, 0, len(r.seen))
	for o := commit.OK; o <= commit.Failed; o++ {
		if x, ok := r.seen[o]; ok {
			some = append(some, x)
		}
	}
	if r.o.code != nil {
		return r.o.code(some)
	}
	return worstCode(some)
}

// finish writes the end of the report and returns the exit status code.
func (r *streamReport) finish(snap commit.Snapshot, code int) error {
	if r.access != nil && r.counts[commit.OK] == 0 && code < 128 {
		code = accessExit(r.access.Err) // nothing was written
	}
	if r.e.json {
		counts := map[string]int{}
		for o, n := range r.counts {
			counts[o.Reason()] = n
		}
		fmt.Fprintf(r.w, "],\"stats\":%s,\"counts\":%s", mustJSON(snap), mustJSON(counts))
		if r.o.queue != nil {
			fmt.Fprintf(r.w, ",\"queue\":%s", mustJSON(r.o.queue))
		}
		fmt.Fprintf(r.w, ",\"exit\":%d}\n", code)
		if err := r.w.Flush(); err != nil {
			return cli.Exit(fmt.Sprintf("lease %s: stdout: %v", r.cmd, err), exitcode.IO)
		}
	} else {
		if r.space > 0 {
			if r.space == 1 {
				fmt.Fprintln(r.ew, failLine(r.spaceFirst))
			}
			fmt.Fprintln(r.ew, r.e.spaceLine(r.cmd, r.space, r.n, r.spaceFirst))
		}
		r.ew.Flush()
		if r.e.verbose {
			r.e.printStats(r.cmd, snap)
			r.e.printCountsOf(r.cmd, r.counts)
			if q := r.o.queue; q != nil {
				fmt.Fprintf(r.e.errw, "lease %s: queue answer=%s held=%d cleaned=%d foreign=%d entries_read=%d shards_read=%d tries=%d waited=%.3fs\n",
					r.cmd, q.Answer, q.Held, q.Cleaned, q.Foreign, q.Read, q.Shards, q.Tries, q.WaitedS)
			}
		}
	}
	if code != exitcode.OK {
		return cli.Exit("", code)
	}
	return nil
}
