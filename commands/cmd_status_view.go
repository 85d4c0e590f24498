package commands

// The rendering of lease status: a table for people (header, rows sorted,
// human ages and remaining times), -o wide, -o id, -o id-token, and the
// stable --json lines for scripts.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leasetool/lease/leasefmt"
)

// statusJSON is one line of status --json. Its fields are stable (lease-status(1)):
// new ones are added at the end, none renamed or removed; the completions
// read kind and id first.
type statusJSON struct {
	Kind       string   `json:"kind"`
	ID         string   `json:"id"`
	Status     string   `json:"status"`
	Owner      string   `json:"owner"`
	Token      int64    `json:"token"`
	ClaimedAt  float64  `json:"claimed_at"`
	RenewedAt  float64  `json:"renewed_at"`
	ExpiresAt  float64  `json:"expires_at"`
	RemainingS float64  `json:"remaining_s"`
	Live       bool     `json:"live"`
	Group      string   `json:"group,omitempty"`
	Targets    []string `json:"targets,omitempty"`
	Publish    string   `json:"publish,omitempty"`
	Path       string   `json:"path"`
	Attempts   int64    `json:"attempts"`
	ExitStatus int      `json:"exit_status,omitempty"`
	StderrTail string   `json:"stderr_tail,omitempty"`
}

// statusView renders the rows of lease status: --json without --sort is
// streamed in the scan's order (shard, then ID), so that a table of
// millions of records is never held in memory; everything else is held
// and sorted at flush.
type statusView struct {
	e      *env
	o      *statusOptions
	w      *bufio.Writer
	rows   []statusRow
	stream bool
	lines  int // rows streamed
	// The table for people shows at most tableQueued queued rows unless
	// --state or --limit asks for them: queued holds the first by the
	// sort order, folded counts the others.
	queued []statusRow
	folded int
}

// tableQueued is how many rows of queued items the table shows when
// neither --state nor --limit is given: a queue of millions is one line
// more, not millions.
const tableQueued = 20

func newStatusView(e *env, o *statusOptions) *statusView {
	v := &statusView{e: e, o: o, w: bufio.NewWriter(e.out)}
	v.stream = o.output == "json" && !o.sorted
	return v
}

// errStatusLimit stops the scan of lease status when --limit rows were
// streamed.
var errStatusLimit = errors.New("--limit rows shown")

// add takes one selected row. With --limit N it keeps at most 2N rows:
// past that it sorts them and drops all but the first N, so that the rows
// shown of a queue of millions need memory for N.
func (v *statusView) add(r statusRow) error {
	if v.stream {
		v.lines++
		if err := v.line(r); err != nil {
			return err
		}
		if v.o.limit > 0 && v.lines >= v.o.limit {
			return errStatusLimit
		}
		return nil
	}
	if r.rec.Status == statusQueued && v.o.states == nil && v.o.limit == 0 && (v.o.output == "table" || v.o.output == "wide") {
		v.queued = keepFirst(append(v.queued, r), tableQueued, v.o.sortKey, &v.folded)
		return nil
	}
	var dropped int
	v.rows = keepFirst(append(v.rows, r), v.o.limit, v.o.sortKey, &dropped)
	return nil
}

// keepFirst bounds rows to the first n in the order of key once they
// reach 2n, adding those dropped to *dropped; n 0 keeps every row.
func keepFirst(rows []statusRow, n int, key string, dropped *int) []statusRow {
	if n <= 0 || len(rows) < 2*n {
		return rows
	}
	sortStatusRows(rows, key)
	*dropped += len(rows) - n
	clear(rows[n:])
	return rows[:n]
}

// flush sorts and writes what add held, and flushes stdout.
func (v *statusView) flush() error {
	if !v.stream {
		if len(v.queued) > tableQueued {
			sortStatusRows(v.queued, v.o.sortKey)
			v.folded += len(v.queued) - tableQueued
			v.queued = v.queued[:tableQueued]
		}
		v.rows = append(v.rows, v.queued...)
		sortStatusRows(v.rows, v.o.sortKey)
		if v.o.limit > 0 && len(v.rows) > v.o.limit {
			v.rows = v.rows[:v.o.limit]
		}
		if v.o.output == "table" || v.o.output == "wide" {
			v.table()
		} else {
			for _, r := range v.rows {
				if err := v.line(r); err != nil {
					return err
				}
			}
		}
	}
	if err := v.w.Flush(); err != nil {
		return fmt.Errorf("stdout: %w", err)
	}
	return nil
}

// line writes one row in a line format (json, id, id-token).
func (v *statusView) line(r statusRow) error {
	rec := r.rec
	switch v.o.output {
	case "id":
		_, err := fmt.Fprintln(v.w, rec.ID)
		return err
	case "id-token":
		_, err := fmt.Fprintf(v.w, "%s %d\n", rec.ID, rec.Token)
		return err
	}
	j := statusJSON{Kind: r.kind.Dir(), ID: string(rec.ID), Status: string(rec.Status), Owner: rec.Owner, Token: rec.Token,
		ClaimedAt: rec.ClaimedAt, RenewedAt: rec.RenewedAt, ExpiresAt: rec.ExpiresAt, RemainingS: remainingS(rec, v.e.now),
		Live: rec.Live(v.e.now), Group: string(rec.Group), Publish: rec.Publish, Path: r.path,
		Attempts: rec.Attempts, ExitStatus: rec.ExitStatus, StderrTail: rec.StderrTail}
	for _, t := range rec.Targets {
		j.Targets = append(j.Targets, string(t))
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	_, err = v.w.Write(append(b, '\n'))
	return err
}

// table writes the rows as aligned columns, OWNER last (it may hold
// spaces), with a header unless --no-headers.
func (v *statusView) table() {
	tw := tabwriter.NewWriter(v.w, 0, 8, 2, ' ', 0)
	kinds := len(v.o.kinds) > 1
	wide := v.o.output == "wide"
	if !v.o.noHeader {
		var h []string
		if kinds {
			h = append(h, "KIND")
		}
		h = append(h, "ID", "STATUS", "TOKEN", "AGE", "REMAINING")
		if wide {
			h = append(h, "CLAIMED", "RENEWED", "EXPIRES", "PATH", "ATTEMPTS", "EXIT")
		}
		fmt.Fprintln(tw, strings.Join(append(h, "OWNER"), "\t"))
	}
	now := v.e.now
	for _, r := range v.rows {
		rec := r.rec
		var cols []string
		if kinds {
			cols = append(cols, strings.TrimSuffix(r.kind.Dir(), "s"))
		}
		age := humanDuration(now - rec.ClaimedAt)
		if rec.Status == statusQueued {
			age = "-" // never claimed
		}
		cols = append(cols, string(rec.ID), string(rec.Status), strconv.FormatInt(rec.Token, 10),
			age, remainingText(rec, now))
		if wide {
			exit := "-"
			if rec.ExitStatus > 0 {
				exit = strconv.Itoa(rec.ExitStatus)
			}
			times := []string{utcTime(rec.ClaimedAt), utcTime(rec.RenewedAt), utcTime(rec.ExpiresAt)}
			if rec.Status == statusQueued {
				times = []string{"-", "-", "-"}
			}
			cols = append(append(cols, times...), r.path, strconv.FormatInt(rec.Attempts, 10), exit)
		}
		fmt.Fprintln(tw, strings.Join(append(cols, rec.Owner), "\t"))
	}
	tw.Flush()
	if v.folded > 0 {
		fmt.Fprintf(v.w, "... and %d more queued items (lease status --state queued lists them, --limit N bounds a listing)\n", v.folded)
	}
}

// remainingText is the REMAINING column: the time left on a lease that
// is live, how long ago one that is still leased or committing ran out,
// and - for released, done and failed records.
func remainingText(r *leasefmt.Record, now float64) string {
	switch {
	case r.Live(now):
		return humanDuration(r.ExpiresAt - now)
	case held(r):
		return "expired " + humanDuration(now-r.ExpiresAt) + " ago"
	}
	return "-"
}

// humanDuration renders seconds as people read them: 0.4s, 41s, 2m3s,
// 5h7m, 3d4h.
func humanDuration(s float64) string {
	if math.IsNaN(s) || s < 0 {
		s = 0
	}
	switch {
	case s < 10:
		return strconv.FormatFloat(math.Floor(s*10)/10, 'f', -1, 64) + "s"
	case s < 60:
		return strconv.Itoa(int(s)) + "s"
	case s < 3600:
		return fmt.Sprintf("%dm%ds", int(s)/60, int(s)%60)
	case s < 86400:
		return fmt.Sprintf("%dh%dm", int(s)/3600, int(s)%3600/60)
	}
	return fmt.Sprintf("%dd%dh", int(s)/86400, int(s)%86400/3600)
}

// utcTime renders seconds since the epoch as RFC 3339 in UTC, to the
// second.
func utcTime(s float64) string {
	return time.Unix(int64(s), 0).UTC().Format(time.RFC3339)
}

// statusOrder ranks statuses for --sort status: what needs attention first.
var statusOrder = map[leasefmt.Status]int{leasefmt.Failed: -1, leasefmt.Committing: 0, leasefmt.Leased: 1, leasefmt.Released: 2, statusQueued: 3, leasefmt.Done: 4}

// held reports whether r is a lease (leased or committing), live or not.
func held(r *leasefmt.Record) bool {
	return r.Status == leasefmt.Leased || r.Status == leasefmt.Committing
}

// sortStatusRows orders rows by key, then by ID and kind, so that the
// order never depends on the shard layout.
func sortStatusRows(rows []statusRow, key string) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i].rec, rows[j].rec
		switch key {
		case "expires": // leases by expiry; released and done, whose expires_at means nothing, after them
			ha, hb := held(a), held(b)
			if ha != hb {
				return ha
			}
			if ha && a.ExpiresAt != b.ExpiresAt {
				return a.ExpiresAt < b.ExpiresAt
			}
		case "owner":
			if a.Owner != b.Owner {
				return a.Owner < b.Owner
			}
		case "status":
			if a.Status != b.Status {
				return statusOrder[a.Status] < statusOrder[b.Status]
			}
		}
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return rows[i].kind < rows[j].kind
	})
}
