package keepalive

import (
	"fmt"
	"time"

	"github.com/leasetool/lease/commit"
)

// Set is what a watch knows of the leases it keeps alive, round after
// round. Its zero value is not usable; make one with NewSet.
type Set struct {
	skew float64
	// ttl is the duration granted to a lease the set has not renewed yet
	// when it is first read, for its lost point until the first renewal.
	ttl     float64
	leases  map[commit.Item]*Lease
	dropped map[commit.Item]bool
}

// NewSet returns an empty set; ttl is the duration assumed for a lease
// until its first renewal tells its own, skew the clock skew.
func NewSet(ttl, skew float64) *Set {
	return &Set{skew: skew, ttl: ttl, leases: map[commit.Item]*Lease{}, dropped: map[commit.Item]bool{}}
}

// Dropped reports whether it was dropped as lost: a lost lease is not
// renewed again, even when its line is read again.
func (s *Set) Dropped(it commit.Item) bool { return s.dropped[it] }

// Lease returns what the set knows of it, nil when nothing.
func (s *Set) Lease(it commit.Item) *Lease { return s.leases[it] }

// Outcome is what one round did to one lease.
type Outcome struct {
	Result commit.Result
	Event  Event
}

// Round records the results of one round of renewals begun at started and
// returns what each meant, in order. A failure that may pass is retried
// while the lease's lost point is ahead (for a lease never renewed, one
// ttl after it was first seen, less the skew); past it, the lease is lost.
// Lost and done leases are dropped from the set.
func (s *Set) Round(res []commit.Result, started time.Time) []Outcome {
	out := make([]Outcome, 0, len(res))
	for _, r := range res {
		l := s.leases[r.Item]
		if l == nil {
			l = &Lease{Item: r.Item, LostAt: started.Add(seconds(s.ttl - s.skew))}
			s.leases[r.Item] = l
		}
		ev := l.Renewal(r, started, s.skew)
		if ev == Lost && Classify(r.Outcome) == Retry {
			r.Detail = fmt.Sprintf("%s; not renewed before it counted as lost, dropped", r.Detail)
		}
		if ev == Lost || ev == Done {
			s.dropped[r.Item] = true
			delete(s.leases, r.Item)
		}
		out = append(out, Outcome{Result: r, Event: ev})
	}
	return out
}
