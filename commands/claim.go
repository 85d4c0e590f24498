package commands

import (
	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
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
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	items, err := idArgs(c)
	if err != nil {
		return err
	}
	first := c.Int("first")
	if c.IsSet("first") && first < 1 {
		return usageErr("--first %d: want at least 1", first)
	}
	st, err := e.open(true)
	if err != nil {
		return err
	}
	var res []commit.Result
	if c.IsSet("first") {
		res = st.ClaimFirst(items, first, e.set.Owner, e.now, e.set.TTL)
	} else {
		res = st.Claim(items, e.set.Owner, e.now, e.set.TTL)
	}
	err = e.report("claim", res, e.snapshot(st))
	if c.IsSet("first") {
		return firstExit(res, err)
	}
	return err
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
		case commit.Corrupt, commit.IOError:
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
