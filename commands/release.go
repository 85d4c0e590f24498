package commands

import (
	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
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

// releaseManual is the hand-written part of lease-release(1).
var releaseManual = Manual{
	Examples: []Example{
		{"Release everything held:", "lease release held"},
		{"Release one lease:", "echo \"$ID $TOKEN\" | lease release"},
	},
	SeeAlso: []string{"lease-claim(1)", "lease-complete(1)", "lease-revoke(1)"},
}

func runRelease(c *cli.Context) error {
	return runBatch(c, batchSpec{name: "release", kind: leasefmt.Work, spread: true, input: tokenLines,
		run: func(e *env, st *commit.Store, items []commit.Item) []commit.Result {
			return st.Release(e.ctx(), items)
		}})
}
