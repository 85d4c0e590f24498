package commands

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/leasefmt"
)

var releaseCommand = &cli.Command{
	Name:      "release",
	Usage:     "release held leases (fenced); a filter over ID TOKEN lines",
	ArgsUsage: "[FILE...]",
	Description: "Releases each lease whose token is current and live: the record becomes `released`,\n" +
		"keeps its token, and the next claim gets a larger one. Prints the lines released;\n" +
		"refusals go to stderr as `REASON ID TOKEN detail`. The input is validated whole (a malformed\n" +
		"or repeated line is exit 2, nothing written), then released in chunks of 16384, each chunk one\n" +
		"group commit whose lines are printed once durable; SIGINT or SIGTERM stops it after the chunk\n" +
		"in flight, with a line on stderr saying how far it got (exit 130 or 143).\n" +
		"\n" +
		"With --failed, each release is a release after a failed run: it counts an attempt in the\n" +
		"record (\"attempts\") and keeps the run's exit status (--failed=STATUS) and the end of its\n" +
		"standard error (--stderr FILE); once the item's attempts reach max_attempts the record\n" +
		"becomes `failed` instead, which claims refuse until lease retry puts it back, and its queue\n" +
		"entry is removed.",
	Flags: flags(commonFlags(), batchFlags(), []cli.Flag{
		&cli.GenericFlag{Name: "failed", Value: &failedValue{},
			Usage: "release after a failed run: count an attempt (failed at max_attempts); --failed=STATUS keeps the run's exit status STATUS (1-255)"},
		&cli.StringFlag{Name: "stderr", Usage: "with --failed: keep the end of `FILE` (the run's standard error; its last 1 KiB, control characters left out) in the record", TakesFile: true},
		settingFlag("max-attempts"),
	}),
	Action: runRelease,
}

// releaseManual is the hand-written part of lease-release(1).
var releaseManual = Manual{
	More: "A shell worker that runs its items itself counts their failures with --failed, so that an item " +
		"that fails every time (a poison input) stops being handed out after max_attempts runs (lease config, " +
		"LEASE_MAX_ATTEMPTS, --max-attempts; default 3; 0 counts without ever failing). The released record " +
		"keeps \"attempts\", \"exit_status\" and \"stderr_tail\" (lease status shows them); a failed one keeps " +
		"them until lease retry, and lease status --summary counts it. A lease that is not current is refused " +
		"as without --failed, and nothing is counted.",
	Examples: []Example{
		{"Release everything held:", "lease release held"},
		{"Release one lease:", "echo \"$ID $TOKEN\" | lease release"},
		{"A shell worker: complete the item when the fuzzer succeeds, else count a failed attempt with its status and the end of its stderr:",
			"if ./fuzz-one.sh \"$ID\" 2> err.log; then\n  echo \"$ID $TOKEN\" | lease complete\nelse\n  echo \"$ID $TOKEN\" | lease release --failed=$? --stderr err.log\nfi"},
	},
	SeeAlso: []string{"lease-claim(1)", "lease-complete(1)", "lease-retry(1)", "lease-revoke(1)"},
}

// failedValue is --failed[=STATUS]: a flag.Value that is also a boolean
// flag for the flag package, as --wait is.
type failedValue struct {
	set    bool
	status int
}

func (f *failedValue) IsBoolFlag() bool { return true }

func (f *failedValue) String() string {
	switch {
	case f == nil || !f.set:
		return ""
	case f.status == 0:
		return "true"
	}
	return strconv.Itoa(f.status)
}

func (f *failedValue) Set(s string) error {
	switch s {
	case "true":
		f.set, f.status = true, 0
		return nil
	case "false":
		f.set = false
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > leasefmt.MaxExitStatus {
		return fmt.Errorf("want an exit status from 1 to %d, got %s", leasefmt.MaxExitStatus, leasefmt.Quote(s))
	}
	f.set, f.status = true, n
	return nil
}

func init() {
	register(&Descriptor{Rank: 50, Command: releaseCommand, Manual: releaseManual, Launch: Distributed, Records: "releases", NotDone: "released"})
}

func runRelease(c *cli.Context) error {
	fv, _ := c.Generic("failed").(*failedValue)
	var failed *failedValue
	if fv != nil && fv.set {
		given := *fv
		*fv = failedValue{} // the flag outlives one run in-process (tests)
		failed = &given
	}
	if failed == nil {
		if c.IsSet("stderr") {
			return usageErr("--stderr keeps the end of a failed run's standard error: give it with --failed")
		}
		return runBatch(c, batchSpec{name: "release", kind: leasefmt.Work, spread: true, input: tokenLines,
			run: func(e *env, st *commit.Store, items []commit.Item) []commit.Result {
				return st.Release(c.Context, items)
			}, stream: tokenStream("release", "released")})
	}
	f := commit.Failure{ExitStatus: failed.status}
	if c.IsSet("stderr") {
		tail, err := readTail(c.String("stderr"))
		if err != nil {
			return usageErr("--stderr %s: %v", leasefmt.Quote(c.String("stderr")), err)
		}
		f.Stderr = tail
	}
	return runBatch(c, batchSpec{name: "release", kind: leasefmt.Work, spread: true, input: tokenLines,
		run: func(e *env, st *commit.Store, items []commit.Item) []commit.Result {
			return st.ReleaseFailed(c.Context, items, f, e.set.MaxAttempts)
		}, stream: tokenStream("release", "released")})
}

// readTail reads the end of the file name: at most 4 KiB, of which the
// record keeps leasefmt.Tail.
func readTail(name string) ([]byte, error) {
	f, fi, err := userfile.Open(name)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	const keep = 4 * leasefmt.MaxTail
	if fi.Size() > keep {
		if _, err := f.Seek(fi.Size()-keep, io.SeekStart); err != nil {
			return nil, unwrapPath(err)
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, keep))
	if err != nil {
		return nil, unwrapPath(err)
	}
	return b, nil
}

// unwrapPath is the cause of a path error, whose path the message names
// already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
