package safety

// The target-group scenarios: the starting table of groups G1-G3 and
// group-claim, group-renew and group-release over it.

import (
	"context"
	"fmt"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/leasefmt"
)

func targets(from, to int) []leasefmt.ID {
	var out []leasefmt.ID
	for i := from; i < to; i++ {
		out = append(out, TestID(i))
	}
	return out
}

// The groups of the starting table of the group scenarios (4 target
// shards):
//
//	G1 = targets 200-203, held by alice, token 1, live until 2050
//	G2 = targets 204-205, bob, token 1, expired
//	G3 = targets 210-225, held by erin, token 1, live until 2050
//	targets 206-207 and 230-245 have no record
var (
	groupG1 = groups.ID(targets(200, 204))
	groupG2 = groups.ID(targets(204, 206))
	groupG3 = groups.ID(targets(210, 226))
)

func claimGroupAt(st *commit.Store, ts []leasefmt.ID, owner string, now, ttl float64) error {
	res, err := at(st, now).ClaimGroup(context.Background(), groups.ID(ts), ts, owner, ttl)
	if err != nil {
		return err
	}
	if res.Outcome != commit.OK {
		return fmt.Errorf("setup group %s: %s %s", res.ID.Short(), res.Outcome.Reason(), res.Detail)
	}
	return nil
}

func setupGroups(st *commit.Store, fsys seam.FS) error {
	if err := claimGroupAt(st, targets(200, 204), "alice", T0, HeldTTL); err != nil {
		return err
	}
	if err := claimGroupAt(st, targets(204, 206), "bob", T0, 10); err != nil {
		return err
	}
	return claimGroupAt(st, targets(210, 226), "erin", T0, HeldTTL)
}

// ackGroups acknowledges the manifests of the groups reported done; the
// group invariant (checked on every crash state) covers their targets.
func ackGroups(r *Run, op string, res []commit.GroupResult, err error) {
	if err != nil {
		r.Outcome(commit.IOError)
		return
	}
	for _, g := range res {
		r.Outcome(g.Outcome)
		if g.Outcome == commit.OK {
			r.Ack(Ack{Op: op, Record: g.Manifest})
		}
	}
}

func groupClaimRun(ts []leasefmt.ID) func(r *Run) {
	return func(r *Run) {
		res, err := r.At(Now).ClaimGroup(context.Background(), groups.ID(ts), ts, "carol", TTL)
		ackGroups(r, "group-claim", []commit.GroupResult{res}, err)
	}
}

// GroupScenarios are the target-group operations: group-claim (over an
// expired group, refused by a held target, and of 16 targets),
// group-renew and group-release.
func GroupScenarios() []*Scenario {
	g := func(name string, run func(r *Run)) *Scenario {
		return &Scenario{Name: name, Table: workTable(), Setup: setupGroups, Run: run, Writers: 1, Now: Now, Group: true}
	}
	return []*Scenario{
		g("group-claim", groupClaimRun(targets(204, 208))),
		g("group-claim/held", groupClaimRun([]leasefmt.ID{TestID(203), TestID(206)})),
		g("group-claim/16", groupClaimRun(targets(230, 246))),
		g("group-renew", func(r *Run) {
			res, err := r.At(Now).RenewGroups(context.Background(), []commit.Item{{ID: groupG1, Token: 1}, {ID: groupG2, Token: 1}}, TTL)
			ackGroups(r, "group-renew", res, err)
		}),
		g("group-renew/16", func(r *Run) {
			res, err := r.At(Now).RenewGroups(context.Background(), []commit.Item{{ID: groupG3, Token: 1}}, TTL)
			ackGroups(r, "group-renew", res, err)
		}),
		g("group-release", func(r *Run) {
			res, err := r.At(Now).ReleaseGroups(context.Background(), []commit.Item{{ID: groupG1, Token: 1}})
			ackGroups(r, "group-release", res, err)
		}),
		g("group-claim+renew", func(r *Run) {
			ts := targets(204, 208)
			res, err := r.At(Now).ClaimGroup(context.Background(), groups.ID(ts), ts, "carol", TTL)
			ackGroups(r, "group-claim", []commit.GroupResult{res}, err)
			if err != nil || res.Outcome != commit.OK {
				return
			}
			rn, err := r.At(Now+10).RenewGroups(context.Background(), []commit.Item{{ID: res.ID, Token: res.Token}}, TTL)
			ackGroups(r, "group-renew", rn, err)
		}),
	}
}
