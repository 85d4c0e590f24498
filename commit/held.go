package commit

import (
	"context"
	"slices"
	"strings"

	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// Abandoned first (docs/design.md#queue, issue 36). held/ holds one empty
// file per work lease in flight, held/ID.E.TOKEN: E is the lease's
// expires_at when it was claimed, rounded up to the second (a lower bound of
// its expiry: renewals do not touch the name), TOKEN the token the claim
// got. A claim makes the name under the record's lock, after its record
// write, not durably (no fsync of held/: a name lost in a crash costs
// nothing but a find in the queue, below); release, complete, fail and
// revoke remove it after their record write, not durably either. So held/ grows with the leases held, not with the queue, and
// ClaimNext lists it first: the names whose E + clock_skew has passed are
// the items most likely abandoned, tried oldest first before the queue.
//
// held/ is only an accelerator: the queue stays authoritative, a name
// lost in a crash (or a record written by a program that knows nothing of
// held/) only leaves the item to be found in the queue, and a name left by
// a kill (a finisher killed before its removal) is renamed or removed by
// the next claim that reads it, or reported by lease fsck and removed by
// --repair. Nothing in held/ is ever followed: a name is parsed, never
// opened.

// hold makes the held/ name of next, a lease just claimed (the caller
// holds its lock and renamed next into place), not durably: held/ is an
// accelerator, and its fsync would be one more durable sync for every
// claim (docs/performance.md#budget). An item claimed from held/ (it.held)
// has its old name renamed to the new one. Best effort: a name that cannot
// be made only leaves the item to be found in the queue (a held/ that is
// not a directory is lease fsck's).
func (s *Store) hold(it Item, next *leasefmt.Record) {
	name := layout.HeldDir + "/" + layout.HeldName(next.ID, next.ExpiresAt, next.Token)
	if err := s.disk.EnsureDir(layout.HeldDir); err != nil {
		return
	}
	if it.held != "" {
		if err := s.fs.Rename(layout.HeldDir+"/"+it.held, name); err == nil {
			return
		}
	}
	if f, err := s.fs.CreateExcl(name); err == nil {
		f.Close()
	}
}

// settleHeld settles the held/ name it.held of an item claimed from held/
// that the claim did not take, under the record's lock with cur read
// there: a lease held since (renewed, or another holder's) gets its entry
// renamed to the name its record says, so the next claim does not read it
// again before it can have expired; a finished or released record's name
// is removed (its finisher was killed before the removal). Not durable: a
// name a crash brings back is read once more.
func (s *Store) settleHeld(it Item, cur *leasefmt.Record) {
	if it.held == "" || cur == nil {
		return
	}
	old := layout.HeldDir + "/" + it.held
	switch cur.Status {
	case leasefmt.Leased, leasefmt.Committing:
		if n := layout.HeldName(cur.ID, cur.ExpiresAt, cur.Token); n != it.held {
			if s.fs.Rename(old, layout.HeldDir+"/"+n) == nil {
				s.stats.HeldRenamed.Add(1)
			}
		}
	default:
		if s.fs.Remove(old) == nil {
			s.stats.HeldRemoved.Add(1)
		}
	}
}

// unhold removes, after their record writes, the held/ names of the leases
// of results that ended them (released, done, failed): every name of such
// an ID whose token is at most the record's (a later token is a new
// holder's, claimed since the write). held/ is listed once for the batch;
// the removals are not durable (a name a crash brings back is settled by
// the next claim that reads it).
func (s *Store) unhold(res []Result) {
	ended := map[leasefmt.ID]int64{}
	for _, r := range res {
		if r.Outcome != OK || r.Record == nil || r.Record.Kind != leasefmt.Work {
			continue
		}
		switch r.Record.Status {
		case leasefmt.Released, leasefmt.Done, leasefmt.Failed:
			ended[r.ID] = max(ended[r.ID], r.Record.Token)
		}
	}
	if len(ended) == 0 {
		return
	}
	var drop []string
	s.ListNames(layout.HeldDir, func(name string) {
		if id, _, tok, ok := layout.ParseHeldName(name); ok {
			if t, ok := ended[id]; ok && tok <= t {
				drop = append(drop, name)
			}
		}
	})
	for _, n := range drop {
		if s.fs.Remove(layout.HeldDir+"/"+n) == nil {
			s.stats.HeldRemoved.Add(1)
		}
	}
}

// heldCandidate is a name of held/ whose lease may be over.
type heldCandidate struct {
	name    string
	id      leasefmt.ID
	expires int64
}

// heldCandidates lists held/ (one directory of about as many names as
// leases in flight): the names whose E + clock_skew has passed by now,
// oldest first, and the earliest E + clock_skew of the others (0: none).
// Names that are not held/ names are left to lease fsck. A held/ that does
// not exist (a table made before it, or no claim yet) has none.
func (s *Store) heldCandidates() ([]heldCandidate, float64, error) {
	now := s.now()
	var out []heldCandidate
	next := 0.0
	err := s.ListNames(layout.HeldDir, func(name string) {
		id, e, _, ok := layout.ParseHeldName(name)
		if !ok {
			return
		}
		t := float64(e) + s.skew
		if t <= now {
			out = append(out, heldCandidate{name: name, id: id, expires: e})
		} else if next == 0 || t < next {
			next = t
		}
	})
	slices.SortFunc(out, func(a, b heldCandidate) int {
		if a.expires != b.expires {
			if a.expires < b.expires {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	return out, next, err
}

// dropFinishedHeld removes the name c of an item that has no queue entry
// when its record is done or failed: a name a crash brought back after its
// removal (a lease of the item, even after lease retry, has a larger
// token). Any other name is left to its holder, or to lease fsck.
func (s *Store) dropFinishedHeld(ctx context.Context, c heldCandidate) {
	rec, err := s.Read(ctx, leasefmt.Work, c.id)
	if err != nil || rec == nil || (rec.Status != leasefmt.Done && rec.Status != leasefmt.Failed) {
		return
	}
	if s.fs.Remove(layout.HeldDir+"/"+c.name) == nil {
		s.stats.HeldRemoved.Add(1)
	}
}
