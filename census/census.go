package census

import (
	"context"
	"encoding/hex"
	"errors"
	"sync"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// Census is what the table holds, counted (lease status --summary): what an
// operator watches during a campaign.
type Census struct {
	// From listing the queue and work shard directories only:
	Queued int64 `json:"queued"` // queue entries: items not done
	Free   int64 `json:"free"`   // queued items never claimed (no record)
	// From reading every work record:
	Records    int64 `json:"records"`
	Leased     int64 `json:"leased"`     // leased and live
	Expired    int64 `json:"expired"`    // leased or committing, time ran out
	Committing int64 `json:"committing"` // committing and live
	Released   int64 `json:"released"`
	Done       int64 `json:"done"`
	Failed     int64 `json:"failed"`   // failed max_attempts times (lease retry)
	Attempts   int64 `json:"attempts"` // failed runs counted in every record
	Retried    int64 `json:"retried"`  // items not done or failed with a failed run
	Corrupt    int64 `json:"corrupt"`  // records that do not validate (lease fsck)
	// Owners counts the live leases (leased or committing) per owner.
	Owners map[string]int64 `json:"owners"`
	// Method says how the finished items were counted: MethodTally or
	// MethodListing.
	Method string `json:"method"`
	// OwnerRenewed is each owner's last renewal: the newest renewed_at
	// (seconds since the epoch) of its live leases (watch.go).
	OwnerRenewed map[string]float64 `json:"owner_renewed"`
	// MostFailed are the items with the most failed runs, most first, at
	// most MostFailedK of them (watch.go).
	MostFailed []FailedItem `json:"most_failed"`
	// fromRecord are the finished items tallyShard counted from their
	// records because their links were missing: tallyBuckets does not count
	// them again when a finisher made the link in between.
	fromRecord map[idKey]bool
}

// The methods of a census.
const (
	// MethodTally: from the tally's buckets, and the records of the queued
	// and flagged items (tally.go).
	MethodTally = "tally"
	// MethodListing: from the listings of the shards, and the records they
	// cannot account for (censusShard).
	MethodListing = "listing"
)

// censusChunk is how many names a census reads from a directory at once.
const censusChunk = 4096

// Census counts the table's queue and work records at the store's clock
// (Options.Clock, Store.At; read once). The queue and the names of the records are
// listed, by up to workers shards at a time, so that memory stays at a few
// shards' names whatever the table's size; only the records the listings
// cannot account for are read (censusShard). A record that cannot be read for an
// I/O error stops it.
func (s store) Census(ctx context.Context, workers int) (Census, error) {
	now := s.Now()
	if ok, err := s.TallyTrusted(); err != nil {
		return Census{}, &durable.OpError{Op: "stat", Path: s.Abs(layout.TrustedFile), Err: err}
	} else if ok {
		return s.tallyCensus(ctx, workers, now)
	}
	return s.ListingCensus(ctx, workers)
}

// ListingCensus is Census from the shards' listings and records whatever
// the tally says: what Census does when the tally is not trusted, and
// lease status --summary --full.
func (s store) ListingCensus(ctx context.Context, workers int) (Census, error) {
	now := s.Now()
	c := Census{Owners: map[string]int64{}, Method: MethodListing}
	err := s.eachShardCensus(workers, &c, func(sh int) (Census, error) { return s.censusShard(ctx, sh, now) })
	return c, err
}

// eachShardCensus adds count(sh) of every work shard sh to c, workers
// shards at a time, and returns the first error met.
func (s store) eachShardCensus(workers int, c *Census, count func(sh int) (Census, error)) error {
	var mu sync.Mutex
	var firstErr error
	shards := make([]int, s.Table().WorkShards)
	for i := range shards {
		shards[i] = i
	}
	s.InParallel(workers, shards, func(sh int) {
		part, err := count(sh)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		c.add(part)
	})
	return firstErr
}

// idKey is an ID as 32 bytes: a census keys its maps by it, so that a
// shard's names cost no allocation each.
type idKey [32]byte

// parseKey decodes a canonical ID (64 lowercase hex digits) from b.
func parseKey(b []byte) (idKey, bool) {
	var k idKey
	if len(b) != 64 {
		return k, false
	}
	for i := range 32 {
		hi, ok1 := unhex(b[2*i])
		lo, ok2 := unhex(b[2*i+1])
		if !ok1 || !ok2 {
			return k, false
		}
		k[i] = hi<<4 | lo
	}
	return k, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// parseMarker is ParseMarkerName over a listing's bytes, without
// allocating: the ID, whether the marker says failed (else done), and the
// attempts.
func parseMarker(b []byte) (idKey, bool, int64, bool) {
	k, ok := parseKey(b[:min(64, len(b))])
	if !ok || len(b) < 66 || b[64] != '.' {
		return k, false, 0, false
	}
	rest := b[65:]
	failed := false
	switch {
	case len(rest) > 5 && string(rest[:5]) == string(leasefmt.Done)+".":
		rest = rest[5:]
	case len(rest) > 7 && string(rest[:7]) == string(leasefmt.Failed)+".":
		rest, failed = rest[7:], true
	default:
		return k, false, 0, false
	}
	if len(rest) > 18 || (len(rest) > 1 && rest[0] == '0') {
		return k, false, 0, false
	}
	var n int64
	for _, c := range rest {
		if c < '0' || c > '9' {
			return k, false, 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return k, failed, n, true
}

// listed is what a shard's listing says about one ID: the inode numbers of
// its record and its status marker (0: none), and the marker's status and
// attempts.
type listed struct {
	record, marker uint64
	failed         bool
	attempts       int64
}

// censusShard counts shard sh. Only the records that the listings cannot
// account for are read: those of queued items (not done), and those whose
// status marker is missing or is not the record's own inode (see
// markers.go). A done or failed record with its marker is counted from the
// listing, so the cost in reads follows the items in flight, not the items
// done (docs/design.md#statistics).
func (s store) censusShard(ctx context.Context, sh int, now float64) (Census, error) {
	c := Census{Owners: map[string]int64{}}
	queued := map[idKey]bool{}
	err := s.ScanDir(s.QueueShardDir(sh), func(name []byte, _ uint64) {
		if k, ok := parseKey(name); ok {
			queued[k] = true
		}
	})
	if err != nil {
		return c, err
	}
	c.Queued = int64(len(queued))
	shard := map[idKey]listed{}
	err = s.ScanDir(s.ShardDir(leasefmt.Work, sh), func(name []byte, ino uint64) {
		if len(name) == 69 && string(name[64:]) == ".json" {
			if k, ok := parseKey(name[:64]); ok {
				l := shard[k]
				l.record = max(ino, 1) // 1: listed, inode unknown
				shard[k] = l
			}
			return
		}
		if len(name) < 66 || ino == 0 {
			return
		}
		if k, failed, n, ok := parseMarker(name); ok {
			l := shard[k]
			l.marker, l.failed, l.attempts = ino, failed, n
			shard[k] = l
		}
	})
	if err != nil {
		return c, err
	}
	var ids []leasefmt.ID
	for k, l := range shard {
		if l.record == 0 {
			continue // a marker without its record
		}
		q := queued[k]
		delete(queued, k)
		if !q && l.marker != 0 && l.marker == l.record {
			c.Records++
			c.Attempts += l.attempts
			c.noteMarked(k, l.failed, l.attempts)
			if l.failed {
				c.Failed++
			} else {
				c.Done++
			}
			continue
		}
		ids = append(ids, leasefmt.ID(hex.EncodeToString(k[:])))
	}
	c.Free = int64(len(queued))
	for _, id := range ids {
		rec, err := s.Read(ctx, leasefmt.Work, id)
		switch {
		case errors.Is(err, leasefmt.ErrCorrupt):
			c.Corrupt++
			continue
		case err != nil:
			return c, err
		case rec == nil: // removed since the listing
			continue
		}
		c.count(rec, now)
	}
	return c, nil
}

// count adds rec, a work record read, to c.
func (c *Census) count(rec *leasefmt.Record, now float64) {
	c.Records++
	c.Attempts += rec.Attempts
	live := rec.Live(now)
	if rec.Attempts > 0 && rec.Status != leasefmt.Done && rec.Status != leasefmt.Failed {
		c.Retried++
	}
	switch {
	case rec.Status == leasefmt.Done:
		c.Done++
	case rec.Status == leasefmt.Failed:
		c.Failed++
	case rec.Status == leasefmt.Released:
		c.Released++
	case !live:
		c.Expired++
	case rec.Status == leasefmt.Committing:
		c.Committing++
	default:
		c.Leased++
	}
	if live {
		c.Owners[rec.Owner]++
	}
	c.noteRead(rec, live)
}

// add adds the counts of part to c.
func (c *Census) add(part Census) {
	c.Queued += part.Queued
	c.Free += part.Free
	c.Records += part.Records
	c.Leased += part.Leased
	c.Expired += part.Expired
	c.Committing += part.Committing
	c.Released += part.Released
	c.Done += part.Done
	c.Failed += part.Failed
	c.Attempts += part.Attempts
	c.Retried += part.Retried
	c.Corrupt += part.Corrupt
	for o, n := range part.Owners {
		c.Owners[o] += n
	}
	for k := range part.fromRecord {
		if c.fromRecord == nil {
			c.fromRecord = map[idKey]bool{}
		}
		c.fromRecord[k] = true
	}
	c.mergeWatch(&part)
}

// store is the engine's Store seen by the census: it reads the table
// through the Store's exported reads (FS, Table, Now, ScanDir, ListNames,
// Read) and never writes a record.
type store struct{ *commit.Store }

// Take counts the table's queue and work records at st's clock (Census).
func Take(ctx context.Context, st *commit.Store, workers int) (Census, error) {
	return store{st}.Census(ctx, workers)
}

// Listing counts from the shards' listings and records whatever the tally
// says (ListingCensus): lease status --summary --full.
func Listing(ctx context.Context, st *commit.Store, workers int) (Census, error) {
	return store{st}.ListingCensus(ctx, workers)
}
