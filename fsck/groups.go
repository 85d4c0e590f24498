package fsck

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/leasefmt"
)

// Group consistency uses the group engine's own rules, groups.Check
// (a manifest against the targets it lists, for any status and clock) and
// groups.CheckTarget (a live target against the manifest of the group it
// names). What disagrees is re-checked under the locks of the group engine
// (the manifest's, then the targets' in ascending ID order, each lock byte
// once), so an in-flight group-renew is never mistaken for damage.

const groupExpected = "each target carries the group's lease (group, token, status, owner, expires_at) or was claimed after it ended"

// groupLocker takes the locks of one group check, each byte once.
type groupLocker struct {
	c       *checker
	held    map[string]bool
	unlocks []func()
}

func (c *checker) newGroupLocker() *groupLocker { return &groupLocker{c: c, held: map[string]bool{}} }

func (l *groupLocker) take(k leasefmt.Kind, id leasefmt.ID) error {
	dir := l.c.st.ShardDir(k, id.Shard(l.c.st.Table().Shards(k)))
	key := fmt.Sprintf("%s/%d", dir, id.LockOffset())
	if l.held[key] {
		return nil
	}
	var unlock func()
	var err error
	if l.c.opt.Repair {
		unlock, err = l.c.st.Lock(l.c.ctx, k, id)
	} else {
		unlock, err = l.c.lockAt(dir, id)
	}
	if err != nil {
		return fmt.Errorf("lock of %s %s: %w", k.Dir(), id, err)
	}
	l.held[key] = true
	l.unlocks = append(l.unlocks, unlock)
	return nil
}

func (l *groupLocker) release() {
	for i := len(l.unlocks) - 1; i >= 0; i-- {
		l.unlocks[i]()
	}
}

// lockGroup takes the manifest's lock, then the targets' in ascending order
// (m.Targets is sorted: the format guarantees it).
func (c *checker) lockGroup(gid leasefmt.ID, targets []leasefmt.ID) (*groupLocker, error) {
	l := c.newGroupLocker()
	if err := l.take(leasefmt.Group, gid); err != nil {
		return l, err
	}
	for _, t := range targets {
		if err := l.take(leasefmt.Target, t); err != nil {
			return l, err
		}
	}
	return l, nil
}

// readTargets reads the listed targets; a target that does not validate
// is left out of the map (no usable record) and named in corrupt.
func (c *checker) readTargets(ids []leasefmt.ID) (map[leasefmt.ID]*leasefmt.Record, []leasefmt.ID, error) {
	out := make(map[leasefmt.ID]*leasefmt.Record, len(ids))
	var corrupt []leasefmt.ID
	for _, id := range ids {
		r, err := c.st.Read(c.ctx, leasefmt.Target, id)
		switch {
		case errors.Is(err, leasefmt.ErrCorrupt):
			corrupt = append(corrupt, id)
		case err != nil:
			return nil, nil, err
		case r != nil:
			out[id] = r
		}
	}
	return out, corrupt, nil
}

// checkGroup checks the valid manifest m, read from its home rel.
func (c *checker) checkGroup(rel string, m *leasefmt.Record) *Finding {
	ts, _, err := c.readTargets(m.Targets)
	if err != nil {
		return c.ioFinding(rel, "cannot read the targets of the group", err)
	}
	if len(groups.Check(m, ts)) == 0 {
		return nil
	}
	f := &Finding{Kind: KindGroup, Path: rel, ID: m.ID, Expected: groupExpected,
		Repair: "release the group and the targets that carry it (tokens kept or raised: the old holder is fenced out)"}
	locks, lerr := c.lockGroup(m.ID, m.Targets)
	defer locks.release()
	if lerr != nil {
		// Report what was seen without the locks.
		f.Found = strings.Join(groups.Check(m, ts), "; ")
		if c.opt.Repair {
			failed(f, lerr)
		}
		return f
	}
	m2, err := c.st.Read(c.ctx, leasefmt.Group, m.ID)
	if err != nil && !errors.Is(err, leasefmt.ErrCorrupt) {
		return c.ioFinding(rel, "cannot re-read the group manifest under its locks", err)
	}
	if err != nil || m2 == nil {
		return nil // changed meanwhile: the next run checks it
	}
	ts, corrupt, err := c.readTargets(m2.Targets)
	if err != nil {
		return c.ioFinding(rel, "cannot read the targets of the group", err)
	}
	probs := groups.Check(m2, ts)
	if len(probs) == 0 {
		return nil // an operation in flight, finished under the locks
	}
	f.Found = strings.Join(probs, "; ")
	if exp, renewed, ok := tornRenew(m2, ts); ok {
		f.Repair = "set the group and its targets to the earliest expires_at found (a renewal that did not finish; the holder keeps the lease)"
		if c.opt.Repair {
			c.settleRenew(f, m2, ts, exp, renewed)
		}
		return f
	}
	if c.opt.Repair {
		c.releaseGroup(f, m2, ts, corrupt)
	}
	return f
}

// tornRenew reports whether the manifest m and its targets ts are a group
// renewal that did not finish: every listed target exists and carries the
// manifest's group, token, status and owner, and they differ only in
// expires_at (and renewed_at). It returns the earliest expires_at found
// and the renewed_at of the record that holds it.
func tornRenew(m *leasefmt.Record, ts map[leasefmt.ID]*leasefmt.Record) (expires, renewed float64, ok bool) {
	expires, renewed = m.ExpiresAt, m.RenewedAt
	for _, id := range m.Targets {
		t := ts[id]
		if t == nil || t.Group != m.ID || t.Token != m.Token || t.Status != m.Status || t.Owner != m.Owner {
			return 0, 0, false
		}
		if t.ExpiresAt < expires {
			expires, renewed = t.ExpiresAt, t.RenewedAt
		}
	}
	return expires, renewed, true
}

// settleRenew finishes a torn group renewal the safe way, under the locks
// the caller holds (the manifest's, then the targets' in ascending order):
// every record of the group that expires later than the earliest
// expires_at found is rewritten, durably, to expire then, targets in
// ascending order and the manifest last. The holder keeps its lease until
// at least the last expiry it was told of (a renewal is acknowledged only
// once every record carries it), and no record promises more than another.
func (c *checker) settleRenew(f *Finding, m *leasefmt.Record, ts map[leasefmt.ID]*leasefmt.Record, expires, renewed float64) {
	next := make(map[leasefmt.ID]*leasefmt.Record, len(ts))
	var writes []*leasefmt.Record
	settle := func(r *leasefmt.Record) *leasefmt.Record {
		if r.ExpiresAt == expires && r.RenewedAt == renewed {
			return r
		}
		r = r.Clone()
		r.ExpiresAt, r.RenewedAt = expires, renewed
		writes = append(writes, r)
		return r
	}
	for _, id := range m.Targets { // sorted: the format guarantees it
		next[id] = settle(ts[id])
	}
	man := settle(m)
	if probs := groups.Check(man, next); len(probs) > 0 {
		failed(f, fmt.Errorf("settling the renewal would still disagree: %s", strings.Join(probs, "; ")))
		return
	}
	for _, r := range writes {
		if err := c.st.WriteOne(r); err != nil {
			failed(f, fmt.Errorf("%s %s: %w", r.Kind.Dir(), r.ID, err))
			return
		}
	}
	fixed(f, fmt.Sprintf("kept the group with token %d; set %d of its %d records to expire at %s, the earliest found",
		m.Token, len(writes), len(m.Targets)+1, leasefmt.AppendTime(nil, expires)))
}

// releaseGroup releases the group m and every target that carries it, under
// the locks the caller holds, so that the group agrees with its targets and
// can be claimed again:
//
//   - the final token F is the largest of the manifest's and of the tokens
//     of the targets naming the group (a claim that did not finish wrote
//     its targets first), so no token decreases and the old holder is out;
//   - the lease ends at E = min(now, the manifest's expires_at, the claim
//     time of any target another group claimed with a newer token), so
//     those targets read as claimed after this group ended and are left
//     alone;
//   - targets naming the group, listed targets with no record, and listed
//     targets of another group with a token not newer that are not live
//     are written released with group, token F, owner and E; the manifest
//     last, released likewise.
//
// The plan is checked with groups.Check before the first write; a
// plan that would still disagree (a corrupt target, a live target of
// another group at an older token) writes nothing and is reported.
func (c *checker) releaseGroup(f *Finding, m *leasefmt.Record, ts map[leasefmt.ID]*leasefmt.Record, corrupt []leasefmt.ID) {
	if len(corrupt) > 0 {
		failed(f, fmt.Errorf("target %s does not validate; it is never overwritten (quarantine it with lease fsck --repair, then run it again)", corrupt[0]))
		return
	}
	now := c.opt.Now
	final, owner, claimed := m.Token, m.Owner, m.ClaimedAt
	end := math.Min(now, m.ExpiresAt)
	var rewrite []leasefmt.ID
	for _, id := range m.Targets {
		t := ts[id]
		switch {
		case t == nil:
			rewrite = append(rewrite, id)
		case t.Group == m.ID:
			rewrite = append(rewrite, id)
			if t.Token > final {
				final, owner, claimed = t.Token, t.Owner, t.ClaimedAt
			}
		case t.Token > m.Token:
			end = math.Min(end, t.ClaimedAt) // claimed by another group: leave it
		case t.Live(now):
			failed(f, fmt.Errorf("target %s is held by group %s (token %d), at a token not newer than this group's; release that group first", id, t.Group, t.Token))
			return
		default:
			rewrite = append(rewrite, id)
		}
	}
	release := func(r *leasefmt.Record) {
		r.Status, r.Owner, r.Token, r.RenewedAt, r.ExpiresAt = leasefmt.Released, owner, final, now, end
	}
	next := make(map[leasefmt.ID]*leasefmt.Record, len(ts))
	for id, t := range ts {
		next[id] = t
	}
	var writes []*leasefmt.Record
	for _, id := range rewrite {
		t := ts[id]
		var r *leasefmt.Record
		switch {
		case t == nil:
			r = &leasefmt.Record{Kind: leasefmt.Target, ID: id, ClaimedAt: claimed}
		case t.Group != m.ID:
			// Taken over from another group, which had ended: it is
			// this group's from this group's claim on, so that the
			// other group reads as having ended before it.
			r = t.Clone()
			r.ClaimedAt = math.Max(t.ClaimedAt, claimed)
		default:
			r = t.Clone()
		}
		release(r)
		r.Group = m.ID
		next[id] = r
		writes = append(writes, r)
	}
	man := m.Clone()
	release(man)
	man.ClaimedAt = claimed
	if probs := groups.Check(man, next); len(probs) > 0 {
		failed(f, fmt.Errorf("releasing would still disagree: %s", strings.Join(probs, "; ")))
		return
	}
	for _, r := range writes {
		if err := c.st.WriteOne(r); err != nil {
			failed(f, fmt.Errorf("target %s: %w", r.ID, err))
			return
		}
	}
	if err := c.st.WriteOne(man); err != nil {
		failed(f, fmt.Errorf("manifest: %w", err))
		return
	}
	fixed(f, fmt.Sprintf("released the group with token %d and %d of its %d targets", final, len(writes), len(m.Targets)))
}

// manifestCache keeps the manifests a shard's live targets name.
type manifestCache map[leasefmt.ID]*leasefmt.Record

// checkTargetGroup checks a live target t, at its home rel, against the
// manifest of its group. A target the manifest lists is checked with the
// manifest (checkGroup); here only orphans are found: no manifest, or one
// that does not list the target although the target's token is not older.
func (c *checker) checkTargetGroup(rel string, t *leasefmt.Record, cache manifestCache) *Finding {
	m, ok := cache[t.Group]
	if !ok {
		var err error
		m, err = c.st.Read(c.ctx, leasefmt.Group, t.Group)
		if err != nil && !errors.Is(err, leasefmt.ErrCorrupt) {
			return c.ioFinding(rel, "cannot read the manifest of the target's group", err)
		}
		if len(cache) > 1024 {
			clear(cache)
		}
		cache[t.Group] = m
	}
	if m != nil && slices.Contains(m.Targets, t.ID) || len(groups.CheckTarget(t, m)) == 0 {
		return nil
	}
	f := &Finding{Kind: KindGroup, Path: rel, ID: t.ID,
		Expected: "a live target's group manifest lists it with its lease",
		Repair:   "release the target (its token is kept: its holder is fenced out)"}
	locks := c.newGroupLocker()
	defer locks.release()
	err := locks.take(leasefmt.Group, t.Group)
	if err == nil {
		err = locks.take(leasefmt.Target, t.ID)
	}
	if err != nil {
		f.Found = strings.Join(groups.CheckTarget(t, m), "; ")
		if c.opt.Repair {
			failed(f, err)
		}
		return f
	}
	t2, err := c.st.Read(c.ctx, leasefmt.Target, t.ID)
	if err != nil && !errors.Is(err, leasefmt.ErrCorrupt) {
		return c.ioFinding(rel, "cannot re-read the target under its locks", err)
	}
	if err != nil || t2 == nil || !t2.Live(c.opt.Now) {
		return nil
	}
	m2, err := c.st.Read(c.ctx, leasefmt.Group, t2.Group)
	if err != nil && !errors.Is(err, leasefmt.ErrCorrupt) {
		return c.ioFinding(rel, "cannot read the manifest of the target's group", err)
	}
	delete(cache, t.Group)
	if m2 != nil && slices.Contains(m2.Targets, t2.ID) {
		return nil
	}
	probs := groups.CheckTarget(t2, m2)
	if len(probs) == 0 {
		return nil
	}
	f.Found = strings.Join(probs, "; ")
	if !c.opt.Repair {
		return f
	}
	next := t2.Clone()
	next.Status, next.RenewedAt, next.ExpiresAt = leasefmt.Released, c.opt.Now, math.Min(c.opt.Now, t2.ExpiresAt)
	if err := c.st.WriteOne(next); err != nil {
		failed(f, err)
		return f
	}
	fixed(f, fmt.Sprintf("released the target (token %d kept)", next.Token))
	return f
}
