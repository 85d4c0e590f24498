package commit

import (
	"context"
	"fmt"

	"github.com/leasetool/lease/leasefmt"
)

// remaining renders the time left on a lease.
func remaining(r *leasefmt.Record, now float64) string {
	return fmt.Sprintf("%.1fs", r.ExpiresAt-now)
}

// formatTime renders a time of a record for messages, as records write it.
func formatTime(t float64) string { return string(leasefmt.AppendTime(nil, t)) }

func heldDetail(r *leasefmt.Record, now float64) string {
	if now >= r.ExpiresAt {
		return fmt.Sprintf("held by %s (token %d), expired %.1fs ago but within clock_skew", leasefmt.Quote(r.Owner), r.Token, now-r.ExpiresAt)
	}
	return fmt.Sprintf("held by %s (token %d) for %s more", leasefmt.Quote(r.Owner), r.Token, remaining(r, now))
}

// ClaimDecision grants a claim of a missing, released or expired record
// with a token one larger than the record's; a live or done record is
// refused. A lease counts as expired for a claim only from expires_at +
// skew. Unknown keys of the old record are kept.
func ClaimDecision(k leasefmt.Kind, owner string, ttl, skew float64) Decide {
	return func(it Item, cur *leasefmt.Record, now float64) (*leasefmt.Record, Outcome, string) {
		if cur == nil {
			return &leasefmt.Record{Kind: k, ID: it.ID, Status: leasefmt.Leased, Owner: owner, Token: 1,
				ClaimedAt: now, RenewedAt: now, ExpiresAt: now + ttl}, OK, ""
		}
		switch {
		case cur.Status == leasefmt.Done:
			return nil, Done, fmt.Sprintf("work is done (token %d)", cur.Token)
		case cur.Status == leasefmt.Failed:
			return nil, Failed, failedDetail(cur)
		case Taken(cur, now, skew):
			return nil, Held, heldDetail(cur, now)
		case cur.Token >= leasefmt.MaxToken:
			return nil, Corrupt, "token space exhausted"
		}
		next := cur.Clone()
		next.Status, next.Owner, next.Token = leasefmt.Leased, owner, cur.Token+1
		next.ClaimedAt, next.RenewedAt, next.ExpiresAt = now, now, now+ttl
		next.Publish = ""
		return next, OK, ""
	}
}

// RenewDecision extends a current live lease to now+ttl; with ttl <= 0 it
// keeps the lease's own duration, expires_at - renewed_at of the record it
// renews (docs/design.md#clocks).
func RenewDecision(ttl, skew float64) Decide {
	return func(it Item, cur *leasefmt.Record, now float64) (*leasefmt.Record, Outcome, string) {
		if out, d := fenced(it, cur, now, skew); out != OK {
			return nil, out, d
		}
		d := ttl
		if d <= 0 {
			d = cur.ExpiresAt - cur.RenewedAt
		}
		next := cur.Clone()
		next.RenewedAt, next.ExpiresAt = now, now+d
		return next, OK, ""
	}
}

// ReleaseDecision ends a current live lease: released, expiring now.
func ReleaseDecision(skew float64) Decide {
	return func(it Item, cur *leasefmt.Record, now float64) (*leasefmt.Record, Outcome, string) {
		if out, d := fenced(it, cur, now, skew); out != OK {
			return nil, out, d
		}
		return released(cur, now), OK, ""
	}
}

func released(cur *leasefmt.Record, now float64) *leasefmt.Record {
	next := cur.Clone()
	next.Status, next.RenewedAt, next.ExpiresAt = leasefmt.Released, now, now
	next.Publish = ""
	return next
}

// RevokeDecision is the operator's take-back (lease revoke): a leased or
// committing record, live or not, becomes released now, keeping its token,
// so the holder is fenced out and the next claim gets a larger token.
func RevokeDecision() Decide {
	return func(it Item, cur *leasefmt.Record, now float64) (*leasefmt.Record, Outcome, string) {
		switch {
		case cur == nil:
			return nil, Missing, "no record"
		case cur.Status == leasefmt.Done:
			return nil, Done, fmt.Sprintf("work is done (token %d)", cur.Token)
		case cur.Status == leasefmt.Failed:
			return nil, Failed, failedDetail(cur)
		case cur.Status == leasefmt.Released:
			return nil, Released, fmt.Sprintf("already released (token %d)", cur.Token)
		}
		return released(cur, now), OK, ""
	}
}

// CommittingDecision moves a current live lease to committing, naming the
// staged result it publishes ("" for none). A record already committing
// under the same token and name is rewritten unchanged (a resumed
// complete); one already done under the same token is a completed retry:
// success, nothing written. A plain complete ("") is such a retry of any
// complete with that token, --publish included: completing again
// succeeds (lease-complete(1)), and it asks for nothing the done
// record lacks. A publish retried after a plain complete is not: its
// result was never published.
func CommittingDecision(publish string, skew float64) Decide {
	return func(it Item, cur *leasefmt.Record, now float64) (*leasefmt.Record, Outcome, string) {
		if cur != nil && cur.Token == it.Token && cur.Status == leasefmt.Done && (cur.Publish == publish || publish == "") {
			return nil, OK, "already done with this token"
		}
		if out, d := fenced(it, cur, now, skew); out != OK {
			return nil, out, d
		}
		if cur.Status == leasefmt.Committing && cur.Publish != publish {
			return nil, Held, fmt.Sprintf("already committing with publish %s", leasefmt.Quote(cur.Publish))
		}
		next := cur.Clone()
		next.Status, next.Publish = leasefmt.Committing, publish
		return next, OK, ""
	}
}

// DoneDecision finishes a committing lease under its token. Expiry no
// longer matters once committing is durable: the result is published.
func DoneDecision() Decide {
	return func(it Item, cur *leasefmt.Record, now float64) (*leasefmt.Record, Outcome, string) {
		switch {
		case cur == nil:
			return nil, Missing, "no record"
		case cur.Token != it.Token:
			return nil, StaleToken, fmt.Sprintf("current token is %d", cur.Token)
		case cur.Status != leasefmt.Committing:
			return nil, Held, fmt.Sprintf("status is %s, not committing", cur.Status)
		}
		return doneRecord(cur, now), OK, ""
	}
}

func doneRecord(cur *leasefmt.Record, now float64) *leasefmt.Record {
	next := cur.Clone()
	next.Status, next.RenewedAt = leasefmt.Done, now
	return next
}

// settleWhenTaken settles an abandoned publish when a claimer could take the
// record over: expired by more than the clock skew.
func (s *Store) settleWhenTaken(cur *leasefmt.Record, now float64) bool {
	return !Taken(cur, now, s.skew)
}

// settleTaken is settleWhenTaken as a policy (claims).
func (s *Store) settleTaken(_ Item, cur *leasefmt.Record, now float64) bool {
	return s.settleWhenTaken(cur, now)
}

// settleOwn settles an abandoned publish met by its own holder's token
// (its completer holds the lock throughout, so a committing record met
// under the lock has no completer at work), or by anyone once a claimer
// could take it over; never a live one for a stale token.
func (s *Store) settleOwn(it Item, cur *leasefmt.Record, now float64) bool {
	return it.Token == cur.Token || s.settleWhenTaken(cur, now)
}

// settleAlways settles an abandoned publish whenever it is met under the
// lock (lease revoke, the operator's take-back).
func settleAlways(Item, *leasefmt.Record, float64) bool { return true }

// Claim claims items (tokens ignored) for owner for ttl seconds. An
// expired committing record that names a published result is first
// rolled forward (done) or back (released) as docs/design.md#records says, never simply
// taken over.
func (s *Store) Claim(ctx context.Context, items []Item, owner string, ttl float64) []Result {
	return s.apply(ctx, leasefmt.Work, items, ClaimDecision(leasefmt.Work, owner, ttl, s.skew), s.settleTaken)
}

// ClaimFirst claims at most n of items, trying them in input order in waves
// of exactly as many as are still wanted, so it never holds more than n.
// It returns the results of the items it tried, in input order.
func (s *Store) ClaimFirst(ctx context.Context, items []Item, n int, owner string, ttl float64) []Result {
	var out []Result
	got := 0
	for len(items) > 0 && got < n && ctx.Err() == nil {
		w := n - got
		if w > len(items) {
			w = len(items)
		}
		res := s.Claim(ctx, items[:w], owner, ttl)
		items = items[w:]
		for _, r := range res {
			if r.Outcome == OK {
				got++
			}
			if r.Outcome == IOError {
				items = nil
			}
		}
		out = append(out, res...)
	}
	return out
}

// Renew renews items for ttl seconds from the time each is written; with
// ttl <= 0 each keeps its own duration.
func (s *Store) Renew(ctx context.Context, items []Item, ttl float64) []Result {
	return s.Apply(ctx, leasefmt.Work, items, RenewDecision(ttl, s.skew))
}

// Release releases items. A committing record that names a published
// result, met with its own token, is settled first, whatever its expiry:
// released as it is, its publish would be dropped while the result may
// already be in public/ (a complete killed after the move, then released
// by its lease run), and nobody could publish that name again. Rolled
// forward, the release reports done.
func (s *Store) Release(ctx context.Context, items []Item) []Result {
	return s.apply(ctx, leasefmt.Work, items, ReleaseDecision(s.skew), s.settleOwn)
}

// Revoke ends the leases of items (tokens ignored) whoever holds them: the
// operator's take-back. A committing record that names a published result
// is settled first (done when the result is in public/).
func (s *Store) Revoke(ctx context.Context, items []Item) []Result {
	return s.apply(ctx, leasefmt.Work, items, RevokeDecision(), settleAlways)
}

// Complete moves items leased → done, one group commit: fenced as the
// committing write of a publish is (the token current, the lease live), and
// written done at once, since a complete that publishes nothing has nothing
// a crash could leave half done (docs/design.md#records). A record met
// committing with no publish (written by an older lease or another program)
// under the token is made done the same way. An item already done under its
// token succeeds again (a retry). The queue entry of each item done is
// removed afterwards (docs/design.md#queue).
func (s *Store) Complete(ctx context.Context, items []Item) []Result {
	res := s.Apply(ctx, leasefmt.Work, items, CompleteDecision(s.skew))
	for _, r := range res {
		if r.Outcome == OK {
			s.dequeue(r.ID)
		}
	}
	return res
}

// CompleteDecision moves a current live lease straight to done: the
// decision of CommittingDecision with no publish, writing done instead of
// committing.
func CompleteDecision(skew float64) Decide {
	committing := CommittingDecision("", skew)
	return func(it Item, cur *leasefmt.Record, now float64) (*leasefmt.Record, Outcome, string) {
		next, out, detail := committing(it, cur, now)
		if next != nil {
			next = doneRecord(next, now)
		}
		return next, out, detail
	}
}

// Verify checks, without locks or writes, that each item's token is the
// current token of a lease its holder still has (docs/design.md#clocks: lost from
// expires_at - clock_skew): the fencing check a publisher makes.
func (s *Store) Verify(ctx context.Context, items []Item) []Result {
	res := make([]Result, len(items))
	for i, it := range items {
		r := &res[i]
		r.Item, r.Path = it, s.Abs(s.RecordPath(leasefmt.Work, it.ID))
		cur, err := s.Read(ctx, leasefmt.Work, it.ID)
		if err != nil {
			s.readFailed(err, r)
			s.count(r.Outcome)
			continue
		}
		now := s.now()
		r.Record = cur
		if cur != nil {
			r.Token = cur.Token
		}
		r.Outcome, r.Detail = fenced(it, cur, now, s.skew)
		if r.Outcome == OK {
			r.Detail = fmt.Sprintf("expires in %s", remaining(cur, now))
		}
		s.count(r.Outcome)
	}
	return res
}
