package commands

import (
	"github.com/urfave/cli/v2"
)

var releaseCommand = &cli.Command{
	Name:      "release",
	Usage:     "release held leases (fenced); a filter over ID TOKEN lines",
	ArgsUsage: "[FILE...]",
	Description: "Releases each lease whose token is current and live: the record becomes `released`,\n" +
		"keeps its token, and the next claim gets a larger one. Prints the lines released;\n" +
		"refusals go to stderr as `REASON ID TOKEN detail`.",
	Flags:  flags(commonFlags(), batchFlags()),
	Action: runRelease,
}

func runRelease(c *cli.Context) error {
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
	st, err := e.open(true)
	if err != nil {
		return err
	}
	return e.report("release", st.Release(items, e.now), e.snapshot(st))
}
