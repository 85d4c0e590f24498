package commit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"github.com/leasetool/lease/leasefmt"
)

// remaining renders the time left on a lease.
func remaining(r *leasefmt.Record, now float64) string {
	return fmt.Sprintf("%.1fs", r.ExpiresAt-now)
}

func heldDetail(r *leasefmt.Record, now float64) string {
	return fmt.Sprintf("held by %s (token %d) for %s more", leasefmt.Quote(r.Owner), r.Token, remaining(r, now))
}

// fenced checks that it holds the current, live lease of cur: the checks of
// renew, release, complete and verify, in the order that names the most
// useful reason. Committing counts as held.
func fenced(it Item, cur *leasefmt.Record, now float64) (Outcome, string) {
	switch {
	case cur == nil:
		return Missing, "no record"
	case cur.Token != it.Token:
		return StaleToken, fmt.Sprintf("current token is %d (%s, owner %s)", cur.Token, cur.Status, leasefmt.Quote(cur.Owner))
	case cur.Status == leasefmt.Done:
		return Done, "work is done"
	case cur.Status == leasefmt.Released:
		return Released, "lease was released"
	case !cur.Live(now):
		return Expired, fmt.Sprintf("expired %.1fs ago", now-cur.ExpiresAt)
	}
	return OK, ""
}

// ClaimDecision grants a claim of a missing, released or expired record
// with a token one larger than the record's; a live or done record is
// refused. Unknown keys of the old record are kept.
func ClaimDecision(k leasefmt.Kind, owner string, now, ttl float64) Decide {
	return func(it Item, cur *leasefmt.Record) (*leasefmt.Record, Outcome, string) {
		if cur == nil {
			return &leasefmt.Record{Kind: k, ID: it.ID, Status: leasefmt.Leased, Owner: owner, Token: 1,
				ClaimedAt: now, RenewedAt: now, ExpiresAt: now + ttl}, OK, ""
		}
		switch {
		case cur.Status == leasefmt.Done:
			return nil, Done, fmt.Sprintf("work is done (token %d)", cur.Token)
		case cur.Live(now):
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

// RenewDecision extends a current live lease to now+ttl.
func RenewDecision(now, ttl float64) Decide {
	return func(it Item, cur *leasefmt.Record) (*leasefmt.Record, Outcome, string) {
		if out, d := fenced(it, cur, now); out != OK {
			return nil, out, d
		}
		next := cur.Clone()
		next.RenewedAt, next.ExpiresAt = now, now+ttl
		return next, OK, ""
	}
}

// ReleaseDecision ends a current live lease: released, expiring now.
func ReleaseDecision(now float64) Decide {
	return func(it Item, cur *leasefmt.Record) (*leasefmt.Record, Outcome, string) {
		if out, d := fenced(it, cur, now); out != OK {
			return nil, out, d
		}
		next := cur.Clone()
		next.Status, next.RenewedAt, next.ExpiresAt = leasefmt.Released, now, now
		next.Publish = ""
		return next, OK, ""
	}
}

// CommittingDecision moves a current live lease to committing, naming the
// staged result it publishes ("" for none). A record already committing
// under the same token and name is rewritten unchanged (a resumed complete).
func CommittingDecision(now float64, publish string) Decide {
	return func(it Item, cur *leasefmt.Record) (*leasefmt.Record, Outcome, string) {
		if out, d := fenced(it, cur, now); out != OK {
			return nil, out, d
		}
		if cur.Status == leasefmt.Committing && cur.Publish != publish {
			return nil, Held, fmt.Sprintf("already committing with publish %s", leasefmt.Quote(cur.Publish))
		}
		next := cur.Clone()
		next.Status, next.Publish, next.RenewedAt = leasefmt.Committing, publish, now
		return next, OK, ""
	}
}

// DoneDecision finishes a committing lease under its token. Expiry no
// longer matters once committing is durable: the result is published.
func DoneDecision(now float64) Decide {
	return func(it Item, cur *leasefmt.Record) (*leasefmt.Record, Outcome, string) {
		switch {
		case cur == nil:
			return nil, Missing, "no record"
		case cur.Token != it.Token:
			return nil, StaleToken, fmt.Sprintf("current token is %d", cur.Token)
		case cur.Status != leasefmt.Committing:
			return nil, Held, fmt.Sprintf("status is %s, not committing", cur.Status)
		}
		next := cur.Clone()
		next.Status, next.RenewedAt = leasefmt.Done, now
		return next, OK, ""
	}
}

// Claim claims items (tokens ignored) for owner until now+ttl.
func (s *Store) Claim(items []Item, owner string, now, ttl float64) []Result {
	return s.Apply(leasefmt.Work, items, ClaimDecision(leasefmt.Work, owner, now, ttl))
}

// ClaimFirst claims at most n of items, trying them in input order in waves
// of exactly as many as are still wanted, so it never holds more than n.
// It returns the results of the items it tried, in input order.
func (s *Store) ClaimFirst(items []Item, n int, owner string, now, ttl float64) []Result {
	var out []Result
	got := 0
	for len(items) > 0 && got < n {
		w := n - got
		if w > len(items) {
			w = len(items)
		}
		res := s.Claim(items[:w], owner, now, ttl)
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

// Renew renews items until now+ttl.
func (s *Store) Renew(items []Item, now, ttl float64) []Result {
	return s.Apply(leasefmt.Work, items, RenewDecision(now, ttl))
}

// Release releases items.
func (s *Store) Release(items []Item, now float64) []Result {
	return s.Apply(leasefmt.Work, items, ReleaseDecision(now))
}

// Complete moves items leased → committing → done, each step a group
// commit; an item reaches done only when its committing write was durable.
func (s *Store) Complete(items []Item, now float64) []Result {
	res := s.Apply(leasefmt.Work, items, CommittingDecision(now, ""))
	var next []Item
	var idx []int
	for i, r := range res {
		if r.Outcome == OK {
			next = append(next, r.Item)
			idx = append(idx, i)
		}
	}
	if len(next) == 0 {
		return res
	}
	done := s.Apply(leasefmt.Work, next, DoneDecision(now))
	for j, i := range idx {
		res[i] = done[j]
	}
	return res
}

// ErrStaged is wrapped by errors about the staged file of a publish.
var ErrStaged = errors.New("commit: staged result")

// CompletePublish completes one lease and publishes ROOT/stage/name as
// ROOT/public/name between committing and done, holding the record's lock
// throughout: committing (with "publish") is durable before the move, the
// move is a durable cross-directory replace that never overwrites, and done
// is written after it. A crash at any point leaves a state fsck rolls
// forward. An error wrapping ErrStaged means the staged file is unusable
// and nothing was written.
func (s *Store) CompletePublish(it Item, name string, now float64) (Result, error) {
	r := Result{Item: it, Path: s.Abs(s.RecordPath(leasefmt.Work, it.ID))}
	if err := leasefmt.CheckPublishName(name); err != nil {
		return r, fmt.Errorf("%w: %v", ErrStaged, err)
	}
	staged, public := path.Join(StageDir, name), path.Join(PublicDir, name)
	unlock, err := s.Lock(leasefmt.Work, it.ID)
	if err != nil {
		return r, s.lockFailed(err, &r)
	}
	defer unlock()
	cur, err := s.Read(leasefmt.Work, it.ID)
	if err != nil {
		return r, s.readFailed(err, &r)
	}
	r.Record = cur
	if cur != nil {
		r.Token = cur.Token
	}
	next, out, detail := CommittingDecision(now, name)(it, cur)
	if r.Outcome, r.Detail = out, detail; out != OK {
		s.count(out)
		return r, nil
	}
	resumed := cur.Status == leasefmt.Committing
	stagedOK, publicExists, err := s.publishState(staged, public)
	if err != nil {
		r.Outcome, r.Detail = IOError, err.Error()
		s.count(IOError)
		return r, err
	}
	switch {
	case !stagedOK && !(resumed && publicExists):
		r.Outcome = Missing
		return r, fmt.Errorf("%w %s: not a regular file in %s", ErrStaged, s.Abs(staged), s.Abs(StageDir))
	case stagedOK && publicExists:
		r.Outcome, r.Detail = Exists, fmt.Sprintf("%s already exists; publish never replaces", s.Abs(public))
		s.count(Exists)
		return r, nil
	}
	s.Stats.Batches.Add(1)
	if err := s.WriteOne(next); err != nil {
		r.Outcome, r.Detail = IOError, err.Error()
		s.count(IOError)
		return r, err
	}
	if stagedOK {
		if err := s.DurableMove(staged, public); err != nil {
			r.Outcome, r.Detail = IOError, "record is committing, publish failed: "+err.Error()
			s.count(IOError)
			return r, err
		}
	}
	done, _, _ := DoneDecision(now)(it, next)
	if err := s.WriteOne(done); err != nil {
		r.Outcome, r.Detail = IOError, "published, record still committing: "+err.Error()
		s.count(IOError)
		return r, err
	}
	r.Outcome, r.Record, r.Token = OK, done, done.Token
	s.count(OK)
	return r, nil
}

func (s *Store) publishState(staged, public string) (stagedOK, publicExists bool, err error) {
	fi, err := s.FS.Lstat(staged)
	switch {
	case err == nil:
		stagedOK = fi.Mode().IsRegular()
	case !errors.Is(err, fs.ErrNotExist):
		return false, false, err
	}
	_, err = s.FS.Lstat(public)
	switch {
	case err == nil:
		publicExists = true
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, os.ErrNotExist):
		return false, false, err
	}
	return stagedOK, publicExists, nil
}

// Verify checks, without locks or writes, that each item's token is the
// current token of a live lease (the fencing check a publisher makes).
func (s *Store) Verify(items []Item, now float64) []Result {
	res := make([]Result, len(items))
	for i, it := range items {
		r := &res[i]
		r.Item, r.Path = it, s.Abs(s.RecordPath(leasefmt.Work, it.ID))
		cur, err := s.Read(leasefmt.Work, it.ID)
		if err != nil {
			s.readFailed(err, r)
			s.count(r.Outcome)
			continue
		}
		r.Record = cur
		if cur != nil {
			r.Token = cur.Token
		}
		r.Outcome, r.Detail = fenced(it, cur, now)
		if r.Outcome == OK {
			r.Detail = fmt.Sprintf("expires in %s", remaining(cur, now))
		}
		s.count(r.Outcome)
	}
	return res
}
