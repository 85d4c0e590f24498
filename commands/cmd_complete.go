package commands

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

var completeCommand = &cli.Command{
	Name:      "complete",
	Usage:     "finish held leases (fenced): leased -> done, or leased -> committing -> done publishing a result",
	ArgsUsage: "[FILE...]",
	Description: "For each `ID TOKEN` line whose token is current and live, writes the record as `done`,\n" +
		"durably (a complete that publishes nothing has nothing a crash could leave half done, so it\n" +
		"writes no `committing` record first). Completing again with the token that completed it\n" +
		"succeeds (a retry is safe). The input is validated whole (a malformed or repeated line is\n" +
		"exit 2, nothing written) into a temporary file, then completed in chunks of 16384, each chunk\n" +
		"one group commit whose lines are printed once they are durable, so memory does not grow\n" +
		"with the input; SIGINT or SIGTERM stops it after the chunk in flight, with a line on stderr\n" +
		"saying how far it got (exit 130 or 143); the same complete run again finishes it. A progress\n" +
		"bar goes to stderr when it is a terminal and the run takes longer than a second (--progress\n" +
		"always|never overrides).\n" +
		"\n" +
		"With --publish NAME (exactly one input line) the result is published exactly once (fenced\n" +
		"staging): the holder of token TOKEN of ID stages it as ROOT/stage/ID.TOKEN/NAME (the directory\n" +
		"that lease run passes to its command as LEASE_STAGE; a script that claims by itself makes it\n" +
		"with mkdir -m 0700, not -p: on a shared table a directory already there was made by another\n" +
		"account, which could have put a link in it). NAME may also be given as that path. The staged\n" +
		"file is fsynced, the record is written `committing` with \"publish\":\"NAME\", the file is moved\n" +
		"to ROOT/public/NAME with a durable cross-directory replace (public/ fsynced, then the staging\n" +
		"directory), never over an existing name, and the record is written `done`. A stale holder's\n" +
		"files sit in its own staging directory and are never published. A crash between the move and\n" +
		"done is settled by whoever meets the record next under its lock: the next claim or lease fsck\n" +
		"--repair rolls it forward to done when the result is in public/, or back to released when it\n" +
		"is still staged; the same complete --publish retried with the same token resumes it.\n" +
		"\n" +
		"A result is a regular file or a directory (every file of it, any names): all of it is fsynced\n" +
		"(each file, then each directory, deepest first) before the one rename that makes it visible,\n" +
		"so it appears in public/ whole, once. --publish . (or the staging directory's own path, e.g.\n" +
		"\"$LEASE_STAGE\") publishes the whole staging directory as ROOT/public/ID/, a name that no other\n" +
		"item's result can take: what lease run --complete does with what CMD left in LEASE_STAGE. A\n" +
		"result holding a symbolic link or anything but files and directories is refused (exit 2), and\n" +
		"so is a file with more than one link (a hard link: another name, perhaps outside the table,\n" +
		"reaches it) or an entry not owned by the account publishing it. On a shared table (lease init\n" +
		"--shared) publication then gives every file and directory of the result the group's modes,\n" +
		"whatever the umask it was staged under, through a descriptor of each entry opened without\n" +
		"following links, never by its name.\n" +
		"\n" +
		"On a full filesystem (ENOSPC, or a quota's EDQUOT) the holder still completes its live lease:\n" +
		"its record writes go through a spare of the table's reserve, ROOT/reserve/, overwritten in place\n" +
		"and swapped with the record, allocating nothing (lease-format(5), DURABILITY; -v counts\n" +
		"spares_used). A --publish whose result cannot move into public/ for want of space fails (exit 4)\n" +
		"with the record still committing, as any failed publish.",
	Flags: flags(commonFlags(), batchFlags(), []cli.Flag{
		progressFlag(),
		&cli.StringFlag{Name: "publish", Usage: "publish ROOT/stage/ID.TOKEN/`NAME` (a file or a directory) as ROOT/public/NAME between committing and done (NAME or that path); . publishes the whole staging directory as ROOT/public/ID/", TakesFile: true},
	}),
	Action: runComplete,
}

// completeManual is the hand-written part of lease-complete(1).
var completeManual = Manual{
	Exit: withInterrupt(commonExit),
	Files: []Item{
		{"ROOT/stage/ID.TOKEN/NAME", "A result staged by the holder of token TOKEN of ID (same filesystem as the table); only that holder's directory is ever published from."},
		{"ROOT/public/NAME", "The published result; never replaced."},
		{"ROOT/public/ID/", "The whole staging directory of ID, published with --publish . (or by lease run --complete); never replaced."},
	},
	Examples: []Example{
		{"Complete the item a worker finished, if its lease is still the worker's (exit 1 and nothing written otherwise):", "grep \"^$id \" held | lease complete"},
		{"Complete every item listed in finished (ID TOKEN lines the workers wrote when done):", "lease complete finished"},
		{"Publish a result exactly once, only if the lease is still current (exit 1 and nothing moved otherwise):",
			"mkdir -m 0700 \"$LEASE_ROOT/stage/$ID.$TOKEN\"\ncp crash.bin \"$LEASE_ROOT/stage/$ID.$TOKEN/$ID.crash\"\necho \"$ID $TOKEN\" | lease complete --publish \"$ID.crash\""},
		{"Inside lease run, the staging directory is given:", "cp crash.bin \"$LEASE_STAGE/$LEASE_ID.crash\" &&\n  echo \"$LEASE_ID $LEASE_TOKEN\" | lease complete --publish \"$LEASE_ID.crash\""},
		{"Publish every finding of a fuzzer (the same names in every instance) under the item's own ID, as ROOT/public/ID/:",
			"cp -r out/default/crashes \"$LEASE_STAGE/\" &&\n  echo \"$LEASE_ID $LEASE_TOKEN\" | lease complete --publish \"$LEASE_STAGE\""},
	},
	SeeAlso: []string{"lease-verify(1)", "lease-run(1)", "lease-fsck(1)"},
}

func init() {
	register(&Descriptor{Rank: 70, Command: completeCommand, Manual: completeManual, Launch: Alone, Records: "completions", Worker: true, NotDone: "completed"})
}

func runComplete(c *cli.Context) error {
	mode := c.String("progress")
	if err := checkProgress(mode); err != nil {
		return usageErr("%v", err)
	}
	if !c.IsSet("publish") {
		return runBatch(c, batchSpec{name: "complete", kind: leasefmt.Work, spread: true, input: tokenLines,
			run: func(e *env, st *commit.Store, items []commit.Item) []commit.Result {
				return st.Complete(e.ctx(), items)
			},
			stream: &streamSpec{progress: mode, bar: "completing", units: "leases", unique: true, chunk: recordChunk(),
				scan: func(c *cli.Context, sp *spool) error { return spoolInput(c, c.Args().Slice(), formTokens, sp) },
				interrupted: func(done, total, ok int) string {
					return fmt.Sprintf("lease complete: interrupted after %d of %d leases: %d completed durably (the lines printed); the rest were not tried", done, total, ok)
				}}})
	}
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	lines, err := readInput(c, c.Args().Slice())
	if err != nil {
		return err
	}
	items, err := parseItems(lines, true)
	if err != nil {
		return err
	}
	if len(items) != 1 {
		return usageErr("--publish takes exactly one ID TOKEN line, got %d", len(items))
	}
	name, err := stagedName(e.root(), items[0], c.String("publish"))
	if err != nil {
		return err
	}
	st, err := e.open(false)
	if err != nil {
		return err
	}
	r, err := st.CompletePublish(e.ctx(), items[0], name)
	if errors.Is(err, commit.ErrStaged) {
		return usageErr("--publish: %v; nothing written", err)
	}
	if r.Cause == nil && errors.Is(err, unix.ENOSPC) {
		r.Cause = err // a full filesystem, said as such by the report (nospace.go)
	}
	return e.report("complete", []commit.Result{r}, e.snapshot(st))
}

// stagedName maps --publish NAME or PATH to the name of a result in the
// staging directory of it: a bare name, or a path directly inside
// ROOT/stage/ID.TOKEN/; "." or that directory's own path is the whole
// staging directory (leasefmt.PublishStage).
func stagedName(root string, it commit.Item, p string) (string, error) {
	if p == leasefmt.PublishStage {
		return p, nil // the staging directory itself: ROOT/public/ID/
	}
	if p != "" && !strings.Contains(p, "/") {
		if err := leasefmt.CheckPublishName(p); err != nil {
			return "", usageErr("--publish: %v", err)
		}
		return p, nil // a bare name: ROOT/stage/ID.TOKEN/NAME
	}
	abs := mustAbs(p)
	dir := filepath.Join(root, filepath.FromSlash(layout.StagePath(it.ID, it.Token)))
	if abs == dir {
		return leasefmt.PublishStage, nil
	}
	if filepath.Dir(abs) != dir {
		if filepath.Dir(abs) == filepath.Join(root, layout.StageDir) {
			return "", usageErr("--publish %s: results are staged in the holder's own directory %s/ (fenced staging), not in %s/ itself",
				leasefmt.Quote(p), dir, filepath.Join(root, layout.StageDir))
		}
		return "", usageErr("--publish %s: not a file directly inside %s/, the staging directory of %s token %d", leasefmt.Quote(p), dir, it.ID, it.Token)
	}
	name := filepath.Base(abs)
	if err := leasefmt.CheckPublishName(name); err != nil {
		return "", usageErr("--publish: %v", err)
	}
	return name, nil
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	return a
}
