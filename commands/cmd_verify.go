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
		"live lease (leased or committing, not expired). It takes no lock and writes nothing: a fence\n" +
		"for a side effect outside the table (an upload). lease complete and lease release check the\n" +
		"token themselves; piping all of held through verify into complete would complete items still\n" +
		"being worked on. The input is validated whole (a malformed or repeated line is exit 2), then\n" +
		"checked in chunks of 16384 lines, so memory does not grow with the input. With --groups it reads\n" +
		"`GID TOKEN` lines and checks the group manifest and every target of the group.",
	Flags: flags(commonFlags(), []cli.Flag{
		&cli.BoolFlag{Name: "groups", Usage: "check GID TOKEN lines against group manifests and all their targets"},
	}),
	Action: runVerify,
}

// verifyManual is the hand-written part of lease-verify(1).
var verifyManual = Manual{
	Examples: []Example{
		{"Pass on only the lines whose token is current and live:", "lease verify < held > still-held"},
		{"Fence a side effect on the lease:", "echo \"$ID $TOKEN\" | lease verify >/dev/null && upload results/$ID"},
	},
	SeeAlso: []string{"lease-complete(1)", "lease-renew-batch(1)"},
}

func init() {
	register(&Descriptor{Rank: 80, Command: verifyCommand, Manual: verifyManual, Launch: Distributed, Records: "verified", NotDone: "verified"})
}

func runVerify(c *cli.Context) error {
	kind, verify, stream := leasefmt.Work, (*commit.Store).Verify, tokenStream("verify", "verified")
	if c.Bool("groups") {
		kind, verify, stream = leasefmt.Group, (*commit.Store).VerifyGroups, nil // a few groups: read whole
	}
	return runBatch(c, batchSpec{name: "verify", kind: kind, spread: true, input: tokenLines,
		run: func(e *env, st *commit.Store, items []commit.Item) []commit.Result {
			return verify(st, e.ctx(), items)
		}, stream: stream})
}
