package commands

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/census"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/qualify"
)

// lease status --summary: the table counted (census.Census), for an
// operator watching a campaign.

// censusJSON is status --summary --json: one document.
type censusJSON struct {
	census.Census
	// Inodes are the inodes left on the table's filesystem, beside the
	// items queued (each takes two); absent when statfs cannot tell.
	Inodes    *inodesJSON `json:"inodes,omitempty"`
	Now       float64     `json:"now"`
	DurationS float64     `json:"duration_s"`
}

// inodesJSON is the inodes of status --summary --json; free and total are
// 0 on a filesystem without a fixed number of inodes (known false).
type inodesJSON struct {
	Known bool   `json:"known"`
	Free  uint64 `json:"free"`
	Total uint64 `json:"total"`
	// RoomItems is how many more items the free inodes hold.
	RoomItems uint64 `json:"room_items"`
}

// censusWorkers is how many shards a summary reads at once: enough to
// keep the filesystem busy, few enough that memory stays at a few shards'
// names.
const censusWorkers = 16

func runStatusSummary(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErr("status --summary and --watch count the whole table; they take no IDs")
	}
	for _, f := range []string{"live", "expired", "groups", "owner", "sort", "no-headers", "state", "limit"} {
		if c.IsSet(f) {
			return usageErr("--summary counts every record; --%s is for the list of records: give one of them", f)
		}
	}
	format := "table"
	if c.IsSet("output") {
		format = c.String("output")
		switch {
		case format != "table" && format != "json" && format != "prometheus":
			return usageErr("--summary --output %s: want table, json or prometheus", leasefmt.Quote(format))
		case c.Bool("json") && format != "json":
			return usageErr("--json and --output %s exclude each other", format)
		}
	}
	if c.Bool("watch") {
		return runStatusWatch(c, format)
	}
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	if format == "json" {
		e.json = true
	}
	st, err := e.open(false)
	if err != nil {
		return err
	}
	start := time.Now()
	count := census.Take
	if c.Bool("full") {
		count = census.Listing
	}
	cen, err := count(e.ctx(), st, censusWorkers)
	if err != nil {
		return cli.Exit(leasefmt.Bound(err.Error()), exitcode.IO)
	}
	ino, inoErr := qualify.InodesOf(st.Root())
	switch {
	case format == "prometheus":
		var inoP *qualify.Inodes
		if inoErr == nil {
			inoP = &ino
		}
		if err := writePrometheus(e.out, st.Root(), cen, inoP, st.Now(), time.Since(start).Seconds()); err != nil {
			return cli.Exit(fmt.Sprintf("lease status: stdout: %v", err), exitcode.IO)
		}
	case e.json:
		doc := censusJSON{Census: cen, Now: st.Now(), DurationS: time.Since(start).Seconds()}
		if inoErr == nil {
			doc.Inodes = &inodesJSON{Known: ino.Known, Free: ino.Free, Total: ino.Total, RoomItems: ino.Room()}
		}
		if err := json.NewEncoder(e.out).Encode(doc); err != nil {
			return cli.Exit(fmt.Sprintf("lease status: stdout: %v", err), exitcode.IO)
		}
	default:
		w := e.out
		row := func(name string, n int64, what string) { fmt.Fprintf(w, "%-11s %9d  %s\n", name, n, what) }
		row("queued", cen.Queued, "items not done (queue/)")
		switch {
		case inoErr != nil:
			fmt.Fprintf(w, "%-11s %9s  cannot tell: %v\n", "inodes", "?", inoErr)
		case ino.Known:
			row("inodes", int64(ino.Free), fmt.Sprintf("free of %d on the table's filesystem: room for about %d more items (each takes %d: its queue entry and its record)",
				ino.Total, ino.Room(), qualify.ItemInodes))
		default:
			fmt.Fprintf(w, "%-11s %9s  the table's filesystem makes inodes as needed\n", "inodes", "-")
		}
		row("free", cen.Free, "queued, never claimed")
		row("leased", cen.Leased, "held now")
		row("expired", cen.Expired, "leased or committing, time ran out (claimable)")
		row("committing", cen.Committing, "held, being completed")
		row("released", cen.Released, "claimable again")
		row("done", cen.Done, "finished")
		row("failed", cen.Failed, "failed max_attempts times: lease retry puts them back")
		row("retried", cen.Retried, "not done, with a failed run (claimable again)")
		row("attempts", cen.Attempts, "failed runs counted in all")
		if cen.Corrupt > 0 {
			row("corrupt", cen.Corrupt, "records that do not validate: run lease fsck")
		}
		owners := make([]string, 0, len(cen.Owners))
		for o := range cen.Owners {
			owners = append(owners, o)
		}
		sort.Slice(owners, func(i, j int) bool {
			if cen.Owners[owners[i]] != cen.Owners[owners[j]] {
				return cen.Owners[owners[i]] > cen.Owners[owners[j]]
			}
			return owners[i] < owners[j]
		})
		if len(owners) > 0 {
			fmt.Fprintln(w, "live leases per owner:")
			for _, o := range owners {
				fmt.Fprintf(w, "  %9d  %s\n", cen.Owners[o], leasefmt.Quote(o))
			}
		}
		if e.verbose {
			how := "from the tally (lease status --summary --full counts from the shards)"
			if cen.Method != census.MethodTally {
				how = "from the shards' listings: the tally is not trusted (lease fsck --repair checks it and trusts it)"
			}
			fmt.Fprintf(e.errw, "lease status: %d records counted in %.3fs, %s\n", cen.Records+cen.Corrupt, time.Since(start).Seconds(), how)
		}
	}
	if cen.Corrupt > 0 {
		return cli.Exit("", exitcode.Corrupt)
	}
	return nil
}
