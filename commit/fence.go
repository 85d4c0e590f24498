package commit

// The fencing decision, in one place: whether a holder's token still
// fences (fenced, stillHeld), when a claimer may take a lease over
// (Taken), that nothing is reported granted that its holder could no
// longer count on (reportedLate), and that no result of a failed batch is
// reported done (FailBatch: G6, for one process's batch here and for the
// ranks of an MPI job in package cluster). The rules are those of
// docs/lease-format.md; the Decide functions of ops.go and the group
// policies of groups.go apply them, and a Decide that refuses returns no
// record, so a refusal writes nothing (G7, applyOnce).

import (
	"fmt"

	"github.com/leasetool/lease/leasefmt"
)

// Taken reports whether a claimer at now must leave r alone: it is leased
// or committing and not expired by more than skew (docs/lease-format.md,
// clocks: a claimer takes over only from expires_at + clock_skew, so a
// claimer whose clock runs ahead by up to skew never takes a lease its
// holder still has).
func Taken(r *leasefmt.Record, now, skew float64) bool {
	return (r.Status == leasefmt.Leased || r.Status == leasefmt.Committing) && now < r.ExpiresAt+skew
}

// stillHeld reports whether the holder of r still has it at now: leased or
// committing and more than skew before expires_at (docs/lease-format.md,
// clocks: a holder counts its lease as lost from expires_at -
// clock_skew).
func stillHeld(r *leasefmt.Record, now, skew float64) bool {
	return (r.Status == leasefmt.Leased || r.Status == leasefmt.Committing) && now < r.ExpiresAt-skew
}

// fenced checks that it holds the current, live lease of cur: the checks of
// renew, release, complete and verify, in the order that names the most
// useful reason. Committing counts as held.
func fenced(it Item, cur *leasefmt.Record, now, skew float64) (Outcome, string) {
	switch {
	case cur == nil:
		return Missing, "no record"
	case cur.Token != it.Token:
		return StaleToken, fmt.Sprintf("current token is %d (%s, owner %s)", cur.Token, cur.Status, leasefmt.Quote(cur.Owner))
	case cur.Status == leasefmt.Done:
		return Done, "work is done"
	case cur.Status == leasefmt.Failed:
		return Failed, failedDetail(cur)
	case cur.Status == leasefmt.Released:
		return Released, "lease was released"
	case !stillHeld(cur, now, skew):
		if now < cur.ExpiresAt {
			return Expired, fmt.Sprintf("expires in %s, within clock_skew %gs: counted as lost", remaining(cur, now), skew)
		}
		return Expired, fmt.Sprintf("expired %.1fs ago", now-cur.ExpiresAt)
	}
	return OK, ""
}

// reportedLate reports whether rec, written leased, was over (less the
// clock skew) by now, when its write became durable: it is then reported
// Expired, not granted or renewed.
func reportedLate(rec *leasefmt.Record, now, skew float64) bool {
	return rec != nil && rec.Status == leasefmt.Leased && now >= rec.ExpiresAt-skew
}

// Written reports whether r's record was written by its batch: an OK
// result, or a refusal whose abandoned publish was settled, which writes
// the settled record all the same.
func (r Result) Written() bool { return r.Outcome == OK || r.settledWrite }

// FailBatch is G6: once any step of a batch failed with err, no result of
// it whose record was written is reported done. Each such result becomes
// an I/O error: the one at index own (the result whose own step failed
// after its record was written, -1 for none) with err as its cause and
// detail "written, but the batch failed: ERR"; every other with a cause
// wrapping ErrBatchFailed and err, and detail what. Results that wrote
// nothing are left as they are.
func FailBatch(res []Result, err error, own int, what string) {
	for i := range res {
		r := &res[i]
		if !r.Written() {
			continue
		}
		r.Outcome = IOError
		if i == own {
			r.Detail, r.Cause = "written, but the batch failed: "+err.Error(), err
			continue
		}
		r.Detail, r.Cause = what, fmt.Errorf("%w: %w", ErrBatchFailed, err)
	}
}
