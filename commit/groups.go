package commit

// Target groups (docs/design.md#records, #locks, G9).
//
// A group lease holds a set of targets under one token. The manifest
// groups/SS/GID.json lists the sorted unique targets; each target record
// targets/SS/ID.json names its group, and while the group is live it carries
// the group's token, owner, status and expires_at. Every group operation is
// all-or-nothing:
//
//  1. Locks are taken in the global order of docs/design.md#locks: the manifests' locks in
//     ascending GID order, then the targets' locks in ascending ID order.
//     Every manifest lock precedes every target lock, so processes that each
//     follow this order cannot wait for each other in a cycle, whatever the
//     order of their input. A lock byte is taken once per call: two IDs of a
//     shard whose first 15 hex digits agree share a byte, and a process must
//     not wait for a byte it holds itself.
//  2. Every record is read and validated under the locks, every token is
//     checked, and every new record is encoded before the first write; a
//     record that exists but does not validate is never taken as free.
//  3. The temp files of every record of every group are written and
//     fsynced in parallel (G1); then they are renamed, group by group,
//     targets first and the manifest last, into one SyncBatch shared by
//     every group of the call, and each touched directory is fsynced once,
//     before the locks are released (G3, G4).
//  4. When any write or directory fsync fails, every record the call already
//     replaced is put back, still under the locks: its previous bytes
//     rewritten durably (temp, fsync, rename, directory fsync), or the new
//     file removed when there was no record before. No group of the call is
//     reported as written (G6, G9).
//
// A call holds at most about groupChunkLocks locks at once (one descriptor
// each); a larger call is committed in chunks of whole groups in GID order,
// each chunk fsyncing its directories once before it releases its locks. A
// failure in a later chunk restores that chunk only: the groups of earlier
// chunks stay renewed (durably) but are not reported as renewed either.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/leasefmt"
)

// groupChunkLocks bounds the locks (and so the open lock descriptors) one
// chunk of a group call holds at once: a chunk takes whole groups until
// its manifests and targets reach it. Tests lower it to make chunks.
var groupChunkLocks = 4096

// TargetIssue is why one target kept its group from being claimed, renewed
// or released.
type TargetIssue struct {
	Target  leasefmt.ID
	Outcome Outcome
	Detail  string
	// Path is the target record's absolute path.
	Path string
}

// GroupResult is the outcome of one group.
type GroupResult struct {
	// Item is the group's ID and the token its caller held (0 for a claim).
	Item
	Outcome Outcome
	// Token is the token now held (OK) or the manifest's token on disk.
	Token int64
	// Detail says more, for stderr.
	Detail string
	// Manifest is the manifest as written (OK) or as found.
	Manifest *leasefmt.Record
	// Issues name each target that refused the group, when any did.
	Issues []TargetIssue
	// Path is the manifest's absolute path.
	Path string
	// Latency is how long the group took until its directories were fsynced.
	Latency time.Duration
}

// ClaimGroup claims every target of the group gid and its manifest for
// owner for ttl seconds, all or nothing, with one token strictly larger than
// every earlier token of the group and of each target. It refuses (Held)
// when the manifest is live or any target is live (each such target named
// in Issues with its holder and remaining time), and (Corrupt) when the
// manifest or any target exists but does not validate; nothing is written
// then. The error, wrapping groups.ErrInput, is for input refused by
// groups.CheckInput.
func (s *Store) ClaimGroup(ctx context.Context, gid leasefmt.ID, targets []leasefmt.ID, owner string, ttl float64) (GroupResult, error) {
	if err := groups.CheckInput(gid, targets, owner, ttl); err != nil {
		return GroupResult{}, err
	}
	ids := groups.Sorted(targets)
	return s.runGroups(ctx, []Item{{ID: gid}}, claimGroupPolicy(ids, owner, ttl, s.skew))[0], nil
}

// RenewGroups renews each group whose manifest token is the item's token
// and whose lease is live, with all its targets, for ttl seconds from now
// (with ttl 0, for the group's own duration, expires_at - renewed_at of its
// manifest). A group is
// renewed only when every target agrees with the manifest (token, group,
// owner, status, expires_at): a target taken by a later lease is
// StaleToken, any other disagreement Corrupt. Results are in input order.
func (s *Store) RenewGroups(ctx context.Context, items []Item, ttl float64) ([]GroupResult, error) {
	if err := groups.CheckTTL(ttl, true); err != nil {
		return nil, err
	}
	return s.runGroups(ctx, items, fencedGroupPolicy(s.skew, func(m, r *leasefmt.Record, now float64) {
		d := ttl
		if d <= 0 {
			d = m.ExpiresAt - m.RenewedAt
		}
		r.RenewedAt, r.ExpiresAt = now, now+d
	})), nil
}

// ReleaseGroups releases each current live group and all its targets: they
// become released, expiring now, keeping their token. The checks are those
// of RenewGroups.
func (s *Store) ReleaseGroups(ctx context.Context, items []Item) ([]GroupResult, error) {
	return s.runGroups(ctx, items, fencedGroupPolicy(s.skew, func(_, r *leasefmt.Record, now float64) {
		r.Status, r.RenewedAt, r.ExpiresAt = leasefmt.Released, now, now
	})), nil
}

// groupPolicy is what a group operation decides, under the locks, with now
// read from the store's clock once the locks it needs are held.
type groupPolicy struct {
	// manifest checks the manifest (nil when missing) and names the targets
	// to lock; an outcome other than OK ends the group there.
	manifest func(it Item, m *leasefmt.Record, now float64) (targets []leasefmt.ID, out Outcome, detail string)
	// next computes the new records, targets first and the manifest last,
	// from the manifest and the records of the targets (ts[i] is the record
	// of targets[i], nil when missing); or refuses, naming the targets.
	next func(it Item, m *leasefmt.Record, targets []leasefmt.ID, ts []*leasefmt.Record, now float64) ([]*leasefmt.Record, Outcome, string, []TargetIssue)
}

func claimGroupPolicy(ids []leasefmt.ID, owner string, ttl, skew float64) groupPolicy {
	return groupPolicy{
		manifest: func(it Item, m *leasefmt.Record, now float64) ([]leasefmt.ID, Outcome, string) {
			if m != nil && Taken(m, now, skew) {
				return nil, Held, "group " + heldDetail(m, now)
			}
			return ids, OK, ""
		},
		next: func(it Item, m *leasefmt.Record, targets []leasefmt.ID, ts []*leasefmt.Record, now float64) ([]*leasefmt.Record, Outcome, string, []TargetIssue) {
			var issues []TargetIssue
			token := int64(0)
			if m != nil {
				token = m.Token
			}
			for i, t := range ts {
				if t == nil {
					continue
				}
				token = max(token, t.Token)
				if Taken(t, now, skew) {
					issues = append(issues, TargetIssue{Target: targets[i], Outcome: Held,
						Detail: fmt.Sprintf("held by %s (group %s, token %d) for %s more", leasefmt.Quote(t.Owner), t.Group, t.Token, remaining(t, now))})
				}
			}
			if len(issues) > 0 {
				return nil, Held, fmt.Sprintf("%d of %d targets held by other leases; nothing written", len(issues), len(targets)), issues
			}
			if token >= leasefmt.MaxToken {
				return nil, Corrupt, "token space exhausted", nil
			}
			token++
			set := func(r *leasefmt.Record) {
				r.Status, r.Owner, r.Token = leasefmt.Leased, owner, token
				r.ClaimedAt, r.RenewedAt, r.ExpiresAt = now, now, now+ttl
			}
			recs := make([]*leasefmt.Record, 0, len(targets)+1)
			for i, t := range ts {
				next := &leasefmt.Record{Kind: leasefmt.Target, ID: targets[i]}
				if t != nil {
					next = t.Clone()
				}
				set(next)
				next.Group = it.ID
				recs = append(recs, next)
			}
			man := &leasefmt.Record{Kind: leasefmt.Group, ID: it.ID}
			if m != nil {
				man = m.Clone()
			}
			set(man)
			man.Targets = slices.Clone(targets)
			return append(recs, man), OK, "", nil
		},
	}
}

// fencedGroupPolicy checks that the caller holds the current live group
// and that every target agrees with it, then applies change to the
// manifest and to every target.
func fencedGroupPolicy(skew float64, change func(m, r *leasefmt.Record, now float64)) groupPolicy {
	return groupPolicy{
		manifest: func(it Item, m *leasefmt.Record, now float64) ([]leasefmt.ID, Outcome, string) {
			if out, d := fenced(it, m, now, skew); out != OK {
				return nil, out, d
			}
			return m.Targets, OK, ""
		},
		next: func(it Item, m *leasefmt.Record, targets []leasefmt.ID, ts []*leasefmt.Record, now float64) ([]*leasefmt.Record, Outcome, string, []TargetIssue) {
			var issues []TargetIssue
			for i, t := range ts {
				if out, d := targetHeld(m, targets[i], t); out != OK {
					issues = append(issues, TargetIssue{Target: targets[i], Outcome: out, Detail: d})
				}
			}
			if len(issues) > 0 {
				out := worstIssue(issues)
				return nil, out, fmt.Sprintf("%d of %d targets do not carry this group's lease; nothing written", len(issues), len(targets)), issues
			}
			recs := make([]*leasefmt.Record, 0, len(ts)+1)
			for _, t := range ts {
				next := t.Clone()
				change(m, next, now)
				recs = append(recs, next)
			}
			man := m.Clone()
			change(m, man, now)
			return append(recs, man), OK, "", nil
		},
	}
}

// targetHeld checks, for a group lease m its caller holds, that the record
// t of its target tid carries that lease exactly.
