package commands

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

var statusCommand = &cli.Command{
	Name:      "status",
	Usage:     "list lease records: holder, token, remaining time",
	ArgsUsage: " ",
	Description: "Lists the work records of the table (with --groups also group manifests and targets):\n" +
		"ID, status, token, owner and remaining time. --live and --expired select leases that are\n" +
		"or are no longer held; --owner selects one holder. --json streams one JSON object per\n" +
		"record per line. A record that does not validate is reported on stderr (exit 3) and left\n" +
		"for lease fsck.",
	Flags: flags(commonFlags(), []cli.Flag{
		&cli.BoolFlag{Name: "live", Usage: "only leases held now"},
		&cli.BoolFlag{Name: "expired", Usage: "only leased or committing records whose time ran out"},
		&cli.BoolFlag{Name: "groups", Usage: "also list group manifests and target records"},
		&cli.BoolFlag{Name: "summary", Usage: "print counts instead of records: queued, free, leased, expired, committing, released, done, and live leases per owner"},
	}),
	Action: runStatus,
}

// statusManual is the hand-written part of lease-status(1).
var statusManual = Manual{
	Examples: []Example{
		{"Show what is held now:", "lease status --live"},
		{"Count done items with jq:", "lease status --json | jq -s 'map(select(.status == \"done\")) | length'"},
		{"List the leases that ran out (their holders are gone):", "lease status --expired"},
	},
	SeeAlso: []string{"lease-fsck(1)"},
}

// statusJSON is one line of status --json.
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
}

func runStatus(c *cli.Context) error {
	if c.Bool("summary") {
		return runStatusSummary(c)
	}
	if c.NArg() > 0 {
		return usageErr("status takes no arguments")
	}
	if c.Bool("live") && c.Bool("expired") {
		return usageErr("--live and --expired exclude each other")
	}
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	st, err := e.open(false)
	if err != nil {
		return err
	}
	owner := ""
	if c.IsSet("owner") { // LEASE_OWNER or a file's owner names this worker, not a filter
		owner = e.set.Owner
	}
	kinds := []leasefmt.Kind{leasefmt.Work}
	if c.Bool("groups") {
		kinds = append(kinds, leasefmt.Group, leasefmt.Target)
	}
	w := bufio.NewWriter(e.out)
	defer w.Flush()
	enc := json.NewEncoder(w)
	code := 0
	for _, k := range kinds {
		err := scanRecords(st, k, func(rel string, rec *leasefmt.Record, rerr error) {
			if rerr != nil {
				code = Worse(code, 3)
				w.Flush()
				fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("corrupt %s (lease fsck checks it)", rerr)))
				return
			}
			live := rec.Live(e.now)
			expired := (rec.Status == leasefmt.Leased || rec.Status == leasefmt.Committing) && !live
			if c.Bool("live") && !live || c.Bool("expired") && !expired || owner != "" && rec.Owner != owner {
				return
			}
			if e.json {
				j := statusJSON{Kind: k.Dir(), ID: string(rec.ID), Status: string(rec.Status), Owner: rec.Owner, Token: rec.Token,
					ClaimedAt: rec.ClaimedAt, RenewedAt: rec.RenewedAt, ExpiresAt: rec.ExpiresAt, RemainingS: remainingS(rec, e.now),
					Live: live, Group: string(rec.Group), Publish: rec.Publish, Path: st.Abs(rel)}
				for _, t := range rec.Targets {
					j.Targets = append(j.Targets, string(t))
				}
				enc.Encode(j)
				return
			}
			left := "-"
			switch {
			case live:
				left = fmt.Sprintf("%.1fs", rec.ExpiresAt-e.now)
			case expired:
				left = fmt.Sprintf("expired %.1fs ago", e.now-rec.ExpiresAt)
			}
			kind := ""
			if len(kinds) > 1 {
				kind = strings.TrimSuffix(k.Dir(), "s") + " "
			}
			fmt.Fprintf(w, "%s%s %-10s %6d %-24s %s\n", kind, rec.ID, rec.Status, rec.Token, rec.Owner, left)
		})
		if err != nil {
			w.Flush()
			return cli.Exit(leasefmt.Bound(err.Error()), 4)
		}
	}
	if code != 0 {
		w.Flush()
		return cli.Exit("", code)
	}
	return nil
}

// scanRecords calls fn for every record file of kind k, in shard and ID
// order, with the record or the reason it does not validate. Files that are
// not records (lock files, temp files) are skipped: fsck reports those.
func scanRecords(st *commit.Store, k leasefmt.Kind, fn func(rel string, rec *leasefmt.Record, err error)) error {
	n := st.Table.Shards(k)
	for sh := 0; sh < n; sh++ {
		dir := st.ShardDir(k, sh)
		ents, err := st.FS.ReadDir(dir)
		if err != nil {
			if isNotExist(err) {
				continue
			}
			if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
				// A link or a file planted as the shard directory.
				fn(dir, nil, fmt.Errorf("%w: %w", leasefmt.ErrCorrupt, err))
				continue
			}
			return err
		}
		names := make([]string, 0, len(ents))
		for _, ent := range ents {
			if strings.HasSuffix(ent.Name(), ".json") && !strings.HasPrefix(ent.Name(), ".") {
				names = append(names, ent.Name())
			}
		}
		sort.Strings(names)
		for _, name := range names {
			rel := path.Join(dir, name)
			id, err := leasefmt.ParseID(strings.TrimSuffix(name, ".json"))
			if err != nil {
				continue // not a record name: fsck reports it
			}
			if id.Shard(n) != sh {
				continue // misplaced: fsck reports it
			}
			rec, err := st.Read(k, id)
			if rec == nil && err == nil {
				continue // removed while scanning
			}
			fn(rel, rec, err)
		}
	}
	return nil
}
