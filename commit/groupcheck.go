package commit

// The consistency checks of target groups: what a group's holder's
// records must say (targetHeld, CheckGroup, CheckTarget, used by the group
// operations and by lease fsck) and the read-only fencing check of groups.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/leasetool/lease/leasefmt"
)

func targetHeld(m *leasefmt.Record, tid leasefmt.ID, t *leasefmt.Record) (Outcome, string) {
	switch {
	case t == nil:
		return Corrupt, "no target record, but the group lists it (lease fsck checks the group)"
	case t.Token > m.Token:
		return StaleToken, fmt.Sprintf("target claimed since by group %s (token %d, owner %s)", t.Group, t.Token, leasefmt.Quote(t.Owner))
	}
	if d := targetDisagrees(m, t); d != "" {
		return Corrupt, d + " (lease fsck checks the group)"
	}
	return OK, ""
}

// targetDisagrees says how a target record of a group's current token
// differs from its manifest; "" when it carries the manifest's lease.
func targetDisagrees(m, t *leasefmt.Record) string {
	var diffs []string
	if t.Group != m.ID {
		diffs = append(diffs, fmt.Sprintf("group %s", t.Group))
	}
	if t.Token != m.Token {
		diffs = append(diffs, fmt.Sprintf("token %d, group's %d", t.Token, m.Token))
	}
	if t.Status != m.Status {
		diffs = append(diffs, fmt.Sprintf("status %s, group's %s", t.Status, m.Status))
	}
	if t.Owner != m.Owner {
		diffs = append(diffs, fmt.Sprintf("owner %s, group's %s", leasefmt.Quote(t.Owner), leasefmt.Quote(m.Owner)))
	}
	if t.ExpiresAt != m.ExpiresAt {
		diffs = append(diffs, fmt.Sprintf("expires_at %s, group's %s", leasefmt.AppendTime(nil, t.ExpiresAt), leasefmt.AppendTime(nil, m.ExpiresAt)))
	}
	if len(diffs) == 0 {
		return ""
	}
	return "target disagrees with its group manifest: " + strings.Join(diffs, ", ")
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

// CheckGroup lists the disagreements between a group manifest and the
// records of its targets (targets[id] nil or absent: no record); none when
// they agree. It does not depend on the clock, so fsck can use it on any
// table. For each target the manifest lists, the target record must exist
// and either carry the manifest's lease (same group and token, status,
// owner and expires_at) or have been claimed since by a larger token, at a
// time the manifest's lease had ended (claimed_at >= the manifest's
// expires_at). A record in targets that names this group with a token at
// least the manifest's must be listed by it.
func CheckGroup(m *leasefmt.Record, targets map[leasefmt.ID]*leasefmt.Record) []string {
	var out []string
	listed := make(map[leasefmt.ID]bool, len(m.Targets))
	for _, tid := range m.Targets {
		listed[tid] = true
		t := targets[tid]
		switch {
		case t == nil:
			out = append(out, fmt.Sprintf("target %s: listed by group %s but has no record", tid, m.ID))
		case t.Token > m.Token && t.Group == m.ID:
			out = append(out, fmt.Sprintf("target %s: carries token %d of group %s, newer than its manifest's %d (a claim that did not finish)", tid, t.Token, m.ID, m.Token))
		case t.Token > m.Token && t.ClaimedAt < m.ExpiresAt:
			out = append(out, fmt.Sprintf("target %s: claimed by group %s (token %d) at %s, while group %s (token %d) held it until %s",
				tid, t.Group, t.Token, leasefmt.AppendTime(nil, t.ClaimedAt), m.ID, m.Token, leasefmt.AppendTime(nil, m.ExpiresAt)))
		case t.Token > m.Token:
			// Claimed by a later lease after this group's lease ended.
		case t.Token < m.Token:
			out = append(out, fmt.Sprintf("target %s: token %d is older than group %s's token %d (a claim that did not finish)", tid, t.Token, m.ID, m.Token))
		default:
			if d := targetDisagrees(m, t); d != "" {
				out = append(out, fmt.Sprintf("target %s: %s", tid, strings.TrimPrefix(d, "target ")))
			}
		}
	}
	extra := make([]leasefmt.ID, 0)
	for tid, t := range targets {
		if !listed[tid] && t != nil && t.Group == m.ID && t.Token >= m.Token {
			extra = append(extra, tid)
		}
	}
	slices.Sort(extra)
	for _, tid := range extra {
		out = append(out, fmt.Sprintf("target %s: names group %s with token %d, but the manifest (token %d) does not list it", tid, m.ID, targets[tid].Token, m.Token))
	}
	return out
}

// CheckTarget lists the disagreements between a target record and the
// manifest of the group it names (m nil: no manifest); none when they
// agree. Together with CheckGroup it gives, for any instant: a live target's
// group manifest is live and lists it.
func CheckTarget(t, m *leasefmt.Record) []string {
	if m == nil {
		return []string{fmt.Sprintf("target %s: names group %s, which has no manifest", t.ID, t.Group)}
	}
	if m.ID != t.Group {
		return []string{fmt.Sprintf("target %s: names group %s, not %s", t.ID, t.Group, m.ID)}
	}
	if !slices.Contains(m.Targets, t.ID) {
		if t.Token >= m.Token {
			return []string{fmt.Sprintf("target %s: names group %s with token %d, but the manifest (token %d) does not list it", t.ID, m.ID, t.Token, m.Token)}
		}
		return nil // the group was claimed again since, without this target
	}
	return CheckGroup(&leasefmt.Record{Kind: m.Kind, ID: m.ID, Status: m.Status, Owner: m.Owner, Token: m.Token,
		ClaimedAt: m.ClaimedAt, RenewedAt: m.RenewedAt, ExpiresAt: m.ExpiresAt, Targets: []leasefmt.ID{t.ID}},
		map[leasefmt.ID]*leasefmt.Record{t.ID: t})
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
			out, d = Corrupt, targetDisagrees(m, t)+" (lease fsck checks the group)"
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
