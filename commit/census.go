package commit

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"sync"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
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
}

// censusChunk is how many names a census reads from a directory at once.
const censusChunk = 4096

// Census counts the table's queue and work records at the store's clock
// (WithClock, Store.At; read once). The queue and the names of the records are
// listed, by up to workers shards at a time, so that memory stays at a few
// shards' names whatever the table's size; only the records the listings
// cannot account for are read (censusShard). A record that cannot be read for an
// I/O error stops it.
func (s *Store) Census(ctx context.Context, workers int) (Census, error) {
	now := s.now()
	c := Census{Owners: map[string]int64{}}
	var mu sync.Mutex
	var firstErr error
	shards := make([]int, s.hdr.WorkShards)
	for i := range shards {
		shards[i] = i
	}
	s.parallelN(workers, shards, func(sh int) {
		part, err := s.censusShard(ctx, sh, now)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return
		}
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
	})
	return c, firstErr
}

// listNames calls fn with every name of directory dir (none when it does
// not exist), read in chunks.
func (s *Store) listNames(dir string, fn func(name string)) error {
	d, err := seam.OpenDir(s.fs, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &durable.OpError{Op: "list", Path: s.Abs(dir), Err: err}
	}
	defer d.Close()
	for {
		names, err := d.ReadNames(censusChunk)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &durable.OpError{Op: "list", Path: s.Abs(dir), Err: err}
		}
		for _, n := range names {
			fn(n)
		}
	}
}

// listDirents calls fn with every name of directory dir and its inode
// number (0 when the FS gives none), read in chunks.
func (s *Store) listDirents(dir string, fn func(name string, ino uint64)) error {
	d, err := seam.OpenDir(s.fs, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &durable.OpError{Op: "list", Path: s.Abs(dir), Err: err}
	}
	defer d.Close()
	ir, withIno := d.(seam.InodeReader)
	for {
		var ents []seam.Dirent
		if withIno {
			ents, err = ir.ReadDirents(censusChunk)
		} else {
			var names []string
			names, err = d.ReadNames(censusChunk)
			for _, n := range names {
				ents = append(ents, seam.Dirent{Name: n})
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &durable.OpError{Op: "list", Path: s.Abs(dir), Err: err}
		}
		for _, e := range ents {
			fn(e.Name, e.Ino)
		}
	}
}

// marker is what a status marker of a shard's listing says.
type marker struct {
	status   leasefmt.Status
	attempts int64
	ino      uint64
}

// censusShard counts shard sh. Only the records that the listings cannot
// account for are read: those of queued items (not done), and those whose
// status marker is missing or is not the record's own inode (see
// markers.go). A done or failed record with its marker is counted from the
// listing, so the cost in reads follows the items in flight, not the items
// done (docs/design.md#statistics).
func (s *Store) censusShard(ctx context.Context, sh int, now float64) (Census, error) {
	c := Census{Owners: map[string]int64{}}
	queued := map[leasefmt.ID]bool{}
	err := s.listNames(s.QueueShardDir(sh), func(name string) {
		if id, err := leasefmt.ParseID(name); err == nil {
			queued[id] = true
		}
	})
	if err != nil {
		return c, err
	}
	c.Queued = int64(len(queued))
	records := map[leasefmt.ID]uint64{}
	var markers map[leasefmt.ID]marker
	err = s.listDirents(s.ShardDir(leasefmt.Work, sh), func(name string, ino uint64) {
		if base, ok := strings.CutSuffix(name, ".json"); ok {
			if id, err := leasefmt.ParseID(base); err == nil {
				records[id] = ino
			}
			return
		}
		if id, st, n, ok := ParseMarkerName(name); ok && ino != 0 {
			if markers == nil {
				markers = map[leasefmt.ID]marker{}
			}
			markers[id] = marker{st, n, ino}
		}
	})
	if err != nil {
		return c, err
	}
	var ids []leasefmt.ID
	for id, ino := range records {
		q := queued[id]
		delete(queued, id)
		if m, ok := markers[id]; ok && !q && ino != 0 && m.ino == ino {
			c.Records++
			c.Attempts += m.attempts
			if m.status == leasefmt.Done {
				c.Done++
			} else {
				c.Failed++
			}
			continue
		}
		ids = append(ids, id)
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
	}
	return c, nil
}
