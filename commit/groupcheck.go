package commit

// The consistency checks of target groups under the engine's locks: what a
// group's holder's records must say (targetHeld, over the pure rules of
// package groups, which lease fsck uses too) and the read-only fencing
// check of groups.

import (
	"context"
	"fmt"

	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/leasefmt"
)

func targetHeld(m *leasefmt.Record, tid leasefmt.ID, t *leasefmt.Record) (Outcome, string) {
	switch {
	case t == nil:
		return Corrupt, "no target record, but the group lists it (lease fsck checks the group)"
	case t.Token > m.Token:
		return StaleToken, fmt.Sprintf("target claimed since by group %s (token %d, owner %s)", t.Group, t.Token, leasefmt.Quote(t.Owner))
	}
	if d := groups.Disagrees(m, t); d != "" {
		return Corrupt, d + " (lease fsck checks the group)"
	}
	return OK, ""
}

func worstIssue(issues []TargetIssue) Outcome {
	out := issues[0].Outcome
	for _, is := range issues[1:] {
		if is.Outcome.Graver(out) {
			out = is.Outcome
		}
	}
	return out
}

// VerifyGroups checks, without locks or writes, that each item's token is
// the current token of a live group lease and that every target of the
// group carries it (same group and token, live). Results use the group's
// ID and manifest path; a failing target is named in the detail.
func (s *Store) VerifyGroups(ctx context.Context, items []Item) []Result {
	res := make([]Result, len(items))
	for i, it := range items {
		r := &res[i]
		r.Item, r.Path = it, s.Abs(s.RecordPath(leasefmt.Group, it.ID))
		s.verifyGroup(ctx, it, s.now(), r)
		s.count(r.Outcome)
	}
	return res
}

func (s *Store) verifyGroup(ctx context.Context, it Item, now float64, r *Result) {
	m, _, err := s.readRaw(ctx, leasefmt.Group, it.ID)
	if err != nil {
		s.readFailed(err, r)
		return
	}
	r.Record = m
	if m != nil {
		r.Token = m.Token
	}
	if r.Outcome, r.Detail = fenced(it, m, now, s.skew); r.Outcome != OK {
		return
	}
	for _, tid := range m.Targets {
		where := s.Abs(s.RecordPath(leasefmt.Target, tid))
		t, _, err := s.readRaw(ctx, leasefmt.Target, tid)
		if err != nil {
			s.readFailed(err, r)
			r.Detail = fmt.Sprintf("target %s: %s", tid, r.Detail)
			return
		}
		out, d := OK, ""
		switch {
		case t == nil || t.Token > m.Token:
			out, d = targetHeld(m, tid, t)
		case t.Token != m.Token || t.Group != m.ID:
			out, d = Corrupt, groups.Disagrees(m, t)+" (lease fsck checks the group)"
		case t.Status == leasefmt.Released:
			out, d = Released, "target was released"
		case !stillHeld(t, now, s.skew):
			out, d = Expired, fmt.Sprintf("target expired %.1fs ago (clock_skew %gs)", now-t.ExpiresAt, s.skew)
		}
		if out != OK {
			r.Outcome, r.Detail = out, fmt.Sprintf("target %s: %s (%s)", tid, d, where)
			return
		}
	}
	r.Detail = fmt.Sprintf("expires in %s, %d targets", remaining(m, now), len(m.Targets))
}

// lockKey names one lock byte.
