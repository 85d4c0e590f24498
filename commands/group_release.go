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

func runGroupRelease(c *cli.Context) error {
	return runGroupFilter(c, func(e *env, st *commit.Store, items []commit.Item) ([]commit.GroupResult, error) {
		return st.ReleaseGroups(items)
	})
}
