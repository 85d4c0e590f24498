package commands

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/leasetool/lease/census"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/qualify"
)

// lease status --watch: the summary counted again and again, for an
// operator watching a campaign, as watch(1), top or AFL's status screen
// show theirs. One count at a time, started at most once per interval, so
// that a watch never loads the filesystem with more than one summary per
// interval, however slow the count; the rates are the differences of
// successive counts, so they cost nothing more.

// statusWatchSignals stop the watch, leaving the last screen, with exit
// status 0, as renew-batch --watch stops.
var statusWatchSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// Bounds of --interval.
const (
	defaultWatchInterval = 2 * time.Second
	maxWatchInterval     = 24 * time.Hour
)

// The windows of the rates: done and failed items per second over the
// last minute (what the ETA divides by) and the last five.
const (
	rateShort = time.Minute
	rateLong  = 5 * time.Minute
)

// ttyCSI are the terminal's escapes the screen is drawn with: ECMA-48,
// as watch(1) and top draw theirs.
const (
	ttyHome       = "\x1b[H"    // cursor to the top left corner
	ttyClearEnd   = "\x1b[J"    // clear from the cursor to the end of the screen
	ttyClearLine  = "\x1b[K"    // clear from the cursor to the end of the line
	ttyClearAll   = "\x1b[2J"   // clear the screen
	ttyHideCursor = "\x1b[?25l" // no cursor blinking over the counts
	ttyShowCursor = "\x1b[?25h"
)

// watchOptions are the flags of status --watch.
type watchOptions struct {
	interval  time.Duration
	count     int // 0: no limit
	untilDone bool
}

// parseWatch reads --interval, --count and --until-done.
func parseWatch(c *cli.Context) (watchOptions, error) {
	o := watchOptions{interval: defaultWatchInterval, count: c.Int("count"), untilDone: c.Bool("until-done")}
	if c.IsSet("interval") {
		d, err := parseInterval(c.String("interval"))
		if err != nil {
			return o, err
		}
		o.interval = d
	}
	if c.IsSet("count") && o.count <= 0 {
		return o, usageErr("--count %d: want a number of refreshes, at least 1", o.count)
	}
	if c.IsSet("now") {
		return o, usageErr("--watch counts at the system's clock, again and again: --now is for one count")
	}
	return o, nil
}

// parseInterval reads --interval: a Go duration (2s, 500ms, 1m30s) or
// seconds (0.5), more than 0 and at most a day.
func parseInterval(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, usageErr("--interval %s: want a duration (2s, 500ms, 1m30s) or seconds (0.5)", leasefmt.Quote(s))
		}
		if f > maxWatchInterval.Seconds() {
			return 0, usageErr("--interval %s: at most %v", leasefmt.Quote(s), maxWatchInterval)
		}
		d = time.Duration(f * float64(time.Second))
	}
	switch {
	case d <= 0:
		return 0, usageErr("--interval %s: want more than 0", leasefmt.Quote(s))
	case d > maxWatchInterval:
		return 0, usageErr("--interval %s: at most %v", leasefmt.Quote(s), maxWatchInterval)
	}
	return d, nil
}

// rateSample is one count's finished items (done and failed) and when
// the count started.
type rateSample struct {
	at       time.Time
	finished int64
}

// rateWindow holds the samples the rates need: a second apart at least
// (but for the newest, which moves on until it is), over the longest
// window, and the newest one older than it, so that its memory is bounded
// whatever the interval.
type rateWindow struct{ samples []rateSample }

func (r *rateWindow) add(at time.Time, finished int64) {
	s := rateSample{at, finished}
	if n := len(r.samples); n >= 2 && r.samples[n-1].at.Sub(r.samples[n-2].at) < time.Second {
		r.samples[n-1] = s
	} else {
		r.samples = append(r.samples, s)
	}
	cut := at.Add(-rateLong)
	i := 0
	for i+1 < len(r.samples) && !r.samples[i+1].at.After(cut) {
		i++
	}
	if i > 0 {
		r.samples = append(r.samples[:0], r.samples[i:]...)
	}
}

// rate is the items finished per second over the last window (or since
// the first count, when the watch is younger), and that span; ok is false
// before two counts.
func (r *rateWindow) rate(window time.Duration) (perS float64, span time.Duration, ok bool) {
	if len(r.samples) < 2 {
		return 0, 0, false
	}
	last := r.samples[len(r.samples)-1]
	base := r.samples[0]
	for _, s := range r.samples {
		if s.at.After(last.at.Add(-window)) {
			break
		}
		base = s
	}
	span = last.at.Sub(base.at)
	if span <= 0 {
		return 0, 0, false
	}
	// lease retry puts failed items back: the count may go down.
	return math.Max(0, float64(last.finished-base.finished)/span.Seconds()), span, true
}

// statusWatch is the state of lease status --watch between counts.
type statusWatch struct {
	e       *env
	st      *commit.Store
	o       watchOptions
	json    bool
	tty     *os.File // stdout, when it is a terminal: the screen is redrawn
	rates   rateWindow
	refresh int
}

// watchJSON is one object of status --watch --json: the summary's,
// and the watch's own fields.
type watchJSON struct {
	censusJSON
	Refresh int      `json:"refresh"`
	Left    int64    `json:"left"`
	Rate1m  *float64 `json:"rate_1m"`
	Rate5m  *float64 `json:"rate_5m"`
	ETAS    *float64 `json:"eta_s"`
}

// watchFigures are what a count shows beside the census.
type watchFigures struct {
	cen              census.Census
	now              float64 // the store's clock when the count started: what it counted at
	took             time.Duration
	left             int64
	rate1, rate5     float64
	span1, span5     time.Duration
	rate1ok, rate5ok bool
	eta              float64
	etaOK            bool
	inodes           *qualify.Inodes
	refresh          int
	interval         time.Duration
	root             string
	screenW, screenH int
}

// runStatusWatch is status --summary --watch: format is json or table.
func runStatusWatch(c *cli.Context, format string) error {
	o, err := parseWatch(c)
	if err != nil {
		return err
	}
	if format == "prometheus" {
		return usageErr("--watch prints a stream: -o prometheus is one summary for a collector's file, without --watch")
	}
	// Caught from the start: a signal during the first count stops the
	// watch as one between counts does.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, statusWatchSignals...)
	defer stopNotify(sigc)
	ctx, stop := onSignal(c.Context, sigc)
	defer stop()
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	st, err := e.open(false)
	if err != nil {
		return err
	}
	w := &statusWatch{e: e, st: st, o: o, json: format == "json" || e.json}
	if f, ok := e.out.(*os.File); ok && !w.json && term.IsTerminal(int(f.Fd())) {
		w.tty = f
		io.WriteString(f, ttyHideCursor+ttyHome+ttyClearAll)
		defer io.WriteString(f, ttyShowCursor+"\n") // the last screen stays
	}
	var last census.Census
	for {
		started, clock := time.Now(), st.Now()
		cen, err := census.Take(ctx, st, censusWorkers)
		if ctx.Err() != nil {
			break // stopped: the count is cut short, the last screen stays
		}
		if err != nil {
			return cli.Exit(leasefmt.Bound(err.Error()), exitcode.IO)
		}
		last = cen
		w.refresh++
		if err := w.show(cen, started, clock, time.Since(started)); err != nil {
			return cli.Exit(fmt.Sprintf("lease status: stdout: %v", err), exitcode.IO)
		}
		if o.count > 0 && w.refresh >= o.count || o.untilDone && campaignOver(cen) {
			break
		}
		wait := time.Until(started.Add(o.interval))
		if wait <= 0 {
			continue // the count took the interval: the next starts now
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if ctx.Err() != nil {
			break
		}
	}
	if last.Corrupt > 0 {
		return cli.Exit("", exitcode.Corrupt)
	}
	return nil
}

// campaignOver reports whether no item is queued, leased or committing
// any more: what --until-done waits for.
func campaignOver(c census.Census) bool {
	return c.Queued == 0 && c.Leased == 0 && c.Committing == 0
}

// itemsLeft are the items not finished: neither done nor failed.
func itemsLeft(c census.Census) int64 {
	return c.Free + c.Leased + c.Expired + c.Committing + c.Released
}

// show writes one count: a screen, a line or a JSON object.
func (w *statusWatch) show(cen census.Census, started time.Time, clock float64, took time.Duration) error {
	w.rates.add(started, cen.Done+cen.Failed)
	f := watchFigures{cen: cen, now: clock, took: took, left: itemsLeft(cen),
		refresh: w.refresh, interval: w.o.interval, root: w.st.Root()}
	f.rate1, f.span1, f.rate1ok = w.rates.rate(rateShort)
	f.rate5, f.span5, f.rate5ok = w.rates.rate(rateLong)
	if f.rate1ok && f.rate1 > 0 {
		f.eta, f.etaOK = float64(f.left)/f.rate1, true
	} else if f.left == 0 {
		f.eta, f.etaOK = 0, true
	}
	if ino, err := qualify.InodesOf(w.st.Root()); err == nil {
		f.inodes = &ino
	}
	var b bytes.Buffer
	switch {
	case w.json:
		doc := watchJSON{censusJSON: censusJSON{Census: cen, Now: f.now, DurationS: took.Seconds()}, Refresh: f.refresh, Left: f.left}
		if f.inodes != nil {
			doc.Inodes = &inodesJSON{Known: f.inodes.Known, Free: f.inodes.Free, Total: f.inodes.Total, RoomItems: f.inodes.Room()}
		}
		if f.rate1ok {
			doc.Rate1m = &f.rate1
		}
		if f.rate5ok {
			doc.Rate5m = &f.rate5
		}
		if f.etaOK {
			doc.ETAS = &f.eta
		}
		if err := json.NewEncoder(&b).Encode(doc); err != nil {
			return err
		}
	case w.tty != nil:
		f.screenW, f.screenH = 80, 24
		if cw, ch, err := term.GetSize(int(w.tty.Fd())); err == nil && cw > 0 && ch > 0 {
			f.screenW, f.screenH = cw, ch
		}
		b.WriteString(ttyHome)
		lines := watchScreen(f)
		lines = lines[:min(len(lines), f.screenH-1)] // a line more would scroll the screen
		for _, l := range lines {
			b.WriteString(fitWidth(l, f.screenW))
			b.WriteString(ttyClearLine + "\n")
		}
		b.WriteString(ttyClearEnd)
	default:
		b.WriteString(watchLine(f))
	}
	_, err := w.e.out.Write(b.Bytes())
	return err
}

// rateText is a rate as the screen and the lines show it: - when unknown.
func rateText(perS float64, ok bool) string {
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(perS, 'f', rateDigits(perS), 64) + "/s"
}

func rateDigits(perS float64) int {
	switch {
	case perS >= 100:
		return 0
	case perS >= 10:
		return 1
	}
	return 2
}

// etaText is the time left at the last minute's rate: - when the rate is
// 0 or not known yet.
func etaText(f watchFigures) string {
	if !f.etaOK {
		return "-"
	}
	return humanDuration(f.eta)
}

// watchLine is a count as one line, for a log (stdout not a terminal).
func watchLine(f watchFigures) string {
	c := f.cen
	return fmt.Sprintf("%s queued=%d free=%d leased=%d expired=%d committing=%d released=%d done=%d failed=%d corrupt=%d left=%d rate_1m=%s rate_5m=%s eta=%s owners=%d census=%.3fs\n",
		time.Unix(0, int64(f.now*1e9)).UTC().Format(time.RFC3339), c.Queued, c.Free, c.Leased, c.Expired, c.Committing,
		c.Released, c.Done, c.Failed, c.Corrupt, f.left, rateText(f.rate1, f.rate1ok), rateText(f.rate5, f.rate5ok),
		etaText(f), len(c.Owners), f.took.Seconds())
}

// watchScreen is a count as the lines of a screen: the states, the rates
// and the ETA, the owners (the one that renewed longest ago first: a
// worker that stopped renewing shows at the top) and the items that failed
// most. The lists are cut to fit the terminal's height.
func watchScreen(f watchFigures) []string {
	c := f.cen
	lines := []string{
		fmt.Sprintf("lease status --watch, every %v: %s", f.interval, f.root),
		fmt.Sprintf("%s  count %d took %.3fs", time.Unix(0, int64(f.now*1e9)).UTC().Format("2006-01-02 15:04:05 UTC"), f.refresh, f.took.Seconds()),
		"",
	}
	row := func(name string, n int64, what string) {
		lines = append(lines, strings.TrimRight(fmt.Sprintf("%-11s %9d  %s", name, n, what), " "))
	}
	row("queued", c.Queued, "items not done (queue/)")
	row("free", c.Free, "queued, never claimed")
	row("leased", c.Leased, "held now")
	row("expired", c.Expired, "time ran out (claimable)")
	row("committing", c.Committing, "held, being completed")
	row("released", c.Released, "claimable again")
	row("done", c.Done, "finished")
	row("failed", c.Failed, "failed max_attempts times (lease retry)")
	corrupt := ""
	if c.Corrupt > 0 {
		corrupt = "records that do not validate: run lease fsck"
	}
	row("corrupt", c.Corrupt, corrupt)
	rate := rateText(f.rate1, f.rate1ok)
	switch {
	case !f.rate1ok:
	case f.span5 > f.span1:
		rate += fmt.Sprintf(" over the last %s, %s over %s", humanDuration(f.span1.Seconds()), rateText(f.rate5, f.rate5ok), humanDuration(f.span5.Seconds()))
	default: // the watch is younger than the short window
		rate += fmt.Sprintf(" over %s, since the first count", humanDuration(f.span1.Seconds()))
	}
	lines = append(lines, "",
		fmt.Sprintf("rate        %s (done and failed items)", rate),
		fmt.Sprintf("ETA         %s for %d items left", etaText(f), f.left),
		"")
	// What is left of the screen goes to the lists: the failed items first
	// (at most the census's ten), the owners the rest, each with its heading
	// and a blank line.
	room := f.screenH - len(lines) - 1 // the cursor's line after the last
	failed := c.MostFailed
	owners := make([]string, 0, len(c.Owners))
	for o := range c.Owners {
		owners = append(owners, o)
	}
	sort.Slice(owners, func(i, j int) bool {
		a, b := c.OwnerRenewed[owners[i]], c.OwnerRenewed[owners[j]]
		if a != b {
			return a < b
		}
		return owners[i] < owners[j]
	})
	failedRows := min(len(failed), max(0, room-2-3)) // heading + blank, and 3 lines kept for the owners
	ownerRows := min(len(owners), max(0, room-failedRows-2-1))
	if ownerRows < len(owners) && ownerRows > 0 {
		ownerRows-- // room for the "more" line
	}
	lines = append(lines, fmt.Sprintf("%-11s %9s  %-14s %s", fmt.Sprintf("OWNERS (%d)", len(owners)), "LIVE", "RENEWED", "OWNER"))
	for _, o := range owners[:ownerRows] {
		lines = append(lines, fmt.Sprintf("%-11s %9d  %-14s %s", "", c.Owners[o], humanDuration(f.now-c.OwnerRenewed[o])+" ago", leasefmt.Quote(o)))
	}
	if ownerRows < len(owners) {
		lines = append(lines, fmt.Sprintf("%-11s %9s  and %d more", "", "...", len(owners)-ownerRows))
	}
	if len(failed) > 0 && failedRows > 0 {
		lines = append(lines, "", fmt.Sprintf("%-11s %9s  %-14s %s", "MOST FAILED", "RUNS", "STATE", "ID"))
		for _, it := range failed[:failedRows] {
			id := string(it.ID)
			if f.screenW < 11+1+9+2+14+1+len(id) {
				id = it.ID.Short()
			}
			lines = append(lines, fmt.Sprintf("%-11s %9d  %-14s %s", "", it.Attempts, it.State, id))
		}
	}
	return lines
}

// fitWidth cuts l to the terminal's width, so that no line wraps and the
// redraw stays in place.
func fitWidth(l string, width int) string {
	if width <= 0 || len(l) <= width {
		return l
	}
	r := []rune(l)
	if len(r) > width {
		r = r[:width]
	}
	return string(r)
}
