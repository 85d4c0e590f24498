package commands

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/config"
	"github.com/leasetool/lease/leasefmt"
)

// getenv is os.Getenv, replaced in tests.
var getenv = os.Getenv

// usageErr is an error that exits 2: usage, configuration or input.
func usageErr(format string, args ...any) error {
	return cli.Exit(leasefmt.Bound(fmt.Sprintf(format, args...)), 2)
}

// env is what an action works with: its settings, its clock and its output.
type env struct {
	c       *cli.Context
	set     *config.Settings
	now     float64
	json    bool
	verbose bool
	out     io.Writer
	errw    io.Writer
	started time.Time
}

func newEnv(c *cli.Context) (*env, error) {
	set, err := config.Load(c, getenv)
	if err != nil {
		return nil, cli.Exit(err.Error(), 2)
	}
	e := &env{c: c, set: set, json: c.Bool("json"), verbose: c.Bool("verbose"),
		out: c.App.Writer, errw: c.App.ErrWriter, started: time.Now()}
	if c.IsSet("now") {
		e.now = c.Float64("now")
		if err := leasefmt.CheckTime("--now", e.now); err != nil {
			return nil, usageErr("%v", err)
		}
	} else {
		e.now = float64(time.Now().UnixMicro()) / 1e6
	}
	return e, nil
}

// clock is the time now: the --now clock when given, else the system's.
func (e *env) clock() float64 {
	if e.c.IsSet("now") {
		return e.now
	}
	return commit.SystemClock()
}

// storeClock is the clock a store reads under each record's lock.
func (e *env) storeClock() func() float64 {
	if e.c.IsSet("now") {
		return commit.FixedClock(e.now)
	}
	return commit.SystemClock
}

// renewTTL is the duration a renewal gives: --ttl (or LEASE_TTL) when
// given, else 0, which keeps each lease's own duration (SPEC §6).
func (e *env) renewTTL() float64 {
	if e.set.FromCommandLine("ttl") {
		return e.set.TTL
	}
	return 0
}

// root is the absolute table root.
func (e *env) root() string {
	r, err := filepath.Abs(e.set.Root)
	if err != nil {
		return e.set.Root
	}
	return r
}

// open opens the table. Only lease init creates one (create): every other
// command refuses a root without TABLE and creates nothing there (SPEC §2),
// so a mistyped root or an unset LEASE_ROOT never starts a second campaign.
func (e *env) open(create bool) (*commit.Store, error) {
	root := e.root()
	if create {
		if err := commit.MkdirRoot(root); err != nil {
			return nil, cli.Exit(leasefmt.Bound(fmt.Sprintf("table root %s: %v", root, err)), 4)
		}
	}
	f, err := commit.OS(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, noTable(root)
		}
		return nil, cli.Exit(leasefmt.Bound(fmt.Sprintf("table root %s: %v", root, err)), 4)
	}
	var tmpl *leasefmt.Table
	if create {
		tmpl = &leasefmt.Table{WorkShards: e.set.Shards, TargetShards: e.set.TargetShards, CreatedAt: e.now}
	}
	var fsys commit.FS = f
	if wrapFS != nil {
		fsys = wrapFS(f)
	}
	st, err := commit.Open(root, fsys, tmpl)
	if err != nil {
		f.Close()
		switch {
		case errors.Is(err, commit.ErrNoTable):
			return nil, noTable(root)
		case errors.Is(err, leasefmt.ErrCorrupt):
			return nil, cli.Exit(leasefmt.Bound(fmt.Sprintf("%v (lease fsck checks the table)", err)), 3)
		}
		return nil, cli.Exit(leasefmt.Bound(err.Error()), 4)
	}
	var work, target int
	if e.set.Explicit("shards") {
		work = e.set.Shards
	}
	if e.set.Explicit("target_shards") {
		target = e.set.TargetShards
	}
	if err := st.CheckShards(work, target); err != nil {
		f.Close()
		return nil, usageErr("%v", err)
	}
	st.LockTimeout = time.Duration(e.set.LockTimeout * float64(time.Second))
	st.Writers = e.set.Writers
	st.Clock = e.storeClock()
	st.ClockSkew = e.set.ClockSkew
	if e.c.IsSet("strategy") {
		s, err := commit.ParseStrategy(e.c.String("strategy"))
		if err != nil {
			f.Close()
			return nil, usageErr("--strategy: %v", err)
		}
		st.Strategy = s
	}
	return st, nil
}

// wrapFS, when set, wraps the filesystem of every table a command opens:
// the seam through which tests inject faults (a read-only or full
// filesystem) and kill a process at an exact call.
var wrapFS func(commit.FS) commit.FS

// noTable is the error of a command run where no table is (SPEC §2).
func noTable(root string) error {
	return usageErr("no lease table at %s: create it with lease init (or name the table with --root or LEASE_ROOT)", root)
}

// maxLine bounds one input line.
const maxLine = 4096

// inputLine is one significant line of batch input.
type inputLine struct {
	src    string
	n      int
	fields []string
}

// readInput reads the lines of the FILE arguments, or of stdin when there
// are none or the argument is "-". Blank lines and # comments are skipped.
func readInput(c *cli.Context, args []string) ([]inputLine, error) {
	if len(args) == 0 {
		args = []string{"-"}
	}
	var out []inputLine
	for _, a := range args {
		var r io.Reader
		src := a
		if a == "-" {
			r, src = c.App.Reader, "stdin"
		} else {
			f, err := os.Open(a)
			if err != nil {
				return nil, usageErr("input %v", err)
			}
			defer f.Close()
			r = f
		}
		lines, err := scanLines(r, src)
		if err != nil {
			return nil, err
		}
		out = append(out, lines...)
	}
	return out, nil
}

func scanLines(r io.Reader, src string) ([]inputLine, error) {
	var out []inputLine
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, maxLine), maxLine) // a larger buffer would raise the bound
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		out = append(out, inputLine{src: src, n: n, fields: fields})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, usageErr("%s:%d: line longer than %d bytes", src, n+1, maxLine)
		}
		return nil, usageErr("%s: %v", src, err)
	}
	return out, nil
}

// parseItems validates every line before anything is written: `ID TOKEN`
// lines (or lone IDs when withToken is false), no duplicate ID.
func parseItems(lines []inputLine, withToken bool) ([]commit.Item, error) {
	want := 2
	form := "ID TOKEN"
	if !withToken {
		want, form = 1, "ID"
	}
	items := make([]commit.Item, 0, len(lines))
	seen := make(map[leasefmt.ID]string, len(lines))
	for _, l := range lines {
		where := fmt.Sprintf("%s:%d", l.src, l.n)
		if len(l.fields) != want {
			return nil, usageErr("%s: malformed line %s: want %q", where, leasefmt.Quote(strings.Join(l.fields, " ")), form)
		}
		id, err := leasefmt.ParseID(l.fields[0])
		if err != nil {
			return nil, usageErr("%s: %v", where, err)
		}
		it := commit.Item{ID: id}
		if withToken {
			if it.Token, err = leasefmt.ParseToken(l.fields[1]); err != nil {
				return nil, usageErr("%s: %s: %v", where, id, err)
			}
		}
		if prev, dup := seen[id]; dup {
			return nil, usageErr("%s: duplicate id %s (first at %s)", where, id, prev)
		}
		seen[id] = where
		items = append(items, it)
	}
	return items, nil
}

// tokenLines reads and validates the `ID TOKEN` lines of the FILE
// arguments or stdin.
func tokenLines(c *cli.Context) ([]commit.Item, error) {
	lines, err := readInput(c, c.Args().Slice())
	if err != nil {
		return nil, err
	}
	return parseItems(lines, true)
}

// idArgs reads claim-style input: IDs as arguments, or one per line from
// stdin when the only argument is "-" or there is none.
func idArgs(c *cli.Context) ([]commit.Item, error) {
	args := c.Args().Slice()
	if len(args) == 0 || len(args) == 1 && args[0] == "-" {
		lines, err := readInput(c, []string{"-"})
		if err != nil {
			return nil, err
		}
		return parseItems(lines, false)
	}
	lines := make([]inputLine, len(args))
	for i, a := range args {
		lines[i] = inputLine{src: "argument", n: i + 1, fields: []string{a}}
		if a == "" || strings.ContainsAny(a, " \t\n") {
			lines[i].fields = []string{a, "?"} // refused as malformed
		}
	}
	return parseItems(lines, false)
}

// resultJSON is one item of --json output.
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
}

// newResultJSON is the --json form of one item's outcome; rec, when not
// nil, is the record as written or found.
func newResultJSON(it commit.Item, out commit.Outcome, token int64, detail, path string, latency time.Duration, rec *leasefmt.Record) resultJSON {
	j := resultJSON{ID: string(it.ID), Token: it.Token, OK: out == commit.OK, Reason: out.Reason(),
		Detail: leasefmt.Bound(detail), CurrentToken: token, Path: path, LatencyS: latency.Seconds()}
	if rec != nil {
		if b, err := leasefmt.Encode(rec); err == nil {
			j.Record = json.RawMessage(strings.TrimSpace(string(b)))
		}
	}
	return j
}

// reportOpts adapt the report of a batch command.
type reportOpts struct {
	// code, when set, is the exit status of the results (default: the
	// worst outcome's).
	code func(res []commit.Result) int
	// silent, when set, names results that are not failures and print
	// nothing on stderr (claim --first's passed-over candidates).
	silent func(r commit.Result) bool
}

// worstCode is the exit status of the most serious outcome (SPEC §7).
func worstCode(res []commit.Result) int {
	code := 0
	for _, r := range res {
		code = commit.Worse(code, r.Outcome.Exit())
	}
	return code
}

// report prints results as the filter contract says and returns the exit
// status: stdout carries the lines that succeeded as `ID TOKEN`, in input
// order; stderr carries `REASON ID TOKEN detail` for each other line.
func (e *env) report(cmd string, res []commit.Result, snap commit.Snapshot) error {
	return e.reportWith(cmd, res, snap, reportOpts{})
}

func (e *env) reportWith(cmd string, res []commit.Result, snap commit.Snapshot, o reportOpts) error {
	code := worstCode(res)
	if o.code != nil {
		code = o.code(res)
	}
	if e.json {
		doc := struct {
			Command string          `json:"command"`
			Results []resultJSON    `json:"results"`
			Stats   commit.Snapshot `json:"stats"`
			Counts  map[string]int  `json:"counts"`
			Exit    int             `json:"exit"`
		}{Command: cmd, Results: make([]resultJSON, 0, len(res)), Stats: snap, Counts: map[string]int{}, Exit: code}
		for _, r := range res {
			j := newResultJSON(r.Item, r.Outcome, r.Token, r.Detail, r.Path, r.Latency, r.Record)
			doc.Counts[r.Outcome.Reason()]++
			doc.Results = append(doc.Results, j)
		}
		enc := json.NewEncoder(e.out)
		if err := enc.Encode(doc); err != nil {
			return cli.Exit(fmt.Sprintf("lease %s: stdout: %v", cmd, err), 4)
		}
	} else {
		w := bufio.NewWriter(e.out)
		ew := bufio.NewWriter(e.errw)
		for _, r := range res {
			if r.Outcome == commit.OK {
				fmt.Fprintf(w, "%s %d\n", r.ID, r.Token)
				continue
			}
			if o.silent != nil && o.silent(r) {
				continue
			}
			tok := shownToken(r.Item.Token, r.Token)
			fmt.Fprintln(ew, leasefmt.Bound(fmt.Sprintf("%s %s %s %s (%s)", r.Outcome.Reason(), r.ID, tok, r.Detail, r.Path)))
		}
		if err := w.Flush(); err != nil {
			return cli.Exit(fmt.Sprintf("lease %s: stdout: %v", cmd, err), 4)
		}
		ew.Flush()
		if e.verbose {
			e.printStats(cmd, snap)
		}
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
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

func (e *env) printStats(cmd string, s commit.Snapshot) {
	fmt.Fprintf(e.errw, "lease %s: batches=%d renewals=%d lost=%d failures=%d file_syncs=%d directory_syncs=%d directory_syncs_avoided=%d duration=%.3fs p50=%.2fms p95=%.2fms p99=%.2fms\n",
		cmd, s.Batches, s.Renewals, s.Lost, s.Failures, s.FileSyncs, s.DirectorySyncs, s.DirectorySyncsAvoided,
		s.DurationS, s.LatencyP50*1e3, s.LatencyP95*1e3, s.LatencyP99*1e3)
	if s.Ranks > 0 {
		fmt.Fprintf(e.errw, "lease %s: ranks=%d collective_time=%.3fs\n", cmd, s.Ranks, s.CollectiveS)
	}
}

// snapshot returns the store's statistics so far.
func (e *env) snapshot(st *commit.Store) commit.Snapshot {
	return st.Stats.Snapshot(time.Since(e.started))
}

// remainingS is the time left on r at now, never negative.
func remainingS(r *leasefmt.Record, now float64) float64 {
	return math.Max(0, r.ExpiresAt-now)
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
