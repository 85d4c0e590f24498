package commands

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// lease status --summary: the table counted (commit.Census), for an
// operator watching a campaign.

// censusJSON is status --summary --json: one document.
type censusJSON struct {
	commit.Census
	Now       float64 `json:"now"`
	DurationS float64 `json:"duration_s"`
}

// censusWorkers is how many shards a summary reads at once: enough to
// keep the filesystem busy, few enough that memory stays at a few shards'
// names.
const censusWorkers = 16

func runStatusSummary(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErr("status --summary counts the whole table; it takes no IDs")
	}
	for _, f := range []string{"live", "expired", "groups", "owner", "sort", "output", "no-headers"} {
		if c.IsSet(f) {
			return usageErr("--summary counts every record; --%s is for the list of records: give one of them", f)
		}
	}
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	st, err := e.open(false)
	if err != nil {
		return err
	}
	start := time.Now()
	cen, err := st.Census(e.ctx(), censusWorkers)
	if err != nil {
		return cli.Exit(leasefmt.Bound(err.Error()), 4)
	}
	if e.json {
		if err := json.NewEncoder(e.out).Encode(censusJSON{Census: cen, Now: st.Now(), DurationS: time.Since(start).Seconds()}); err != nil {
			return cli.Exit(fmt.Sprintf("lease status: stdout: %v", err), 4)
		}
	} else {
		w := e.out
		row := func(name string, n int64, what string) { fmt.Fprintf(w, "%-11s %9d  %s\n", name, n, what) }
		row("queued", cen.Queued, "items not done (queue/)")
		row("free", cen.Free, "queued, never claimed")
		row("leased", cen.Leased, "held now")
		row("expired", cen.Expired, "leased or committing, time ran out (claimable)")
		row("committing", cen.Committing, "held, being completed")
		row("released", cen.Released, "claimable again")
		row("done", cen.Done, "finished")
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
			fmt.Fprintf(e.errw, "lease status: %d records read in %.3fs\n", cen.Records+cen.Corrupt, time.Since(start).Seconds())
		}
	}
	if cen.Corrupt > 0 {
		return cli.Exit("", 3)
	}
	return nil
}
