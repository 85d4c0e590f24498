package commands

import (
	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
)

var groupRenewCommand = &cli.Command{
	Name:      "group-renew",
	Usage:     "renew held target groups, each all-or-nothing; a filter over GID TOKEN lines",
	ArgsUsage: "[FILE...]",
	Description: "Reads `GID TOKEN` lines (as printed by group-claim) from the FILEs or stdin, validates all\n" +
		"of them, then renews every group whose manifest token is the line's token and whose lease\n" +
		"is live, with all its targets, until now + --ttl (without --ttl, for the group's own duration). Each group is renewed under all its locks\n" +
		"(manifests first in GID order, then targets in ID order) only when every target carries the\n" +
		"group's lease: a target claimed since by another lease is stale-token, any other\n" +
		"disagreement corrupt (exit 3, left for lease fsck). The directories of all groups of the\n" +
		"invocation are fsynced once each. stdout carries exactly the lines renewed, in input\n" +
		"order; each other line goes to stderr as `REASON GID TOKEN detail`, one line per target\n" +
		"that refused its group. If a write or directory fsync fails, every record already replaced\n" +
		"is restored under the locks and no group is reported renewed (exit 4).",
	Flags:  flags(commonFlags(), batchFlags()),
	Action: runGroupRenew,
}

// groupRenewManual is the hand-written part of lease-group-renew(1).
var groupRenewManual = Manual{
	Files: []Item{
		{"ROOT/targets/SS/ID.json", "Target lease records."},
		{"ROOT/groups/SS/GID.json", "Group manifests."},
	},
	Examples: []Example{
		{"Renew a group and all its targets, all or nothing:", "lease group-renew < group > group.new && mv group.new group"},
	},
	SeeAlso: []string{"lease-group-claim(1)", "lease-group-release(1)"},
}

func init() {
	register(&Descriptor{Rank: 100, Command: groupRenewCommand, Manual: groupRenewManual, Launch: Alone, NotDone: "renewed"})
}

func runGroupRenew(c *cli.Context) error {
	return runGroupFilter(c, func(e *env, st *commit.Store, items []commit.Item) ([]commit.GroupResult, error) {
		return st.RenewGroups(e.ctx(), items, e.renewTTL())
	})
}
