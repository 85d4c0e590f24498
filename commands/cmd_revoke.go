package commands

import (
	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

var revokeCommand = &cli.Command{
	Name:      "revoke",
	Usage:     "take leases back from their holders (operator): the lease ends now and its token is fenced out",
	ArgsUsage: "ID...|-",
	Description: "For each ID (given as arguments, or `ID` or `ID TOKEN` lines on stdin with - or no argument;\n" +
		"a token given is ignored), whoever holds it: a leased or committing record becomes `released`,\n" +
		"expiring now and keeping its token, so the holder's `lease verify`, `renew-batch` and `complete`\n" +
		"are refused from then on, and the next claim gets a larger token. A `lease run` holding it\n" +
		"notices within a second and stops its command (SIGTERM, then SIGKILL after --grace; exit\n" +
		"124). A committing record that names a published result is settled first: done when the\n" +
		"result is already in public/, released when it is still staged. Prints `ID TOKEN` (the\n" +
		"token revoked) for each lease ended; an ID that is done, released or has no record goes to\n" +
		"stderr as `REASON ID TOKEN detail` (exit 1). Like `etcdctl lease revoke`, for an operator\n" +
		"taking work back from a worker that hangs; a worker giving up its own lease uses `lease release`.",
	Flags:  flags(commonFlags(), batchFlags()),
	Action: runRevoke,
}

// revokeManual is the hand-written part of lease-revoke(1).
var revokeManual = Manual{
	Examples: []Example{
		{"Take an item back from a worker that hangs (its lease run stops its command within a second):", "lease revoke $ID"},
		{"Take back every lease a dead node held:", "lease status --json --live | jq -r 'select(.owner | startswith(\"node-7/\")) | .id' | lease revoke"},
	},
	SeeAlso: []string{"lease-release(1)", "lease-run(1)", "lease-status(1)", "etcdctl(1)"},
}

func init() {
	register(&Descriptor{Rank: 60, Command: revokeCommand, Manual: revokeManual, Launch: Distributed, Records: "revocations", NotDone: "revoked"})
}

func runRevoke(c *cli.Context) error {
	return runBatch(c, batchSpec{name: "revoke", kind: leasefmt.Work, spread: true, input: idOrTokenArgs,
		run: func(e *env, st *commit.Store, items []commit.Item) []commit.Result {
			return st.Revoke(e.ctx(), items)
		}})
}

// idOrTokenArgs reads IDs as arguments, or `ID` or `ID TOKEN` lines from
// stdin, tokens ignored: revoke takes what lease status prints or what a
// worker holds.
func idOrTokenArgs(c *cli.Context) ([]commit.Item, error) {
	args := c.Args().Slice()
	if len(args) == 0 || len(args) == 1 && args[0] == "-" {
		lines, err := readInput(c, []string{"-"})
		if err != nil {
			return nil, err
		}
		for i := range lines {
			if len(lines[i].fields) == 2 {
				if _, err := leasefmt.ParseToken(lines[i].fields[1]); err != nil {
					return nil, usageErr("%s:%d: %s: %v", lines[i].src, lines[i].n, lines[i].fields[0], err)
				}
				lines[i].fields = lines[i].fields[:1]
			}
		}
		return parseItems(lines, false)
	}
	return idArgs(c)
}
