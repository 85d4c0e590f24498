package commands

import (
	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
)

var groupReleaseCommand = &cli.Command{
	Name:      "group-release",
	Usage:     "release held target groups (fenced), each all-or-nothing; a filter over GID TOKEN lines",
	ArgsUsage: "[FILE...]",
	Description: "Releases each group whose manifest token is the line's token and whose lease is live: the\n" +
		"manifest and every target become `released`, expiring now, and keep their token, so the\n" +
		"next claim of the group or of any target gets a larger one. The checks, locks, shared\n" +
		"directory fsyncs, restore on failure and output are those of group-renew.",
	Flags:  flags(commonFlags(), batchFlags()),
	Action: runGroupRelease,
}

// groupReleaseManual is the hand-written part of lease-group-release(1).
var groupReleaseManual = Manual{
	Files: []Item{
		{"ROOT/targets/SS/ID.json", "Target lease records."},
		{"ROOT/groups/SS/GID.json", "Group manifests."},
	},
	Examples: []Example{
		{"Release a group and its targets:", "lease group-release group"},
	},
	SeeAlso: []string{"lease-group-claim(1)", "lease-group-renew(1)"},
}

func init() {
	register(&Descriptor{Rank: 110, Command: groupReleaseCommand, Manual: groupReleaseManual, Launch: Alone, Records: "releases", NotDone: "released"})
}

func runGroupRelease(c *cli.Context) error {
	return runGroupFilter(c, func(e *env, st *commit.Store, items []commit.Item) ([]commit.GroupResult, error) {
		return st.ReleaseGroups(e.ctx(), items)
	})
}
