package commands

import (
	"errors"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/leasefmt"
)

var groupClaimCommand = &cli.Command{
	Name:      "group-claim",
	Usage:     "claim a group of targets all-or-nothing and print GID TOKEN",
	ArgsUsage: "TARGET...|-",
	Description: "Claims every TARGET (arguments, or one per line on stdin with - or no argument) and the\n" +
		"group manifest groups/SS/GID.json with one token, strictly larger than every earlier token\n" +
		"of the group and of each target, and one expires_at (now + --ttl); prints `GID TOKEN`.\n" +
		"All or nothing: when the manifest is live, or any target is live under another lease,\n" +
		"nothing is written and each conflicting target goes to stderr as\n" +
		"`held GID - target ID: held by OWNER (group G, token T) for Ns more (PATH)` (exit 1); a\n" +
		"manifest or target that exists but does not validate is never taken as free (exit 3).\n" +
		"Without --group, GID is the SHA-256, in lowercase hex, of the target IDs sorted in byte\n" +
		"order and joined by \"\\n\" with no trailing newline: for targets A < B, sha256sum of the\n" +
		"129 bytes `printf '%s\\n%s' A B`. A group whose manifest would exceed 4 KiB (more than 57\n" +
		"targets with a short owner) is refused with exit 2 before anything is written.\n" +
		"Locks: the manifest's first, then the targets' in ascending ID order, so concurrent\n" +
		"claims of overlapping groups never deadlock; past --lock-timeout the claim exits 5. If a\n" +
		"write or a directory fsync fails, the records already replaced are restored under the\n" +
		"locks and the command exits 4.",
	Flags: flags(commonFlags(), batchFlags(), []cli.Flag{
		&cli.StringFlag{Name: "group", Usage: "group `GID` (64 lowercase hex; default: SHA-256 of the sorted target IDs joined by \\n)"},
	}),
	Action: runGroupClaim,
}

// groupClaimManual is the hand-written part of lease-group-claim(1).
var groupClaimManual = Manual{
	Files: []Item{
		{"ROOT/targets/SS/ID.json", "Target lease records."},
		{"ROOT/groups/SS/GID.json", "Group manifests."},
	},
	Examples: []Example{
		{"Claim three targets as one group; prints `GID TOKEN`:", "lease group-claim $T1 $T2 $T3 > group"},
		{"Claim the targets listed in a file:", "lease group-claim - < targets > group"},
	},
	SeeAlso: []string{"lease-group-renew(1)", "lease-group-release(1)"},
	Args:    "targets",
}

func init() {
	register(&Descriptor{Rank: 90, Command: groupClaimCommand, Manual: groupClaimManual, Launch: Alone, Records: "groups", NotDone: "granted"})
}

func runGroupClaim(c *cli.Context) error {
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	items, err := idArgs(c)
	if err != nil {
		return err
	}
	targets := make([]leasefmt.ID, len(items))
	for i, it := range items {
		targets[i] = it.ID
	}
	gid := groups.ID(targets)
	if c.IsSet("group") {
		if gid, err = leasefmt.ParseID(c.String("group")); err != nil {
			return usageErr("--group: %v", err)
		}
	}
	// Before the table is opened: nothing is touched for a group that
	// cannot be claimed at all.
	if err := groups.CheckInput(gid, targets, e.set.Owner, e.set.TTL); err != nil {
		return groupInputErr(err)
	}
	st, err := e.open(false)
	if err != nil {
		return err
	}
	res, err := st.ClaimGroup(e.ctx(), gid, targets, e.set.Owner, e.set.TTL)
	if err != nil {
		return groupInputErr(err)
	}
	return e.reportGroups("group-claim", []commit.GroupResult{res}, e.snapshot(st))
}

func groupInputErr(err error) error {
	if errors.Is(err, groups.ErrInput) {
		return usageErr("%s", strings.TrimPrefix(err.Error(), groups.ErrInput.Error()+": "))
	}
	return cli.Exit(leasefmt.Bound(err.Error()), exitcode.IO)
}

// runGroupFilter runs group-renew or group-release: a filter over
// `GID TOKEN` lines, validated whole (no duplicate group) before the table
// is opened.
func runGroupFilter(c *cli.Context, run func(e *env, st *commit.Store, items []commit.Item) ([]commit.GroupResult, error)) error {
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	items, err := tokenLines(c)
	if err != nil {
		return err
	}
	st, err := e.open(false)
	if err != nil {
		return err
	}
	res, err := run(e, st, items)
	if err != nil {
		return groupInputErr(err)
	}
	return e.reportGroups(c.Command.Name, res, e.snapshot(st))
}
