package commit

// Target groups (SPEC §3, §5, G9).
//
// A group lease holds a set of targets under one token. The manifest
// groups/SS/GID.json lists the sorted unique targets; each target record
// targets/SS/ID.json names its group, and while the group is live it carries
// the group's token, owner, status and expires_at. Every group operation is
// all-or-nothing:
//
//  1. Locks are taken in the global order of SPEC §5: the manifests' locks in
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
// A call holds at most about GroupChunkLocks locks at once (one descriptor
// each); a larger call is committed in chunks of whole groups in GID order,
// each chunk fsyncing its directories once before it releases its locks. A
// failure in a later chunk restores that chunk only: the groups of earlier
// chunks stay renewed (durably) but are not reported as renewed either.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasetool/lease/leasefmt"
)

// ErrGroupInput is wrapped by errors about the input of a group operation
// (no targets, duplicate targets, bad times, a manifest over 4 KiB): usage
// errors, found before anything is locked or written.
var ErrGroupInput = errors.New("commit: bad group input")

// GroupChunkLocks bounds the locks (and so the open lock descriptors) one
// chunk of a group call holds at once: a chunk takes whole groups until
// its manifests and targets reach it. Tests lower it to make chunks.
var GroupChunkLocks = 4096

// GroupID is the default ID of the group of targets: the SHA-256, in
// lowercase hex, of the target IDs sorted in byte order, deduplicated, and
// joined by "\n" with no trailing newline. For targets a and b (a < b) it
// hashes exactly the 129 bytes "a\nb".
func GroupID(targets []leasefmt.ID) leasefmt.ID {
	ids := sortedUnique(targets)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = string(id)
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return leasefmt.ID(hex.EncodeToString(sum[:]))
}

func sortedUnique(ids []leasefmt.ID) []leasefmt.ID {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckGroupInput validates a group claim before anything is locked or
// written: owner and ttl (finite, > 0), at least one
// target, no duplicate, and a manifest that fits in a record (4 KiB) even
// with the longest token, status and times it may come to carry. Errors
// wrap ErrGroupInput.
func CheckGroupInput(gid leasefmt.ID, targets []leasefmt.ID, owner string, ttl float64) error {
	if _, err := leasefmt.ParseID(string(gid)); err != nil {
		return fmt.Errorf("%w: group: %w", ErrGroupInput, err)
	}
	if err := leasefmt.CheckOwner(owner); err != nil {
		return fmt.Errorf("%w: %w", ErrGroupInput, err)
	}
	if err := checkTTL(ttl, false); err != nil {
		return err
	}
	if len(targets) == 0 {
		return fmt.Errorf("%w: a group needs at least one target", ErrGroupInput)
	}
	ids := sortedUnique(targets)
	if len(ids) != len(targets) {
		return fmt.Errorf("%w: duplicate target", ErrGroupInput)
	}
	for _, id := range ids {
		if _, err := leasefmt.ParseID(string(id)); err != nil {
			return fmt.Errorf("%w: target: %w", ErrGroupInput, err)
		}
	}
	// The widest manifest this group can come to have: a renewal at a later
	// clock may add digits, so the times are at least 11 integer digits.
	t := math.Max(SystemClock()+ttl, 99999999999.999999)
	proto := &leasefmt.Record{Kind: leasefmt.Group, ID: gid, Status: leasefmt.Released, Owner: owner,
		Token: leasefmt.MaxToken, ClaimedAt: t, RenewedAt: t, ExpiresAt: t, Targets: ids}
	if _, err := leasefmt.Encode(proto); err != nil {
		return fmt.Errorf("%w: the manifest of %d targets does not fit in a %d-byte record (%v); split the group",
			ErrGroupInput, len(ids), leasefmt.MaxRecordSize, err)
	}
	return nil
}

// checkTTL validates a lease duration: finite and more than 0, or, when
// keep is allowed, 0 for "the lease's own duration".
func checkTTL(ttl float64, keep bool) error {
	if err := leasefmt.CheckTime("ttl", ttl); err != nil {
		return fmt.Errorf("%w: %w", ErrGroupInput, err)
	}
	if ttl == 0 && !keep {
		return fmt.Errorf("%w: ttl must be more than 0", ErrGroupInput)
	}
	return nil
}

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
// then. The error, wrapping ErrGroupInput, is for input refused by
// CheckGroupInput.
func (s *Store) ClaimGroup(gid leasefmt.ID, targets []leasefmt.ID, owner string, ttl float64) (GroupResult, error) {
	if err := CheckGroupInput(gid, targets, owner, ttl); err != nil {
		return GroupResult{}, err
	}
	ids := sortedUnique(targets)
	return s.runGroups([]Item{{ID: gid}}, claimGroupPolicy(ids, owner, ttl, s.ClockSkew))[0], nil
}

// RenewGroups renews each group whose manifest token is the item's token
// and whose lease is live, with all its targets, for ttl seconds from now
// (with ttl 0, for the group's own duration, expires_at - renewed_at of its
// manifest). A group is
// renewed only when every target agrees with the manifest (token, group,
// owner, status, expires_at): a target taken by a later lease is
// StaleToken, any other disagreement Corrupt. Results are in input order.
func (s *Store) RenewGroups(items []Item, ttl float64) ([]GroupResult, error) {
	if err := checkTTL(ttl, true); err != nil {
		return nil, err
	}
	return s.runGroups(items, fencedGroupPolicy(s.ClockSkew, func(m, r *leasefmt.Record, now float64) {
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
func (s *Store) ReleaseGroups(items []Item) ([]GroupResult, error) {
	return s.runGroups(items, fencedGroupPolicy(s.ClockSkew, func(_, r *leasefmt.Record, now float64) {
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
func (s *Store) VerifyGroups(items []Item) []Result {
	res := make([]Result, len(items))
	for i, it := range items {
		r := &res[i]
		r.Item, r.Path = it, s.Abs(s.RecordPath(leasefmt.Group, it.ID))
		s.verifyGroup(it, s.now(), r)
		s.count(r.Outcome)
	}
	return res
}

func (s *Store) verifyGroup(it Item, now float64, r *Result) {
	m, _, err := s.readRaw(leasefmt.Group, it.ID)
	if err != nil {
		s.readFailed(err, r)
		return
	}
	r.Record = m
	if m != nil {
		r.Token = m.Token
	}
	if r.Outcome, r.Detail = fenced(it, m, now, s.ClockSkew); r.Outcome != OK {
		return
	}
	for _, tid := range m.Targets {
		where := s.Abs(s.RecordPath(leasefmt.Target, tid))
		t, _, err := s.readRaw(leasefmt.Target, tid)
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
		case !StillHeld(t, now, s.ClockSkew):
			out, d = Expired, fmt.Sprintf("target expired %.1fs ago (clock_skew %gs)", now-t.ExpiresAt, s.ClockSkew)
		}
		if out != OK {
			r.Outcome, r.Detail = out, fmt.Sprintf("target %s: %s (%s)", tid, d, where)
			return
		}
	}
	r.Detail = fmt.Sprintf("expires in %s, %d targets", remaining(m, now), len(m.Targets))
}

// lockKey names one lock byte.
type lockKey struct {
	file string
	off  int64
}

// groupLocks holds the locks of one chunk, each byte once.
type groupLocks struct {
	s       *Store
	got     map[lockKey]error
	unlocks []func()
}

func (l *groupLocks) take(k leasefmt.Kind, id leasefmt.ID) error {
	key := lockKey{path.Join(l.s.ShardDir(k, id.Shard(l.s.Table.Shards(k))), LockFile), id.LockOffset()}
	if err, ok := l.got[key]; ok {
		return err
	}
	unlock, err := l.s.Lock(k, id)
	l.got[key] = err
	if err == nil {
		l.unlocks = append(l.unlocks, unlock)
	}
	return err
}

func (l *groupLocks) release() {
	for i := len(l.unlocks) - 1; i >= 0; i-- {
		l.unlocks[i]()
	}
	l.unlocks = nil
}

// recWrite is one record a group writes: its new bytes and, to restore,
// the bytes it replaces (nil when there was no record).
type recWrite struct {
	kind leasefmt.Kind
	id   leasefmt.ID
	data []byte
	prev []byte
}

// groupOp is one group of a call while it runs.
type groupOp struct {
	it       Item
	res      *GroupResult
	targets  []leasefmt.ID
	mraw     []byte             // the manifest's bytes as read, nil when none
	next     []*leasefmt.Record // decided records, the manifest last
	writes   []recWrite
	replaced []recWrite
	written  bool  // written and fsynced
	failure  error // why its chunk failed, when it did
	restore  error // why putting back what it replaced failed
	begun    time.Time
}

// targetRead is a target record read under its lock.
type targetRead struct {
	rec    *leasefmt.Record
	raw    []byte
	out    Outcome // OK: readable (rec nil when missing)
	detail string
}

// runGroups runs policy over the groups of items: the engine of group
// claims, renewals and releases described at the top of this file.
func (s *Store) runGroups(items []Item, pol groupPolicy) []GroupResult {
	s.Stats.Batches.Add(1)
	res := make([]GroupResult, len(items))
	ops := make([]*groupOp, len(items))
	for i, it := range items {
		res[i] = GroupResult{Item: it, Path: s.Abs(s.RecordPath(leasefmt.Group, it.ID))}
		ops[i] = &groupOp{it: it, res: &res[i]}
	}
	sorted := slices.Clone(ops)
	slices.SortStableFunc(sorted, func(a, b *groupOp) int { return strings.Compare(string(a.it.ID), string(b.it.ID)) })
	var fatal error
	for pos := 0; pos < len(sorted) && fatal == nil; {
		pos, fatal = s.groupChunk(sorted, pos, pol)
	}
	for _, op := range ops {
		r := op.res
		switch {
		case op.written && fatal == nil && op.next[len(op.next)-1].Status == leasefmt.Leased &&
			s.now() >= op.next[len(op.next)-1].ExpiresAt-s.ClockSkew:
			m := op.next[len(op.next)-1]
			r.Manifest, r.Token = m, m.Token
			r.Outcome, r.Detail = Expired, fmt.Sprintf("written until %s, but that was over (clock_skew %gs) by the time the write was durable",
				formatTime(m.ExpiresAt), s.ClockSkew)
		case op.written && fatal == nil:
			r.Outcome, r.Detail = OK, ""
			r.Manifest = op.next[len(op.next)-1]
			r.Token = r.Manifest.Token
			s.Stats.Renewals.Add(int64(len(op.writes)))
			s.Stats.addLatency(r.Latency)
			continue
		case op.written:
			// An earlier chunk, durable; the call as a whole failed (G6).
			r.Outcome, r.Detail = IOError, "written durably, but a later part of the batch failed, so not reported: "+fatal.Error()
		case op.failure != nil:
			r.Outcome, r.Detail = IOError, "not written: "+op.failure.Error()
			switch {
			case len(op.replaced) == 0:
			case op.restore == nil:
				r.Detail += "; the records already replaced were restored"
			default:
				r.Detail += "; restoring the records already replaced failed (lease fsck repairs the group): " + op.restore.Error()
			}
		case r.Outcome == OK && fatal != nil:
			// Checked but not written, or never reached.
			r.Outcome, r.Detail = IOError, "not attempted: the batch stopped at an I/O error: "+fatal.Error()
		}
		s.count(r.Outcome)
	}
	return res
}

// groupChunk runs the groups sorted[pos:] until about GroupChunkLocks locks
// are held, and returns where the next chunk starts and the I/O error that
// stops the call, if any. Every lock of the chunk is held until its
// directories are fsynced or its records restored.
func (s *Store) groupChunk(sorted []*groupOp, pos int, pol groupPolicy) (int, error) {
	c := &groupRun{s: s, pol: pol, locks: groupLocks{s: s, got: map[lockKey]error{}}}
	defer c.locks.release()
	pos = c.manifests(sorted, pos)
	c.targets()
	if todo := c.decide(); c.fatal == nil && len(todo) > 0 {
		c.write(todo)
	}
	return pos, c.fatal
}

// groupRun is one chunk of a group call while it runs.
type groupRun struct {
	s     *Store
	pol   groupPolicy
	locks groupLocks
	ops   []*groupOp
	reads map[leasefmt.ID]*targetRead
	mu    sync.Mutex
	fatal error // the I/O error that stops the call
}

// fail records the I/O error that stops the call, and the first error of
// op's group.
func (c *groupRun) fail(op *groupOp, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fatal == nil {
		c.fatal = err
	}
	if op != nil && op.failure == nil {
		op.failure = err
	}
}

func (c *groupRun) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fatal != nil
}

// manifests locks and reads the manifests of sorted[pos:], in ascending
// GID order, until the locks planned reach GroupChunkLocks; it returns where
// it stopped.
func (c *groupRun) manifests(sorted []*groupOp, pos int) int {
	s, planned := c.s, 0
	for pos < len(sorted) && c.fatal == nil && (len(c.ops) == 0 || planned < GroupChunkLocks) {
		op := sorted[pos]
		pos++
		c.ops = append(c.ops, op)
		planned++
		op.begun = time.Now()
		r := op.res
		var rr Result
		if err := c.locks.take(leasefmt.Group, op.it.ID); err != nil {
			c.fatal = s.lockFailed(err, &rr, "lock the group manifest")
			r.Outcome, r.Detail = rr.Outcome, rr.Detail
			continue
		}
		m, raw, err := s.readRaw(leasefmt.Group, op.it.ID)
		if err != nil {
			c.fatal = s.readFailed(err, &rr)
			r.Outcome, r.Detail = rr.Outcome, rr.Detail
			continue
		}
		r.Manifest = m
		if m != nil {
			r.Token, op.mraw = m.Token, raw
		}
		targets, out, detail := c.pol.manifest(op.it, m, s.now())
		r.Outcome, r.Detail = out, detail
		if out == OK {
			op.targets = targets
			planned += len(targets)
		}
	}
	return pos
}

// targets locks and reads the targets of the groups whose manifest passed,
// in ascending ID order, each lock byte once.
func (c *groupRun) targets() {
	var want []leasefmt.ID
	for _, op := range c.ops {
		if op.res.Outcome == OK && op.targets != nil {
			want = append(want, op.targets...)
		}
	}
	want = sortedUnique(want)
	c.reads = make(map[leasefmt.ID]*targetRead, len(want))
	for _, id := range want {
		if c.fatal != nil {
			return
		}
		tr := &targetRead{}
		c.reads[id] = tr
		var rr Result
		if err := c.locks.take(leasefmt.Target, id); err != nil {
			c.fatal = c.s.lockFailed(err, &rr, "lock the target record")
			tr.out, tr.detail = rr.Outcome, rr.Detail
			continue
		}
		rec, raw, err := c.s.readRaw(leasefmt.Target, id)
		if err != nil {
			c.fatal = c.s.readFailed(err, &rr)
			tr.out, tr.detail = rr.Outcome, rr.Detail
			continue
		}
		tr.rec, tr.raw = rec, raw
	}
}

// decide makes the decision of every group whose manifest passed and
// encodes every record it writes, before the first write; it returns the
// groups to write.
func (c *groupRun) decide() []*groupOp {
	s := c.s
	claimed := map[leasefmt.ID]leasefmt.ID{}
	var todo []*groupOp
	for _, op := range c.ops {
		r := op.res
		if r.Outcome != OK || op.targets == nil || c.fatal != nil {
			continue // refused already, or reported as not attempted
		}
		ts := make([]*leasefmt.Record, len(op.targets))
		var issues []TargetIssue
		for i, id := range op.targets {
			tr := c.reads[id]
			if tr.out != OK {
				issues = append(issues, TargetIssue{Target: id, Outcome: tr.out, Detail: tr.detail})
			}
			ts[i] = tr.rec
		}
		out, detail := OK, ""
		var next []*leasefmt.Record
		if len(issues) == 0 {
			next, out, detail, issues = c.pol.next(op.it, r.Manifest, op.targets, ts, s.now())
		} else {
			out = worstIssue(issues)
			detail = fmt.Sprintf("%d of %d targets could not be checked; nothing written", len(issues), len(op.targets))
		}
		for _, id := range op.targets {
			if other, dup := claimed[id]; dup && out == OK {
				out, detail = Corrupt, fmt.Sprintf("target %s is also written by group %s in this call; nothing written", id, other)
			}
		}
		for i := range issues {
			issues[i].Path = s.Abs(s.RecordPath(leasefmt.Target, issues[i].Target))
		}
		r.Issues = issues
		if r.Outcome, r.Detail = out, detail; out != OK {
			continue
		}
		writes := make([]recWrite, 0, len(next))
		for i, rec := range next {
			data, err := leasefmt.Encode(rec)
			if err != nil {
				r.Outcome, r.Detail = Corrupt, fmt.Sprintf("cannot rewrite %s: %v", s.Abs(s.RecordPath(rec.Kind, rec.ID)), err)
				break
			}
			w := recWrite{kind: rec.Kind, id: rec.ID, data: data, prev: op.mraw}
			if i < len(op.targets) {
				w.prev = c.reads[rec.ID].raw
			}
			writes = append(writes, w)
		}
		if r.Outcome != OK {
			continue
		}
		for _, id := range op.targets {
			claimed[id] = op.it.ID
		}
		op.next, op.writes = next, writes
		todo = append(todo, op)
	}
	return todo
}

// write writes the records of the groups of todo. The temp files of every
// record of every group are written and fsynced by the pool of writers
// (G1); only when all of them are durable are they renamed, group by group,
// targets first and the manifest last, into one SyncBatch, whose
// directories are then fsynced once each (G4). A failure restores what was
// replaced.
func (c *groupRun) write(todo []*groupOp) {
	s := c.s
	type job struct {
		op  *groupOp
		w   recWrite
		tmp string
	}
	var jobs []*job
	for _, op := range todo {
		for _, w := range op.writes {
			jobs = append(jobs, &job{op: op, w: w})
		}
	}
	writers := s.Writers
	if s.Strategy != Concurrent || writers < 1 {
		writers = 1
	}
	work := make(chan *job)
	var wg sync.WaitGroup
	for range min(writers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				if c.failed() {
					continue
				}
				final := s.RecordPath(j.w.kind, j.w.id)
				tmp, err := s.writeTemp(path.Dir(final), j.w.id.FileName(), j.w.data)
				if err != nil {
					c.fail(j.op, err)
					continue
				}
				j.tmp = tmp
			}
		}()
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
	batch := NewSyncBatch(s.FS, &s.Stats.DirectorySyncs)
	for _, j := range jobs {
		if j.tmp == "" {
			continue
		}
		if c.fatal == nil {
			err := batch.Replace(j.tmp, s.RecordPath(j.w.kind, j.w.id))
			if err == nil {
				j.op.replaced = append(j.op.replaced, j.w)
				continue
			}
			c.fail(j.op, err)
		}
		s.FS.Remove(j.tmp)
	}
	if c.fatal == nil {
		if err := batch.Flush(); err != nil {
			c.fail(nil, err)
		}
	}
	if c.fatal == nil {
		flushed := time.Now()
		for _, op := range todo {
			op.written = true
			op.res.Latency = flushed.Sub(op.begun)
		}
		return
	}
	s.restoreGroups(todo)
	for _, op := range todo {
		if op.failure == nil {
			op.failure = c.fatal
		}
	}
}

// writeGroupRecord writes w's temp file, fsyncs it and renames it over the
// record in batch b.
func (s *Store) writeGroupRecord(b *SyncBatch, w recWrite) error {
	final := s.RecordPath(w.kind, w.id)
	tmp, err := s.writeTemp(path.Dir(final), w.id.FileName(), w.data)
	if err != nil {
		return err
	}
	if err := b.Replace(tmp, final); err != nil {
		s.FS.Remove(tmp)
		return err
	}
	return nil
}

// restoreGroups puts back, in reverse order, every record the groups of ops
// replaced: the previous bytes durably, or the new file removed when there
// was none; then fsyncs each directory involved once. It is best effort:
// every record is tried, and each group keeps the first error it met.
func (s *Store) restoreGroups(ops []*groupOp) {
	rb := NewSyncBatch(s.FS, &s.Stats.DirectorySyncs)
	for _, op := range ops {
		for i := len(op.replaced) - 1; i >= 0; i-- {
			w := op.replaced[i]
			final := s.RecordPath(w.kind, w.id)
			rb.mark(path.Dir(final))
			var err error
			if w.prev == nil {
				err = s.FS.Remove(final)
			} else {
				err = s.writeGroupRecord(rb, recWrite{kind: w.kind, id: w.id, data: w.prev})
			}
			if err != nil && op.restore == nil {
				op.restore = err
			}
		}
	}
	if err := rb.Flush(); err != nil {
		for _, op := range ops {
			if len(op.replaced) > 0 && op.restore == nil {
				op.restore = err
			}
		}
	}
}

// mark adds dir to the directories b fsyncs, for a change (a removal) that
// did not go through Replace.
func (b *SyncBatch) mark(dir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.pending[dir] {
		b.pending[dir] = true
		b.order = append(b.order, dir)
	}
}
