package commands

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
)

var addCommand = &cli.Command{
	Name:      "add",
	Usage:     "enqueue work IDs into the table's queue and print the IDs added",
	ArgsUsage: "[FILE...]",
	Description: "Adds each ID (one per line of the FILEs, or of stdin with - or no argument; `ID TOKEN`\n" +
		"lines are taken by their ID, so `lease add < held` works) to the table's queue: an empty\n" +
		"file queue/SS/ID that says \"ID is work to do\" (docs/design.md#queue), from which `lease claim --next`\n" +
		"and `lease run --next` take work. Idempotent: an ID already queued, or whose record is\n" +
		"done, is not added again, and a line repeated in the input adds its ID once. Prints each\n" +
		"ID added, in input order, at its first line (under mpirun too); IDs passed over print\n" +
		"nothing (counted with -v and in --json).\n" +
		"The whole input is read and validated before anything is written (a malformed line anywhere\n" +
		"is exit 2 and nothing changes), into a temporary file in $TMPDIR, unlinked at once (48 bytes\n" +
		"an ID), so that memory does not grow with the input. The IDs are then added in chunks of\n" +
		"32768: entries are created by the writer pool without a file fsync (the name is the\n" +
		"content), each queue shard directory a chunk touched is fsynced once (group commit: a\n" +
		"chunk, not the whole input, is the unit), and only then are the chunk's IDs printed. A\n" +
		"crash midway leaves the IDs printed durable and the rest not started, or made but not yet\n" +
		"durable; the same add run again finishes it (it is idempotent). SIGINT or SIGTERM stops it\n" +
		"after the chunk in flight, with `lease add: interrupted after N of M IDs: K added durably;\n" +
		"...` on stderr, and exit 130 or 143. A progress bar goes to stderr when it is a terminal and\n" +
		"the add runs longer than a second (--progress always|never overrides). Under mpirun the\n" +
		"batch runs as one program, split by shard, in one piece (not chunked: rank 0 holds the\n" +
		"input).\n" +
		"\n" +
		"With --content, the arguments are files whose content is each item's input: the ID is the\n" +
		"SHA-256 of the content (as lease id --content prints it), and the content is stored in the\n" +
		"table, at ROOT/input/SS/ID, durably, before the ID is queued; lease run hands CMD its path as\n" +
		"LEASE_INPUT. With - the paths are read from stdin, one per line (or NUL-terminated with --null,\n" +
		"as find -print0 writes them); a line `ID PATH`, as lease id --content --with-name and\n" +
		"sha256sum print, is checked to hash to ID.",
	Flags: flags(commonFlags(), batchFlags(), []cli.Flag{
		&cli.BoolFlag{Name: "content", Usage: "the arguments are files: store each one's content as its item's input (ROOT/input/SS/ID) and queue its SHA-256"},
		&cli.BoolFlag{Name: "null", Usage: "with --content -: the paths on stdin end with NUL, not newline"},
		progressFlag(),
	}),
	Action: runAdd,
}

// addManual is the hand-written part of lease-add(1).
var addManual = Manual{
	Exit: withInterrupt(commonExit),
	Examples: []Example{
		{"Start a campaign from a corpus directory (one ID per seed file, its SHA-256):", "sha256sum corpus/* | cut -c1-64 | lease add > /dev/null"},
		{"Add the children a fuzzer found, deduplicated by content:", "sha256sum out/queue/* | cut -c1-64 | lease add"},
		{"Queue again what a worker held (ID TOKEN lines):", "lease add < held"},
		{"Start a campaign whose items carry their inputs (a worker finds each one at $LEASE_INPUT):", "lease add --content corpus/* > /dev/null"},
		{"Add the children a fuzzer found, with their content, from inside lease run:", "find out/default/queue -type f -print0 | lease add --content --null - > /dev/null"},
	},
	SeeAlso: []string{"lease-claim(1)", "lease-run(1)", "lease-status(1)"},
}

func init() {
	register(&Descriptor{Rank: 20, Command: addCommand, Manual: addManual, Launch: Distributed, Records: "added", NotDone: "added"})
}

func runAdd(c *cli.Context) error {
	if c.Bool("content") {
		return runAddContent(c)
	}
	if c.Bool("null") {
		return usageErr("--null is for the paths of --content -")
	}
	mode := c.String("progress")
	if err := checkProgress(mode); err != nil {
		return usageErr("%v", err)
	}
	spec := batchSpec{name: "add", kind: leasefmt.Work, spread: true, input: queueInput,
		run: func(e *env, st *commit.Store, items []commit.Item) []commit.Result {
			return st.Enqueue(e.ctx(), items)
		}}
	spec.before = warnInodes
	spec.stream = &streamSpec{progress: mode, bar: "adding", units: "IDs",
		scan: func(c *cli.Context, sp *spool) error {
			return contentHint(spoolInput(c, c.Args().Slice(), formQueue, sp), c.Args().Slice())
		},
		interrupted: func(done, total, ok int) string {
			return fmt.Sprintf("lease add: interrupted after %d of %d IDs: %d added durably; run the same add again to finish (it is idempotent)", done, total, ok)
		}}
	spec.idOnly = true
	spec.silent = func(r commit.Result) bool { return r.Outcome == commit.Queued || r.Outcome == commit.Done }
	spec.code = addCode
	return runBatch(c, spec)
}

// addCode: IDs already queued or done are no failure; corrupt records, I/O
// errors and lock timeouts are.
func addCode(res []commit.Result) int {
	code := exitcode.OK
	for _, r := range res {
		switch r.Outcome {
		case commit.Corrupt, commit.IOError, commit.LockTimeout:
			code = exitcode.Worse(code, exitcode.Of(r.Outcome))
		}
	}
	return code
}

// queueInput reads the IDs to enqueue from the FILE arguments or stdin: a
// lone ID or `ID TOKEN` per line (the token is checked, then ignored),
// blank lines and # comments skipped, every line validated before anything
// is written. Repeated IDs are kept (Enqueue adds them once). It streams:
// a million lines cost the IDs, not the lines.
func queueInput(c *cli.Context) ([]commit.Item, error) {
	var items []commit.Item
	err := eachInput(c, c.Args().Slice(), func(r io.Reader, src string) error {
		return scanItems(r, src, formQueue, func(it commit.Item, _ int) error {
			items = append(items, it)
			return nil
		})
	})
	return items, contentHint(err, c.Args().Slice())
}

// contentHint adds to err, a bad line of one of the FILEs (lists of IDs),
// that --content queues files' contents: lease add corpus/* is the
// mistake it most often is. The error stays a usage error (exit 2).
func contentHint(err error, args []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, a := range args {
		if a != "-" && strings.HasPrefix(msg, a+":") {
			return usageErr("%s (the FILEs of lease add are lists of IDs, one a line: to queue the files themselves, each one's content an item's input, use lease add --content)", msg)
		}
	}
	return err
}
