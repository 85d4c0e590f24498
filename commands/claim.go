package commands

import (
	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

var claimCommand = &cli.Command{
	Name:      "claim",
	Usage:     "claim free or expired work IDs and print ID TOKEN for each one granted",
	ArgsUsage: "ID...|-",
	Description: "Claims each ID (given as arguments, or one per line on stdin with - or no argument) that\n" +
		"is missing, released or expired, with a token one larger than any earlier claim of it,\n" +
		"for --owner until now + --ttl. Prints `ID TOKEN` for each claim granted, in input order;\n" +
		"each refusal goes to stderr as `REASON ID TOKEN detail` (held, done, corrupt, ...).\n" +
		"With --first N at most N of the candidates are taken, in input order (work-queue use),\n" +
		"and the command exits 0 when it got at least one.",
	Flags: flags(commonFlags(), batchFlags(), []cli.Flag{
		&cli.IntFlag{Name: "first", Usage: "take at most `N` of the candidates, in input order"},
	}),
	Action: runClaim,
}

func runClaim(c *cli.Context) error {
	first := c.Int("first")
	if c.IsSet("first") && first < 1 {
		return usageErr("--first %d: want at least 1", first)
	}
	spec := batchSpec{name: "claim", kind: leasefmt.Work, create: true, spread: !c.IsSet("first"), input: idArgs,
		run: func(e *env, st *commit.Store, items []commit.Item) []commit.Result {
			if c.IsSet("first") {
				return st.ClaimFirst(items, first, e.set.Owner, e.now, e.set.TTL)
			}
			return st.Claim(items, e.set.Owner, e.now, e.set.TTL)
		}}
	if c.IsSet("first") {
		spec.exit = firstExit
	}
	return runBatch(c, spec)
}

// firstExit: with --first, getting at least one is success, and so held
// or done candidates are no failure; corrupt records, I/O errors and lock
// timeouts still are. Getting none is a negative answer.
func firstExit(res []commit.Result, reported error) error {
	got, code := 0, 0
	for _, r := range res {
		switch r.Outcome {
		case commit.OK:
			got++
		case commit.Corrupt, commit.IOError, commit.LockTimeout:
			code = commit.Worse(code, r.Outcome.Exit())
		}
	}
	if code == 0 && got == 0 {
		code = 1
	}
	if code == 0 {
		return nil
	}
	if reported != nil {
		if ec, ok := reported.(cli.ExitCoder); ok && ec.ExitCode() == code {
			return reported
		}
	}
	return cli.Exit("", code)
}
