package census

import (
	"encoding/hex"

	"github.com/leasetool/lease/leasefmt"
)

// What a census gathers for lease status --watch beside the counts: each
// owner's newest renewal and the items that failed most. Both come from
// what censusShard reads or lists anyway (the live records it reads, the
// attempts in the status markers' names), so they cost no extra read, and
// both are bounded: one entry per owner, as Owners, and MostFailedK items.

// MostFailedK is how many items Census.MostFailed lists at most.
const MostFailedK = 10

// FailedItem is one of the items that failed most (Census.MostFailed).
type FailedItem struct {
	ID leasefmt.ID `json:"id"`
	// Attempts counts the item's failed runs.
	Attempts int64 `json:"attempts"`
	// State is the item's state as the census counts it: leased, expired,
	// committing, released, done or failed.
	State string `json:"state"`
}

// noteMarked counts, for the watch, a done or failed record that the
// census counted from its status marker: its attempts are the marker's.
func (c *Census) noteMarked(k idKey, failed bool, attempts int64) {
	if attempts <= 0 || !c.failedMore(k, attempts) {
		return
	}
	state := string(leasefmt.Done)
	if failed {
		state = string(leasefmt.Failed)
	}
	c.offerFailed(FailedItem{ID: leasefmt.ID(hex.EncodeToString(k[:])), Attempts: attempts, State: state})
}

// noteRead counts, for the watch, a record the census read; live is
// rec.Live at the census's clock.
func (c *Census) noteRead(rec *leasefmt.Record, live bool) {
	if live {
		if c.OwnerRenewed == nil {
			c.OwnerRenewed = map[string]float64{}
		}
		if t, ok := c.OwnerRenewed[rec.Owner]; !ok || rec.RenewedAt > t {
			c.OwnerRenewed[rec.Owner] = rec.RenewedAt
		}
	}
	if rec.Attempts <= 0 {
		return
	}
	state := string(rec.Status)
	if !live && (rec.Status == leasefmt.Leased || rec.Status == leasefmt.Committing) {
		state = "expired"
	}
	c.offerFailed(FailedItem{ID: rec.ID, Attempts: rec.Attempts, State: state})
}

// mergeWatch adds what a shard's census gathered for the watch to c's.
func (c *Census) mergeWatch(part *Census) {
	if c.OwnerRenewed == nil {
		c.OwnerRenewed = map[string]float64{}
	}
	for o, t := range part.OwnerRenewed {
		if old, ok := c.OwnerRenewed[o]; !ok || t > old {
			c.OwnerRenewed[o] = t
		}
	}
	if c.MostFailed == nil {
		c.MostFailed = []FailedItem{}
	}
	for _, it := range part.MostFailed {
		c.offerFailed(it)
	}
}

// failedMore reports whether an item of key k with attempts would enter
// MostFailed, without making its ID: most markers are passed over here.
func (c *Census) failedMore(k idKey, attempts int64) bool {
	if len(c.MostFailed) < MostFailedK {
		return true
	}
	last := c.MostFailed[len(c.MostFailed)-1]
	if attempts != last.Attempts {
		return attempts > last.Attempts
	}
	var id [64]byte
	hex.Encode(id[:], k[:])
	return string(id[:]) < string(last.ID)
}

// offerFailed keeps it in MostFailed if it is among the MostFailedK items
// with the most attempts (ties: the smaller ID), in that order.
func (c *Census) offerFailed(it FailedItem) {
	before := func(a, b FailedItem) bool {
		if a.Attempts != b.Attempts {
			return a.Attempts > b.Attempts
		}
		return a.ID < b.ID
	}
	// An item counted twice (from its record, then from the link its
	// finisher made meanwhile) is listed once.
	for j, old := range c.MostFailed {
		if old.ID == it.ID {
			if !before(it, old) {
				return
			}
			c.MostFailed = append(c.MostFailed[:j], c.MostFailed[j+1:]...)
			break
		}
	}
	i := len(c.MostFailed)
	for i > 0 && before(it, c.MostFailed[i-1]) {
		i--
	}
	if i >= MostFailedK {
		return
	}
	if len(c.MostFailed) < MostFailedK {
		c.MostFailed = append(c.MostFailed, FailedItem{})
	}
	copy(c.MostFailed[i+1:], c.MostFailed[i:])
	c.MostFailed[i] = it
}
