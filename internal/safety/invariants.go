package safety

// The invariants checker.check (check.go) holds each crash state to: every
// record is a version that existed and no acknowledged one is lost, live
// holders keep their leases, groups stay consistent, published results are
// never lost or torn, and later claims get larger tokens.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// laterVersion checks that got is the acknowledged version a, a version
// the operation wrote after it, or what fsck makes of one of those.
func (c *checker) laterVersion(k recKey, a, got *leasefmt.Record) string {
	if got.Token < a.Token {
		return fmt.Sprintf("the token went back to %d", got.Token)
	}
	vs := c.versions[k]
	from := -1
	for i, vi := range vs {
		if sameRecord(vi.rec, a) {
			from = i
		}
	}
	if from < 0 {
		if sameRecord(got, a) {
			return ""
		}
		return fmt.Sprintf("is token %d %s, and the acknowledged version was never written", got.Token, got.Status)
	}
	for _, vi := range vs[from:] {
		if sameRecord(got, vi.rec) || rolledForward(vi.rec, got) || rolledBack(vi.rec, got) || releasedByRepair(vi.rec, got) {
			return ""
		}
	}
	return fmt.Sprintf("is token %d %s until %v, not that version or a later one", got.Token, got.Status, got.ExpiresAt)
}

// knownVersion checks that a record after recovery is one that existed:
// the starting one, one the operation wrote, or a repair of one of those.
func (c *checker) knownVersion(k recKey, got *leasefmt.Record) string {
	cands := []*leasefmt.Record{}
	if b := c.baseRecs[k]; b != nil {
		cands = append(cands, b)
	}
	for _, vi := range c.versions[k] {
		cands = append(cands, vi.rec)
	}
	for _, r := range cands {
		if sameRecord(got, r) || rolledForward(r, got) || rolledBack(r, got) || releasedByRepair(r, got) {
			return ""
		}
	}
	if placeholderByRepair(got) {
		return "" // fsck's released record in place of one it quarantined
	}
	if k.kind == leasefmt.Target && got.Status == leasefmt.Released && c.baseRecs[k] == nil {
		// fsck releasing a torn group writes its listed targets that have
		// no record as released, so that the group agrees with them
		return ""
	}
	return fmt.Sprintf("after recovery is token %d %s, which no writer wrote", got.Token, got.Status)
}

// holders: for every ID whose last acknowledged version is a live lease at
// the operation's clock, the recovered record still is that holder's live
// lease (or the holder's own later change of it).
func (c *checker) holders(recs map[recKey]*leasefmt.Record, acks []Ack) []string {
	var v []string
	// Records durable before the operation were acknowledged to someone
	// when they were written: their holders count too.
	last := map[recKey]*leasefmt.Record{}
	for k, r := range c.baseRecs {
		if !c.planted[k] {
			last[k] = r
		}
	}
	for _, a := range acks {
		if a.Record != nil {
			last[recKey{a.Record.Kind, a.Record.ID}] = a.Record
		}
	}
	now := c.sc.Now
	for k, a := range last {
		if !a.Live(now) {
			continue
		}
		got := recs[k]
		switch {
		case got == nil:
			v = append(v, fmt.Sprintf("%s: holder %s (token %d) acknowledged live, no record after recovery", k, a.Owner, a.Token))
		case got.Token != a.Token:
			v = append(v, fmt.Sprintf("%s: holder %s (token %d) acknowledged live until %v, but after recovery the token is %d (%s)", k, a.Owner, a.Token, a.ExpiresAt, got.Token, got.Owner))
		case got.Status == leasefmt.Released && a.Status != leasefmt.Released:
			// the holder's own release, not yet acknowledged: fine when the
			// operation wrote it; a repair's release of a live lease is not.
			if !c.wrote(k, got) {
				v = append(v, fmt.Sprintf("%s: holder %s (token %d) acknowledged live until %v, released by recovery", k, a.Owner, a.Token, a.ExpiresAt))
			}
		case (got.Status == leasefmt.Leased || got.Status == leasefmt.Committing) && got.ExpiresAt < a.ExpiresAt && !c.wrote(k, got):
			// (a renewal may shorten a lease: that is the holder's own write)
			v = append(v, fmt.Sprintf("%s: holder %s acknowledged live until %v, after recovery only until %v", k, a.Owner, a.ExpiresAt, got.ExpiresAt))
		}
	}
	return v
}

func (c *checker) wrote(k recKey, r *leasefmt.Record) bool {
	for _, vi := range c.versions[k] {
		if sameRecord(vi.rec, r) {
			return true
		}
	}
	return false
}

// groupInvariant: docs/design.md#records, all targets of a live group carry the group's
// token, owner and expires_at; and a live target belongs to a live group
// that lists it.
func groupInvariant(recs map[recKey]*leasefmt.Record, now float64) []string {
	var v []string
	for k, g := range recs {
		if k.kind != leasefmt.Group || !g.Live(now) {
			continue
		}
		for _, tid := range g.Targets {
			t := recs[recKey{leasefmt.Target, tid}]
			switch {
			case t == nil:
				v = append(v, fmt.Sprintf("live group %s (token %d): target %s has no record", g.ID.Short(), g.Token, tid.Short()))
			case t.Group != g.ID || t.Token != g.Token || t.Owner != g.Owner || t.ExpiresAt != g.ExpiresAt || !t.Live(now):
				v = append(v, fmt.Sprintf("live group %s (token %d %s until %v): target %s is group %s token %d %s %s until %v",
					g.ID.Short(), g.Token, g.Owner, g.ExpiresAt, tid.Short(), t.Group.Short(), t.Token, t.Owner, t.Status, t.ExpiresAt))
			}
		}
	}
	for k, t := range recs {
		if k.kind != leasefmt.Target || !t.Live(now) {
			continue
		}
		g := recs[recKey{leasefmt.Group, t.Group}]
		listed := false
		if g != nil {
			for _, x := range g.Targets {
				if x == t.ID {
					listed = true
				}
			}
		}
		if g == nil || !g.Live(now) || !listed || g.Token != t.Token {
			v = append(v, fmt.Sprintf("live target %s (group %s token %d) has no live group manifest listing it with that token", t.ID.Short(), t.Group.Short(), t.Token))
		}
	}
	sort.Strings(v)
	return v
}

// published: a staged result is never lost and never torn (it stays in
// its staging directory, is published, or is moved to lost+found/ as
// stale); an acknowledged publish is in public/; at most one result per ID
// is in public/, and an ID with a result there is done naming it; a done
// record that names a result has it in public/.
func (c *checker) published(t *Tree, recs map[recKey]*leasefmt.Record, acks []Ack) []string {
	var v []string
	found := map[string]bool{} // contents under lost+found/
	t.Walk(func(p string, dir bool, data []byte) {
		if !dir && strings.HasPrefix(p, layout.LostFound+"/") {
			found[string(data)] = true
		}
	})
	for name, data := range c.public {
		if p, _, ok := t.Get(layout.PublicDir + "/" + name); !ok || string(p) != string(data) {
			v = append(v, fmt.Sprintf("public/%s was published before the operation, and after recovery it is gone or changed", name))
		}
	}
	perID := map[leasefmt.ID][]string{}
	for rel, data := range c.staged {
		// rel is ID.TOKEN/REST: published as public/REST (a file or a
		// directory NAME, REST = NAME[/...]) or, the whole staging
		// directory, as public/ID/REST.
		top, rest, _ := strings.Cut(rel, "/")
		id, _, isStage := layout.ParseStageName(top)
		s, _, inStage := t.Get(layout.StageDir + "/" + rel)
		if inStage && string(s) != string(data) {
			v = append(v, fmt.Sprintf("stage/%s changed: %q", rel, trunc(s, 80)))
		}
		published := false
		name, _, _ := strings.Cut(rest, "/")
		if p, _, ok := t.Get(layout.PublicDir + "/" + rest); ok && string(p) == string(data) {
			published = true
		} else if p, _, ok := t.Get(layout.PublicDir + "/" + string(id) + "/" + rest); isStage && ok && string(p) == string(data) {
			published, name = true, leasefmt.PublishStage
		}
		if published && isStage {
			perID[id] = append(perID[id], name)
		}
		if !inStage && !published && !found[string(data)] {
			v = append(v, fmt.Sprintf("staged result %s is in neither stage/, public/ nor lost+found/", rel))
		}
	}
	for id, names := range perID {
		sort.Strings(names)
		names = slices.Compact(names)
		if len(names) > 1 {
			v = append(v, fmt.Sprintf("work/%s has %d results in public/: %v (at most one per ID)", id, len(names), names))
		}
		if r := recs[recKey{leasefmt.Work, id}]; r == nil || r.Status != leasefmt.Done || r.Publish != names[0] {
			st := "no record"
			if r != nil {
				st = fmt.Sprintf("%s token %d publish %q", r.Status, r.Token, r.Publish)
			}
			shown := names[0]
			if shown == leasefmt.PublishStage {
				shown = string(id) + "/"
			}
			v = append(v, fmt.Sprintf("work/%s has public/%s, but after recovery its record is %s, not done naming it", id, shown, st))
		}
	}
	for _, a := range acks {
		for name, data := range a.PublishedFiles {
			if p, _, ok := t.Get(layout.PublicDir + "/" + name); !ok || string(p) != string(data) {
				v = append(v, fmt.Sprintf("public/%s acknowledged as published (a directory result) but missing or different after recovery", name))
			}
		}
		if a.Published == "" {
			continue
		}
		p, _, ok := t.Get(layout.PublicDir + "/" + a.Published)
		if !ok || string(p) != string(a.PublishedData) {
			v = append(v, fmt.Sprintf("public/%s acknowledged as published but missing or different after recovery", a.Published))
		}
	}
	for k, r := range recs {
		if k.kind == leasefmt.Work && r.Status == leasefmt.Done && r.Publish != "" {
			name := r.Publish
			if name == leasefmt.PublishStage {
				name = string(k.id)
			}
			if _, _, ok := t.Get(layout.PublicDir + "/" + name); !ok {
				v = append(v, fmt.Sprintf("%s is done with publish %s, but public/%s is missing", k, r.Publish, name))
			}
		}
	}
	return v
}

// maxTokens is the largest token of each work ID the scenario knows:
// written by the operation or in the base, acknowledged in acks, or the
// scenario's MinToken.
func (c *checker) maxTokens(acks []Ack) map[leasefmt.ID]int64 {
	maxTok := map[leasefmt.ID]int64{}
	for k := range c.versions {
		if k.kind == leasefmt.Work {
			maxTok[k.id] = max(maxTok[k.id], 0)
			if b := c.baseRecs[k]; b != nil {
				maxTok[k.id] = b.Token
			}
		}
	}
	for _, a := range acks {
		if a.Record != nil && a.Record.Kind == leasefmt.Work {
			maxTok[a.Record.ID] = max(maxTok[a.Record.ID], a.Record.Token)
		}
	}
	for id, tok := range c.sc.MinToken {
		maxTok[id] = max(maxTok[id], tok)
	}
	return maxTok
}

// workIDs is every work ID the scenario knows (maxTokens), sorted.
func (c *checker) workIDs(acks []Ack) []leasefmt.ID {
	var ids []leasefmt.ID
	for id := range c.maxTokens(acks) {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// claimAfter claims every known work ID long after every lease expired:
// nothing may be corrupt, and each token granted must exceed every token
// acknowledged for that ID.
func (c *checker) claimAfter(t *Tree, acks []Ack) []string {
	var v []string
	rec := NewRecorder(t)
	st, err := commit.Open(Root, commit.Options{FS: rec, Writers: 1})
	if err != nil {
		return []string{fmt.Sprintf("after recovery the table does not open: %v", err)}
	}
	maxTok := c.maxTokens(acks)
	var items []commit.Item
	for _, id := range c.workIDs(acks) {
		items = append(items, commit.Item{ID: id})
	}
	for _, r := range at(st, c.sc.Now+1e6).Claim(context.Background(), items, "checker", 10) {
		switch r.Outcome {
		case commit.OK:
			if r.Token <= maxTok[r.ID] {
				v = append(v, fmt.Sprintf("work/%s: a claim after recovery got token %d, not above %d", r.ID, r.Token, maxTok[r.ID]))
			}
		case commit.Done, commit.Failed:
		default:
			v = append(v, fmt.Sprintf("work/%s: a claim after recovery got %s: %s", r.ID, r.Outcome.Reason(), r.Detail))
		}
	}
	return v
}
