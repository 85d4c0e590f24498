package commands

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
)

// The report of a batch command (docs/design.md#cli): stdout carries exactly the lines
// that succeeded, as `ID TOKEN`, in input order; each failure goes to
// stderr as `REASON ID TOKEN detail (path)`; --json prints one document
// with every result and the statistics instead. Work results and group
// results go through the same writer.

// reportOpts adapt the report of a batch command.
type reportOpts struct {
	// code, when set, is the exit status of the results (default: the
	// worst outcome's).
	code func(res []commit.Result) int
	// silent, when set, names results that are not failures and print
	// nothing on stderr (claim --first's passed-over candidates).
	silent func(r commit.Result) bool
	// idOnly prints a success as `ID`, not `ID TOKEN` (lease add).
	idOnly bool
	// queue, when set, is what claim --next found in the queue: in --json
	// as "queue", and with -v on stderr.
	queue *queueJSON
}

// row is one line of a report: a work result, or a group result with the
// group's targets and the targets that refused it.
type row struct {
	commit.Result
	targets []leasefmt.ID
	issues  []commit.TargetIssue
}

func workRows(res []commit.Result) []row {
	rows := make([]row, len(res))
	for i, r := range res {
		rows[i] = row{Result: r}
	}
	return rows
}

func groupRows(res []commit.GroupResult) []row {
	rows := make([]row, len(res))
	for i, g := range res {
		rows[i] = row{Result: commit.Result{Item: g.Item, Outcome: g.Outcome, Token: g.Token, Detail: g.Detail,
			Record: g.Manifest, Path: g.Path, Latency: g.Latency}, issues: g.Issues}
		if g.Manifest != nil {
			rows[i].targets = g.Manifest.Targets
		}
	}
	return rows
}

// worstCode is the exit status of the most serious outcome (docs/design.md#cli).
func worstCode(res []commit.Result) int {
	code := exitcode.OK
	for _, r := range res {
		code = exitcode.Worse(code, exitcode.Of(r.Outcome))
	}
	return code
}

// resultJSON is one item of --json output; targets and issues only for
// groups (id is then the GID and record the manifest).
type resultJSON struct {
	ID           string          `json:"id"`
	Token        int64           `json:"token,omitempty"`
	OK           bool            `json:"ok"`
	Reason       string          `json:"reason"`
	Detail       string          `json:"detail,omitempty"`
	CurrentToken int64           `json:"current_token,omitempty"`
	Path         string          `json:"path"`
	LatencyS     float64         `json:"latency_s,omitempty"`
	Record       json.RawMessage `json:"record,omitempty"`
	Targets      []string        `json:"targets,omitempty"`
	Issues       []issueJSON     `json:"issues,omitempty"`
}

// issueJSON is one target that refused its group, in --json output.
type issueJSON struct {
	Target string `json:"target"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	Path   string `json:"path"`
}

func (r row) json() resultJSON {
	j := resultJSON{ID: string(r.ID), Token: r.Item.Token, OK: r.Outcome == commit.OK, Reason: r.Outcome.Reason(),
		Detail: leasefmt.Bound(r.Detail), CurrentToken: r.Token, Path: r.Path, LatencyS: r.Latency.Seconds()}
	if r.Record != nil {
		if b, err := leasefmt.Encode(r.Record); err == nil {
			j.Record = json.RawMessage(strings.TrimSpace(string(b)))
		}
	}
	for _, t := range r.targets {
		j.Targets = append(j.Targets, string(t))
	}
	for _, is := range r.issues {
		j.Issues = append(j.Issues, issueJSON{Target: string(is.Target), Reason: is.Outcome.Reason(), Detail: leasefmt.Bound(is.Detail), Path: is.Path})
	}
	return j
}

// report prints work results (see reportWith).
func (e *env) report(cmd string, res []commit.Result, snap commit.Snapshot) error {
	return e.reportWith(cmd, res, snap, reportOpts{})
}

// reportWith prints work results as the filter contract says and returns
// the exit status.
func (e *env) reportWith(cmd string, res []commit.Result, snap commit.Snapshot, o reportOpts) error {
	code := worstCode(res)
	if o.code != nil {
		code = o.code(res)
	}
	return e.write(cmd, workRows(res), snap, code, o)
}

// reportGroups prints group results: `GID TOKEN` for each group that
// succeeded; for each other group a stderr line, or one per target that
// refused it when any did.
func (e *env) reportGroups(cmd string, res []commit.GroupResult, snap commit.Snapshot) error {
	rows := groupRows(res)
	code := exitcode.OK
	for _, r := range rows {
		code = exitcode.Worse(code, exitcode.Of(r.Outcome))
	}
	return e.write(cmd, rows, snap, code, reportOpts{})
}

// write reports rows as one chunk of a reporter, with exit status code.
func (e *env) write(cmd string, rows []row, snap commit.Snapshot, code int, o reportOpts) error {
	r := newReporter(e, cmd, o)
	if err := r.rows(rows); err != nil {
		return err
	}
	return r.finish(snap, code)
}

// failLine is the stderr line of a result that did not succeed:
// `REASON ID TOKEN detail (path)`.
func failLine(r commit.Result) string {
	return leasefmt.Bound(fmt.Sprintf("%s %s %s %s (%s)", r.Outcome.Reason(), r.ID, shownToken(r.Item.Token, r.Token), r.Detail, r.Path))
}

// shownToken is the TOKEN of a failure line: the input's token, else the
// token found on disk (claims have no input token), else 0, which no lease
// ever has (tokens start at 1), so the line always parses as ID TOKEN.
func shownToken(input, found int64) string {
	switch {
	case input != 0:
		return strconv.FormatInt(input, 10)
	case found != 0:
		return strconv.FormatInt(found, 10)
	}
	return "0"
}

// printCountsOf prints, with -v, how many results had each reason, in the
// order of the reasons (`ok` first): what a filter passed over silently is
// counted here.
func (e *env) printCountsOf(cmd string, counts map[commit.Outcome]int) {
	var b strings.Builder
	for o := commit.OK; o <= commit.Queued; o++ {
		if counts[o] > 0 {
			fmt.Fprintf(&b, " %s=%d", o.Reason(), counts[o])
		}
	}
	if b.Len() > 0 {
		fmt.Fprintf(e.errw, "lease %s: results%s\n", cmd, b.String())
	}
}

func (e *env) printStats(cmd string, s commit.Snapshot) {
	// The JSON's "renewals" is the count of records each command wrote or
	// checked, which -v calls by the command's own word.
	word := "renewals"
	if d := descriptorOf(cmd); d != nil && d.Records != "" {
		word = d.Records
	}
	fmt.Fprintf(e.errw, "lease %s: batches=%d %s=%d lost=%d failures=%d file_syncs=%d directory_syncs=%d directory_syncs_avoided=%d duration=%.3fs p50=%.2fms p95=%.2fms p99=%.2fms\n",
		cmd, s.Batches, word, s.Renewals, s.Lost, s.Failures, s.FileSyncs, s.DirectorySyncs, s.DirectorySyncsAvoided,
		s.DurationS, s.LatencyP50*1e3, s.LatencyP95*1e3, s.LatencyP99*1e3)
	if s.Retries > 0 {
		fmt.Fprintf(e.errw, "lease %s: retries=%d (transient errors of a network filesystem, each record retried on its own)\n", cmd, s.Retries)
	}
	if s.SparesUsed > 0 {
		fmt.Fprintf(e.errw, "lease %s: spares_used=%d spares_recycled=%d (the filesystem is full: records written through the table's reserve)\n", cmd, s.SparesUsed, s.SparesRecycled)
	}
	if s.Ranks > 0 {
		fmt.Fprintf(e.errw, "lease %s: ranks=%d collective_time=%.6fs\n", cmd, s.Ranks, s.CollectiveS)
	}
}

// reporter writes the report of a batch (the filter contract of
// docs/design.md#cli), the one writer of every command's results: chunk by
// chunk for a streamed batch, in one chunk for the others (env.write). The
// lines of a chunk go out as soon as it is done; with --json one document,
// its results written as they come and the counts, statistics and exit
// status at the end. A full filesystem is said once, at the end
// (nospace.go).
type reporter struct {
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

func newReporter(e *env, cmd string, o reportOpts) *reporter {
	r := &reporter{e: e, cmd: cmd, o: o, w: bufio.NewWriterSize(e.out, 1<<16), ew: bufio.NewWriter(e.errw),
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

// results writes the work results of one chunk.
func (r *reporter) results(res []commit.Result) error { return r.rows(workRows(res)) }

// rows writes the rows of one chunk.
func (r *reporter) rows(rows []row) error {
	if r.n == 0 && len(rows) > 0 {
		res := make([]commit.Result, len(rows))
		for i, x := range rows {
			res[i] = x.Result
		}
		if ae := accessFailure(res); ae != nil {
			r.access = ae
			if !r.e.json {
				return r.e.accessError(r.cmd, ae.Path, ae.Err, true)
			}
		}
	}
	for _, x := range rows {
		r.counts[x.Outcome]++
		if _, ok := r.seen[x.Outcome]; !ok {
			r.seen[x.Outcome] = x.Result
		}
		if r.e.json {
			if r.n > 0 {
				r.w.WriteByte(',')
			}
			r.w.Write(mustJSON(x.json()))
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
		case r.o.silent != nil && r.o.silent(x.Result):
		case outOfSpace(x.Result):
			if r.space == 0 {
				r.spaceFirst = x.Result
			}
			r.space++
		case len(x.issues) == 0:
			fmt.Fprintln(r.ew, failLine(x.Result))
		default: // a group some targets refused: a line for each
			tok := shownToken(x.Item.Token, x.Token)
			for _, is := range x.issues {
				fmt.Fprintln(r.ew, leasefmt.Bound(fmt.Sprintf("%s %s %s target %s: %s (%s)", is.Outcome.Reason(), x.ID, tok, is.Target, is.Detail, is.Path)))
			}
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
func (r *reporter) code() int {
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
func (r *reporter) finish(snap commit.Snapshot, code int) error {
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
