package commands

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
)

var statusCommand = &cli.Command{
	Name:      "status",
	Usage:     "show lease records: holder, token, remaining time",
	ArgsUsage: "[ID...|-]",
	Description: "Shows the work records of the table (with --groups also group manifests and targets), or\n" +
		"only those of the IDs given (as arguments, or `ID` or `ID TOKEN` lines on stdin with -), as a\n" +
		"table for people: a header, then one row per record sorted by ID (--sort expires, owner or\n" +
		"status), with the remaining time (2m3s, expired 41s ago) and the age since the claim; a\n" +
		"`failed` record is one whose runs failed max_attempts times (lease retry puts it back). An\n" +
		"item of the queue that has no record yet (never claimed) is shown as `queued`, with token 0\n" +
		"and the queue entry's path. --live and --expired select leases that are or are no longer\n" +
		"held; --state selects statuses (--state queued: the items waiting for their first claim);\n" +
		"--owner selects one holder; --limit N bounds the rows shown. A record that does not validate\n" +
		"is reported on stderr (exit 3) and left for lease fsck; an ID given that has neither a record\n" +
		"nor a queue entry is reported as `missing ID 0 no record (PATH)` (exit 1).",
	Flags: flags(withJSON(commonFlags(), "print one JSON object per record per line instead of the table (the stable fields are listed below)"), []cli.Flag{
		&cli.BoolFlag{Name: "live", Usage: "only leases held now"},
		&cli.BoolFlag{Name: "expired", Usage: "only leased or committing records whose time ran out"},
		&cli.StringFlag{Name: "state", Usage: "only items in `STATES` (comma-separated): queued (a queue entry, no record yet), leased, committing, released, done, failed"},
		&cli.IntFlag{Name: "limit", Usage: "show at most `N` rows (the first N in the order of --sort; --json without --sort stops reading there)", DefaultText: "no limit"},
		&cli.BoolFlag{Name: "groups", Usage: "also show group manifests and target records"},
		&cli.StringFlag{Name: "sort", Value: "id", Usage: "order of the rows by `KEY`: id, expires (soonest first; released and done last), owner or status"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "`FORMAT`: table; wide (also the times and the path); id (the IDs, one per line); id-token (\"ID TOKEN\" lines, the filter format); json (as --json); with --summary: table, json or prometheus"},
		&cli.BoolFlag{Name: "no-headers", Usage: "leave out the header line of table and wide"},
		&cli.BoolFlag{Name: "summary", Usage: "print counts instead of records: queued, free, leased, expired, committing, released, done, failed, retried, attempts, and live leases per owner"},
		&cli.BoolFlag{Name: "full", Usage: "with --summary: count from the shards' listings and records, not from the tally (what a table the tally does not vouch for gets anyway)"},
		&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "count again every --interval (implies --summary): redrawn in place on a terminal, one line per count otherwise, one JSON object per count with --json; until SIGINT, SIGTERM or SIGHUP"},
		&cli.StringFlag{Name: "interval", Value: "2s", Usage: "with --watch: start a count at most every `DURATION` (500ms, 2s, 1m, or seconds: 0.5); a count that takes longer is followed by the next when it ends"},
		&cli.IntFlag{Name: "count", Usage: "with --watch: stop after `N` counts", DefaultText: "no limit"},
		&cli.BoolFlag{Name: "until-done", Usage: "with --watch: stop when no item is queued, leased or committing any more"},
	}),
	Action: runStatus,
}

// statusManual is the hand-written part of lease-status(1).
var statusManual = Manual{
	More: "OUTPUT: the table's columns are ID, STATUS (the record's), TOKEN, AGE (since the lease was " +
		"claimed), REMAINING (until expires_at; `expired 41s ago` once it ran out; - for released and done) " +
		"and OWNER, last, since an owner may contain spaces. -o wide adds CLAIMED, RENEWED and EXPIRES (UTC, " +
		"RFC 3339), PATH, ATTEMPTS (the failed runs counted) and EXIT (the last failed run's exit status). The table is for people and may gain columns; scripts read -o id, -o id-token or " +
		"--json.\n\n" +
		"QUEUED ITEMS: an item of the queue (queue/SS/ID) that has no record yet, because it was never claimed, is " +
		"shown as a row of status queued: token 0, AGE, REMAINING and the times -, the queue entry as its path; in --json " +
		"status \"queued\", token 0, the times 0, live false (--summary counts these items as free, and as queued every item with a queue entry). An item that has a record is shown by its record " +
		"(released, an expired lease: what the next claim takes), queued or not. lease status ID of a queued item " +
		"shows its row, exit 0. --state queued lists the items waiting for their first claim, -v counts them " +
		"(queued=N beside records=N). The table (and -o wide) shows at most 20 queued rows, the first in the order of " +
		"--sort, and then one line `... and N more queued items` unless --state or --limit is given; -o id, " +
		"-o id-token and --json list them all. The queue is listed only when queued rows can be shown (not with --live, " +
		"--expired, --owner or a --state without queued). On a queue of millions, --limit N bounds the output: the " +
		"first N rows in the order of --sort, with memory for 2N rows; --json without --sort stops reading at the Nth " +
		"row (-v then counts what was read).\n\n" +
		"--json streams one JSON object per record per line, in the order of --sort when it is given and " +
		"else in shard order (without holding the table in memory), with the fields kind (work, targets, " +
		"groups), id, status, owner, token, claimed_at, renewed_at, expires_at (seconds since the epoch), " +
		"remaining_s (never negative), live, group and targets (targets and groups), publish (when set), " +
		"path, attempts (failed runs counted), exit_status and stderr_tail (of the last failed run, when known). These fields are stable: new ones may be added, none is renamed or removed. With -v a line of " +
		"counts goes to stderr: records read, queued items without a record, shown, live, expired, corrupt, and the duration.\n\n" +
		"--summary: queued counts the entries of queue/ and free the queued items without a record, both " +
		"by listing directories only. The finished items are counted from the tally (docs/design.md#tally): when " +
		"lease writes a record done or failed it also links it into tally/B/, B the time it finished rounded down " +
		"to 5 minutes, and a bucket whose time is past is listed once and then kept, with its directory's stat, in " +
		"tally/CHECKPOINT: later summaries stat it and list only the buckets of the last minutes. Every unfinished " +
		"item is found from the queue (and the flags tally/unqueued/ID of items claimed by name without a queue " +
		"entry) and its record read. So the cost follows the items in flight and those finished lately, not the " +
		"items finished: at 1,000,000 items, 98% done, see bench/results/operator.md. The tally is used while " +
		"tally/TRUSTED exists: lease init makes it, a writer that cannot keep the tally removes it, and lease fsck " +
		"--repair checks a table's tally and trusts it (a table made before the tally gets it that way). Without it, " +
		"and with --full, the summary counts from the shards' listings instead: a done or failed record whose status " +
		"marker ID.STATUS.ATTEMPTS (a second name beside it) has the record's own inode number is counted from the " +
		"listing, every other record is read, so those counts are those of reading every record whoever wrote the " +
		"table, at the cost of listing two names per finished item. -v says which way the counts were made, and " +
		"--json has it as method (tally or listing). " +
		"-o prometheus prints the counts in the Prometheus text format for node_exporter's textfile " +
		"collector: lease_items{state} with the states free, leased, expired, committing, released, done, failed " +
		"and corrupt (they partition the items), lease_queue_entries, lease_records, lease_attempts_total (a counter; lease retry " +
		"resets an item's), lease_retried_items, lease_owners, lease_owner_live_leases{owner}, " +
		"lease_filesystem_files_free and lease_filesystem_files (inodes), lease_census_timestamp_seconds and " +
		"lease_census_duration_seconds, each with HELP and TYPE lines and the table's root as label root (so the " +
		"files of several tables can share one collector directory). -o json is --json. " +
		"Beside queued it shows the inodes left on the table's filesystem (one statfs) and how " +
		"many more items they hold: each takes two, its queue entry and its record, and a filesystem can run out of " +
		"inodes long before bytes (a 1 GiB ext4 has 65,536; per-user inode quotas, as Lustre and GPFS sites set, are " +
		"not in statfs); in --json as inodes {known, free, total, room_items}. An add, claim or publish that runs out of " +
		"space says so once, with the count of what was not done and whether inodes or bytes ran out, and lease add " +
		"warns before it queues more items than the free inodes hold.\n\n" +
		"--watch (-w; implies --summary) counts the table again and again, as watch(1) or top do, for an operator " +
		"watching a campaign: one count at a time, each started --interval after the start of the one before (2s by " +
		"default), or as soon as the one before ends when it took longer, so that a watch never loads the " +
		"filesystem with more than one summary per interval. On a terminal it redraws one screen in place (the " +
		"cursor to the top left corner, the screen cleared below): the count of each state (queued, free, leased, " +
		"expired, committing, released, done, failed, corrupt), the rate of items finished (done and failed) per second " +
		"over the last minute and the last five, from the differences of successive counts (over the time since the " +
		"first count while the watch is younger), the ETA (the items left, neither done nor failed, at the last " +
		"minute's rate; - while the rate is 0 or not known), the owners with their live leases and their last renewal " +
		"(the newest renewed_at of their live leases, as an age; the one that renewed longest ago first, so that a " +
		"worker that stopped renewing shows at the top), and the items that failed most (up to 10, by attempts: their " +
		"state and ID), the lists cut to the terminal's height. When stdout is not a terminal it prints one line per " +
		"count for a log: the time (UTC, RFC 3339), then key=value fields queued, free, leased, expired, committing, " +
		"released, done, failed, corrupt, left, rate_1m and rate_5m (items/s, - when not known), eta (- when not known), " +
		"owners (how many hold live leases) and census (the count's duration). With --json it prints one JSON object " +
		"per count per line: the fields of --summary --json (now is when the count started, the clock it counted at; among them owner_renewed, each owner's last renewal in " +
		"seconds since the epoch, and most_failed, up to 10 objects {id, attempts, state} with the most attempts " +
		"first, ties by ID), and refresh (the count's number, from 1), left (items neither done nor failed), rate_1m " +
		"and rate_5m (items finished per second; null before the second count) and eta_s (seconds; null when the rate " +
		"is 0 or not known, 0 when nothing is left). These fields are stable: new ones may be added, none is renamed " +
		"or removed. The attempts of the items counted from their status markers are the markers' names, so the two " +
		"lists cost no read more than the counts. --count N stops after N counts; --until-done stops once no item is " +
		"queued, leased or committing any more: the campaign is over (a table with nothing queued is over at once). " +
		"SIGINT, SIGTERM or SIGHUP stop it as they stop renew-batch --watch, with exit status 0: the count in progress " +
		"is dropped, the last screen stays and the cursor is given back. docs/status-watch.txt shows a screen of a " +
		"campaign.",
	Exit: []Item{
		{"0", "Every record read was shown or filtered out, and every ID given has a record or a queue entry."},
		{"1", "An ID given has neither a record nor a queue entry (reported on stderr as `missing ID 0 no record (PATH)`)."},
		{"2", "Usage, configuration or input error (a bad ID, no table at ROOT)."},
		{"3", "A record that does not validate was met; it is reported on stderr and left for lease fsck."},
		{"4", "The table could not be read."},
		{"", "With --watch: 0 when stopped by a signal, --count or --until-done; 3 when the last count met a record that does not validate; 4 as soon as a count cannot read the table."},
	},
	Examples: []Example{
		{"Show what is held now, soonest expiry first:", "lease status --live --sort expires"},
		{"Ask about one item, as etcdctl lease timetolive does:", "lease status \"$ID\""},
		{"The first 20 items still waiting in the queue for their first claim:", "lease status --state queued --limit 20"},
		{"The leases that ran out (their holders are gone), as IDs for lease revoke or a new claim:", "lease status --expired -o id"},
		{"Recover the held set of one worker as `ID TOKEN` lines:", "lease status --live --owner \"$LEASE_OWNER\" -o id-token > held"},
		{"Count done items with jq:", "lease status --json | jq -s 'map(select(.status == \"done\")) | length'"},
		{"Watch a campaign on the terminal, counting every 5 seconds, until it is over:", "lease status --watch --interval 5s --until-done"},
		{"Log the progress of a campaign from its job script, one line a minute:", "lease status --watch --interval 1m --until-done | tee progress.log"},
		{"Feed node_exporter's textfile collector every minute (cron); the file is written whole, then renamed, so the collector never reads half of it:",
			"lease status --summary -o prometheus > /var/lib/node_exporter/textfile/lease.prom.$$ && mv /var/lib/node_exporter/textfile/lease.prom.$$ /var/lib/node_exporter/textfile/lease.prom"},
	},
	SeeAlso: []string{"lease-fsck(1)", "lease-revoke(1)"},
}

func init() {
	register(&Descriptor{Rank: 130, Command: statusCommand, Manual: statusManual, Launch: Once})
}

// statusOptions are the parsed flags and arguments of lease status.
type statusOptions struct {
	ids      []leasefmt.ID // only these, when given
	kinds    []leasefmt.Kind
	live     bool
	expired  bool
	owner    string // "" for every holder
	sortKey  string
	output   string
	sorted   bool // --sort given: --json follows it too
	noHeader bool
	states   map[leasefmt.Status]bool // --state: only these; nil for every status
	limit    int                      // --limit: at most this many rows; 0 for no limit
}

// statusQueued is the status lease status shows for an item of the queue
// that has no record yet: waiting for its first claim.
const statusQueued leasefmt.Status = "queued"

// statusStates are the statuses --state takes.
var statusStates = []leasefmt.Status{statusQueued, leasefmt.Leased, leasefmt.Committing, leasefmt.Released, leasefmt.Done, leasefmt.Failed}

// statusRow is one record selected for the view.
type statusRow struct {
	kind leasefmt.Kind
	rec  *leasefmt.Record
	path string // absolute
}

func runStatus(c *cli.Context) error {
	if !c.Bool("watch") {
		for _, f := range []string{"interval", "count", "until-done"} {
			if c.IsSet(f) {
				return usageErr("--%s is for --watch", f)
			}
		}
	}
	if c.Bool("summary") || c.Bool("watch") {
		return runStatusSummary(c)
	}
	if c.Bool("full") {
		return usageErr("--full is for --summary: it says how the counts are made")
	}
	opts, err := parseStatus(c)
	if err != nil {
		return err
	}
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	if c.IsSet("owner") { // LEASE_OWNER or a file's owner names this worker, not a filter
		opts.owner = e.set.Owner
	}
	st, err := e.open(false)
	if err != nil {
		return err
	}
	v := newStatusView(e, opts)
	var counts statusCounts
	code, err := selectStatus(e, st, opts, &counts, func(r statusRow) error { return v.add(r) })
	if errors.Is(err, errStatusLimit) {
		err = nil // --limit rows streamed: nothing more to read
	}
	if err == nil {
		err = v.flush()
	}
	if err != nil {
		return cli.Exit(leasefmt.Bound(err.Error()), exitcode.IO)
	}
	for _, p := range st.ReadLocked() {
		fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease status: %s is held by a read lock, which no lease takes: every writer of its shard is kept out (lease fsck names it)", p)))
	}
	if e.verbose {
		fmt.Fprintf(e.errw, "lease status: records=%d queued=%d shown=%d live=%d expired=%d corrupt=%d missing=%d duration=%.3fs\n",
			counts.read, counts.queued, counts.shown, counts.live, counts.expired, counts.corrupt, counts.missing, time.Since(e.started).Seconds())
	}
	if code != exitcode.OK {
		return cli.Exit("", code)
	}
	return nil
}

// parseStatus reads the flags and arguments of lease status.
func parseStatus(c *cli.Context) (*statusOptions, error) {
	o := &statusOptions{kinds: []leasefmt.Kind{leasefmt.Work}, live: c.Bool("live"), expired: c.Bool("expired"),
		sortKey: c.String("sort"), output: c.String("output"), sorted: c.IsSet("sort"), noHeader: c.Bool("no-headers")}
	if o.live && o.expired {
		return nil, usageErr("--live and --expired exclude each other")
	}
	switch o.sortKey {
	case "id", "expires", "owner", "status":
	default:
		return nil, usageErr("--sort %s: want id, expires, owner or status", leasefmt.Quote(o.sortKey))
	}
	switch o.output {
	case "table", "wide", "id", "id-token", "json":
	default:
		return nil, usageErr("--output %s: want table, wide, id, id-token or json", leasefmt.Quote(o.output))
	}
	if c.Bool("json") {
		if c.IsSet("output") && o.output != "json" {
			return nil, usageErr("--json and --output %s exclude each other", o.output)
		}
		o.output = "json"
	}
	if c.Bool("groups") {
		o.kinds = append(o.kinds, leasefmt.Group, leasefmt.Target)
	}
	if c.IsSet("state") {
		o.states = map[leasefmt.Status]bool{}
		for _, w := range strings.Split(c.String("state"), ",") {
			st := leasefmt.Status(strings.TrimSpace(w))
			if !slices.Contains(statusStates, st) {
				return nil, usageErr("--state %s: want queued, leased, committing, released, done or failed (comma-separated)", leasefmt.Quote(w))
			}
			o.states[st] = true
		}
	}
	if o.limit = c.Int("limit"); o.limit < 0 || c.IsSet("limit") && o.limit == 0 {
		return nil, usageErr("--limit %d: want a count of rows, at least 1", o.limit)
	}
	if c.NArg() > 0 {
		items, err := idOrTokenArgs(c)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			o.ids = append(o.ids, it.ID)
		}
	}
	return o, nil
}

// statusCounts are what -v reports.
type statusCounts struct{ read, queued, shown, live, expired, corrupt, missing int }

// selectStatus calls fn with every record the options select, and returns
// the exit status of what it met (1 missing, 3 corrupt); an error is a
// table that could not be read, or fn's.
func selectStatus(e *env, st *commit.Store, o *statusOptions, n *statusCounts, fn func(statusRow) error) (int, error) {
	code := exitcode.OK
	var fnErr error
	visit := func(k leasefmt.Kind, rel string, rec *leasefmt.Record, rerr error) {
		if fnErr != nil {
			return
		}
		if rerr != nil {
			n.corrupt++
			code = exitcode.Worse(code, exitcode.Corrupt)
			fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("corrupt %s (lease fsck checks it)", rerr)))
			return
		}
		if rec.Status == statusQueued {
			n.queued++
		} else {
			n.read++
		}
		live := rec.Live(e.now)
		expired := (rec.Status == leasefmt.Leased || rec.Status == leasefmt.Committing) && !live
		if live {
			n.live++
		}
		if expired {
			n.expired++
		}
		if o.live && !live || o.expired && !expired || o.owner != "" && rec.Owner != o.owner ||
			o.states != nil && !o.states[rec.Status] {
			return
		}
		n.shown++
		fnErr = fn(statusRow{kind: k, rec: rec, path: st.Abs(rel)})
	}
	if len(o.ids) > 0 {
		for _, id := range o.ids {
			found := false
			for _, k := range o.kinds {
				rec, err := st.Read(e.ctx(), k, id)
				if err != nil && !errors.Is(err, leasefmt.ErrCorrupt) {
					return code, err
				}
				if rec == nil && err == nil {
					continue
				}
				found = true
				visit(k, st.RecordPath(k, id), rec, err)
			}
			if !found {
				// No record: an item of the queue not claimed yet?
				_, err := st.FS().Lstat(st.QueuePath(id))
				if err == nil {
					visit(leasefmt.Work, st.QueuePath(id), queuedRecord(id), nil)
					continue
				}
				if !isNotExist(err) {
					return code, err
				}
			}
			if !found {
				n.missing++
				code = exitcode.Worse(code, exitcode.Negative)
				fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("missing %s 0 no record (%s)", id, st.Abs(st.RecordPath(leasefmt.Work, id)))))
			}
		}
		return code, fnErr
	}
	// The queue is listed only when its rows can be selected: a queued
	// item is not live, not expired and has no owner.
	queue := (o.states == nil || o.states[statusQueued]) && !o.live && !o.expired && o.owner == ""
	for _, k := range o.kinds {
		err := scanRecords(e.ctx(), st, k, queue && k == leasefmt.Work, func(rel string, rec *leasefmt.Record, rerr error) bool {
			visit(k, rel, rec, rerr)
			return fnErr == nil
		})
		if err != nil {
			return code, err
		}
		if fnErr != nil {
			return code, fnErr
		}
	}
	return code, nil
}

// scanRecords calls fn for every record file of kind k, in shard and ID
// order, with the record or the reason it does not validate, and with
// queue for every item of the queue that has no record (queuedRecord).
// Files that are not records (lock files, temp files) are skipped: fsck
// reports those. It stops when fn returns false.
func scanRecords(ctx context.Context, st *commit.Store, k leasefmt.Kind, queue bool, fn func(rel string, rec *leasefmt.Record, err error) bool) error {
	n := st.Table().Shards(k)
	for sh := 0; sh < n; sh++ {
		dir := st.ShardDir(k, sh)
		ents, err := st.FS().ReadDir(dir)
		if err != nil {
			if isNotExist(err) {
				continue
			}
			if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
				// A link or a file planted as the shard directory.
				if !fn(dir, nil, fmt.Errorf("%w: %w", leasefmt.ErrCorrupt, err)) {
					return nil
				}
				continue
			}
			return err
		}
		names := make([]string, 0, len(ents))
		for _, ent := range ents {
			if strings.HasSuffix(ent.Name(), ".json") && !strings.HasPrefix(ent.Name(), ".") {
				names = append(names, strings.TrimSuffix(ent.Name(), ".json"))
			}
		}
		ents = nil
		// The items of the queue that have no record yet are shown as
		// queued, in the same ID order.
		recorded := len(names)
		if queue {
			if names, err = queuedNames(st, sh, names); err != nil {
				return err
			}
		}
		has := map[string]bool{}
		for _, name := range names[:recorded] {
			has[name] = true
		}
		sort.Strings(names)
		for i, name := range names {
			if i > 0 && names[i-1] == name {
				continue
			}
			id, err := leasefmt.ParseID(name)
			if err != nil {
				continue // not a record name: fsck reports it
			}
			if id.Shard(n) != sh {
				continue // misplaced: fsck reports it
			}
			if !has[name] {
				if !fn(st.QueuePath(id), queuedRecord(id), nil) {
					return nil
				}
				continue
			}
			rec, err := st.Read(ctx, k, id)
			if rec == nil && err == nil {
				continue // removed while scanning
			}
			if !fn(st.RecordPath(k, id), rec, err) {
				return nil
			}
		}
	}
	return nil
}

// queuedNames appends to names the IDs of queue shard sh (the queue
// shard of work shard sh) that are not among them. A queue without the
// shard's directory has none.
func queuedNames(st *commit.Store, sh int, names []string) ([]string, error) {
	ents, err := st.FS().ReadDir(st.QueueShardDir(sh))
	if err != nil {
		if isNotExist(err) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return names, nil // no queue here (lease fsck reports a planted one)
		}
		return names, err
	}
	have := make(map[string]bool, len(names))
	for _, name := range names {
		have[name] = true
	}
	for _, ent := range ents {
		if name := ent.Name(); ent.Type().IsRegular() && !have[name] {
			names = append(names, name)
		}
	}
	return names, nil
}

// queuedRecord is the row of id, an item of the queue without a record.
func queuedRecord(id leasefmt.ID) *leasefmt.Record {
	return &leasefmt.Record{Kind: leasefmt.Work, ID: id, Status: statusQueued}
}
