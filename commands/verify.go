package commands

import (
	"github.com/urfave/cli/v2"
)

var verifyCommand = &cli.Command{
	Name:      "verify",
	Usage:     "fencing check, read-only: pass through ID TOKEN lines whose token is current and live",
	ArgsUsage: "[FILE...]",
	Description: "Reads `ID TOKEN` lines and prints those whose token is the record's current token of a\n" +
		"live lease (leased or committing, not expired). It takes no lock and writes nothing; use\n" +
		"it right before publishing: `lease verify < held | lease complete`.",
	Flags:  commonFlags(),
	Action: runVerify,
}

func runVerify(c *cli.Context) error {
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
	st, err := e.open(false)
	if err != nil {
		return err
	}
	return e.report("verify", st.Verify(items, e.now), e.snapshot(st))
}
