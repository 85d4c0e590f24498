package commands

import (
	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
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
	return runBatch(c, batchSpec{name: "verify", kind: leasefmt.Work, spread: true, input: tokenLines,
		run: func(e *env, st *commit.Store, items []commit.Item) []commit.Result {
			return st.Verify(items, e.now)
		}})
}
