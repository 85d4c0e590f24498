package commands

import (
	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
)

var retryCommand = &cli.Command{
	Name:      "retry",
	Usage:     "put failed items back in the queue (operator): released, attempts reset",
	ArgsUsage: "ID...|-|--failed",
	Description: "For each ID (given as arguments, or `ID` or `ID TOKEN` lines on stdin with - or no argument;\n" +
		"a token given is ignored), or with --failed every failed item of the table: a `failed`\n" +
		"record (its runs failed max_attempts times) becomes `released`, keeping its token, with its\n" +
		"attempts, exit status and stderr tail cleared, and its queue entry is made again, so that\n" +
		"lease claim --next and lease run --next hand it out. The queue entry is made durable before\n" +
		"the record is written, under the record's lock. Prints `ID TOKEN` for each item put back;\n" +
		"an ID that is not failed (done, held, released: claimable already) or has no record goes to\n" +
		"stderr as `REASON ID TOKEN detail` (exit 1), and nothing is written for it.",
	Flags: flags(commonFlags(), batchFlags(), []cli.Flag{
		&cli.BoolFlag{Name: "failed", Usage: "retry every failed item of the table (every work record is read)"},
	}),
	Action: runRetry,
}

func init() {
	register(&Descriptor{Rank: 65, Command: retryCommand, Manual: retryManual, Launch: Distributed, Records: "retried", NotDone: "retried"})
}

// retryManual is the hand-written part of lease-retry(1).
var retryManual = Manual{
	More: "An item becomes failed when the runs of it that ended in failure reach max_attempts (lease release " +
		"--failed, lease run --complete when its command fails): typically a poison input that crashes the " +
		"harness every time. lease status shows what each failed record kept of its last run (exit_status, " +
		"stderr_tail); once the cause is fixed, lease retry hands the items out again, each with max_attempts " +
		"new attempts.",
	Examples: []Example{
		{"See why items failed, then put them all back:", "lease status --json | jq -r 'select(.status == \"failed\") | [.id, .exit_status, .stderr_tail] | @tsv'\nlease retry --failed"},
		{"Put back one item:", "lease retry \"$ID\""},
	},
	SeeAlso: []string{"lease-release(1)", "lease-run(1)", "lease-status(1)"},
	Args:    "ids",
}

func runRetry(c *cli.Context) error {
	input := idOrTokenArgs
	if c.Bool("failed") {
		if c.NArg() > 0 {
			return usageErr("--failed retries every failed item: give it or IDs, not both")
		}
		input = failedItems
	}
	return runBatch(c, batchSpec{name: "retry", kind: leasefmt.Work, spread: true, input: input,
		run: func(e *env, st *commit.Store, items []commit.Item) []commit.Result {
			return st.RetryFailed(c.Context, items)
		}})
}

// failedItems lists the failed items of the table (retry --failed).
func failedItems(c *cli.Context) ([]commit.Item, error) {
	e, err := newEnv(c)
	if err != nil {
		return nil, err
	}
	st, err := e.open(false)
	if err != nil {
		return nil, err
	}
	ids, err := st.FailedIDs(c.Context)
	if err != nil {
		return nil, cli.Exit(leasefmt.Bound("list the failed items: "+err.Error()), exitcode.IO)
	}
	items := make([]commit.Item, len(ids))
	for i, id := range ids {
		items[i] = commit.Item{ID: id}
	}
	return items, nil
}
