// Package groups holds the pure rules of target groups (docs/design.md#records,
// lease-format(5)): the default group ID, the check of a group claim's input,
// and the consistency checks between a manifest and its targets' records.
// Pure functions of records and IDs, no I/O: the write engine (package
// commit) applies them under its locks, lease fsck applies them to any table,
// and the command line checks a claim's input with them before it opens the
// table.
package groups

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/leasetool/lease/leasefmt"
)

// ErrInput is wrapped by errors about the input of a group operation
// (no targets, duplicate targets, bad times, a manifest over 4 KiB): usage
// errors, found before anything is locked or written.
var ErrInput = errors.New("bad group input")

// ID is the default ID of the group of targets: the SHA-256, in
// lowercase hex, of the target IDs sorted in byte order, deduplicated, and
// joined by "\n" with no trailing newline. For targets a and b (a < b) it
// hashes exactly the 129 bytes "a\nb".
func ID(targets []leasefmt.ID) leasefmt.ID {
	ids := Sorted(targets)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = string(id)
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return leasefmt.ID(hex.EncodeToString(sum[:]))
}

// Sorted returns ids sorted in byte order without duplicates: the targets
// as a manifest lists them.
func Sorted(ids []leasefmt.ID) []leasefmt.ID {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckInput validates a group claim before anything is locked or
// written: owner and ttl (finite, > 0), at least one
// target, no duplicate, and a manifest that fits in a record (4 KiB) even
// with the longest token, status and times it may come to carry. Errors
// wrap ErrInput.
func CheckInput(gid leasefmt.ID, targets []leasefmt.ID, owner string, ttl float64) error {
	if _, err := leasefmt.ParseID(string(gid)); err != nil {
		return fmt.Errorf("%w: group: %w", ErrInput, err)
	}
	if err := leasefmt.CheckOwner(owner); err != nil {
		return fmt.Errorf("%w: %w", ErrInput, err)
	}
	if err := CheckTTL(ttl, false); err != nil {
		return err
	}
	if len(targets) == 0 {
		return fmt.Errorf("%w: a group needs at least one target", ErrInput)
	}
	ids := Sorted(targets)
	if len(ids) != len(targets) {
		return fmt.Errorf("%w: duplicate target", ErrInput)
	}
	for _, id := range ids {
		if _, err := leasefmt.ParseID(string(id)); err != nil {
			return fmt.Errorf("%w: target: %w", ErrInput, err)
		}
	}
	// The widest manifest this group can come to have: a renewal at a later
	// clock may add digits, so the times are at least 11 integer digits.
	t := math.Max(leasefmt.Now()+ttl, 99999999999.999999)
	proto := &leasefmt.Record{Kind: leasefmt.Group, ID: gid, Status: leasefmt.Released, Owner: owner,
		Token: leasefmt.MaxToken, ClaimedAt: t, RenewedAt: t, ExpiresAt: t, Targets: ids}
	if _, err := leasefmt.Encode(proto); err != nil {
		return fmt.Errorf("%w: the manifest of %d targets does not fit in a %d-byte record (%v); split the group",
			ErrInput, len(ids), leasefmt.MaxRecordSize, err)
	}
	return nil
}

// CheckTTL validates a lease duration: finite and more than 0, or, when
// keep is allowed, 0 for "the lease's own duration". Errors wrap ErrInput.
func CheckTTL(ttl float64, keep bool) error {
	if err := leasefmt.CheckTime("ttl", ttl); err != nil {
		return fmt.Errorf("%w: %w", ErrInput, err)
	}
	if ttl == 0 && !keep {
		return fmt.Errorf("%w: ttl must be more than 0", ErrInput)
	}
	return nil
}

// Disagrees says how a target record of a group's current token
// differs from its manifest; "" when it carries the manifest's lease.
func Disagrees(m, t *leasefmt.Record) string {
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

// Check lists the disagreements between a group manifest and the
// records of its targets (targets[id] nil or absent: no record); none when
// they agree. It does not depend on the clock, so fsck can use it on any
// table. For each target the manifest lists, the target record must exist
// and either carry the manifest's lease (same group and token, status,
// owner and expires_at) or have been claimed since by a larger token, at a
// time the manifest's lease had ended (claimed_at >= the manifest's
// expires_at). A record in targets that names this group with a token at
// least the manifest's must be listed by it.
func Check(m *leasefmt.Record, targets map[leasefmt.ID]*leasefmt.Record) []string {
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
			if d := Disagrees(m, t); d != "" {
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
// agree. Together with Check it gives, for any instant: a live target's
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
	return Check(&leasefmt.Record{Kind: m.Kind, ID: m.ID, Status: m.Status, Owner: m.Owner, Token: m.Token,
		ClaimedAt: m.ClaimedAt, RenewedAt: m.RenewedAt, ExpiresAt: m.ExpiresAt, Targets: []leasefmt.ID{t.ID}},
		map[leasefmt.ID]*leasefmt.Record{t.ID: t})
}
