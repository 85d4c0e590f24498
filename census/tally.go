package census

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"time"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// tallySettle is how long after its span a bucket may be folded into the
// checkpoint: the writers whose clocks lag (within the table's clock skew)
// are done with it by then.
const tallySettle = 60

// tallyQuiet is how long a bucket's directory must have been unchanged,
// by the filesystem's own clock, before its counts are kept: a change made
// in the same tick of the directory's change time as the last one before
// the listing would not show in its stat.
var tallyQuiet = 2 * time.Second

// TallyQuietForTest sets tallyQuiet and returns what it was (tests only:
// the engine's tests in package commit_test cannot reach it otherwise).
func TallyQuietForTest(d time.Duration) time.Duration {
	old := tallyQuiet
	tallyQuiet = d
	return old
}

// tallyCensus is Census from the tally (tally.go): the finished items
// from the buckets (a stat each for the ones the checkpoint holds, a
// listing for the rest), every other item from the queue's listing, the
// flags of the unqueued ones and their records. Its cost follows the items
// not finished, the items finished in the last minutes and the number of
// buckets, not the items finished.
func (s store) tallyCensus(ctx context.Context, workers int, now float64) (Census, error) {
	c := Census{Owners: map[string]int64{}, Method: MethodTally}
	flagged := map[int][]leasefmt.ID{}
	err := s.ListNames(layout.UnqueuedDir, func(name string) {
		if id, err := leasefmt.ParseID(name); err == nil {
			sh := id.Shard(s.Table().WorkShards)
			flagged[sh] = append(flagged[sh], id)
		}
	})
	if err != nil {
		return c, err
	}
	err = s.eachShardCensus(workers, &c, func(sh int) (Census, error) { return s.tallyShard(ctx, sh, flagged[sh], now) })
	if err != nil {
		return c, err
	}
	part, err := s.tallyBuckets(workers, now, c.fromRecord)
	if err != nil {
		return c, err
	}
	c.fromRecord = nil
	c.add(part)
	return c, nil
}

// tallyShard counts the items of shard sh that the tally does not: the
// queued ones and those flagged, from their records. A finished record met
// there (a queue entry not yet removed, a retry cut short) is counted only
// when its link is missing, so that no item is counted twice.
func (s store) tallyShard(ctx context.Context, sh int, flagged []leasefmt.ID, now float64) (Census, error) {
	c := Census{Owners: map[string]int64{}}
	seen := map[idKey]bool{}
	var ids []leasefmt.ID
	err := s.ScanDir(s.QueueShardDir(sh), func(name []byte, _ uint64) {
		if k, ok := parseKey(name); ok && !seen[k] {
			seen[k] = true
			ids = append(ids, leasefmt.ID(name))
		}
	})
	if err != nil {
		return c, err
	}
	c.Queued = int64(len(ids))
	queued := len(ids)
	for _, id := range flagged {
		if k, ok := parseKey([]byte(id)); ok && !seen[k] {
			seen[k] = true
			ids = append(ids, id)
		}
	}
	for i, id := range ids {
		rec, err := s.Read(ctx, leasefmt.Work, id)
		switch {
		case errors.Is(err, leasefmt.ErrCorrupt):
			c.Corrupt++
			continue
		case err != nil:
			return c, err
		case rec == nil:
			if i < queued {
				c.Free++
			}
			continue
		}
		if layout.Marked(rec.Status) {
			_, err := s.FS().Lstat(layout.TallyPath(rec))
			if err == nil {
				continue // counted from its bucket
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return c, &durable.OpError{Op: "stat", Path: s.Abs(layout.TallyPath(rec)), Err: err}
			}
			// Its finisher may make the link before tallyBuckets lists
			// the bucket: counted here, not there.
			if k, ok := parseKey([]byte(rec.ID)); ok {
				if c.fromRecord == nil {
					c.fromRecord = map[idKey]bool{}
				}
				c.fromRecord[k] = true
			}
		}
		c.count(rec, now)
	}
	return c, nil
}

// bucketCounts is what the checkpoint keeps of one bucket: its directory's
// stamp when it was listed, and the counts of its links.
type bucketCounts struct {
	Stamp    seam.Stamp `json:"stamp"`
	Done     int64      `json:"done"`
	Failed   int64      `json:"failed"`
	Attempts int64      `json:"attempts"`
	// MostFailed are the bucket's items that failed most (at most
	// MostFailedK), for Census.MostFailed.
	MostFailed []FailedItem `json:"most_failed,omitempty"`
}

// maxCheckpoint bounds what a summary reads of tally/CHECKPOINT: years of
// buckets.
const maxCheckpoint = 64 << 20

// checkpointSchema names the format of tally/CHECKPOINT.
const checkpointSchema = "lease.tally-checkpoint/v1"

type checkpoint struct {
	Schema  string                  `json:"schema"`
	Buckets map[string]bucketCounts `json:"buckets"`
}

// tallyBuckets counts the links of every bucket: from the checkpoint when
// the bucket's directory is as it was when it was counted, else by listing
// it, leaving out the links of the items in counted (already counted from
// their records: linked since). It writes the checkpoint again when it
// counted a settled bucket anew (with every link: the checkpoint is the
// bucket's, not this census's). A bucket in the checkpoint holds no link
// made since it was counted, so the items of counted are not in its counts.
func (s store) tallyBuckets(workers int, now float64, counted map[idKey]bool) (Census, error) {
	c := Census{Owners: map[string]int64{}}
	var names []string
	err := s.ListNames(layout.TallyDir, func(name string) {
		if _, ok := layout.ParseBucket(name); ok {
			names = append(names, name)
		}
	})
	if err != nil {
		return c, err
	}
	old := s.readCheckpoint()
	counts := make([]bucketCounts, len(names))
	again := make([]bucketCounts, len(names)) // the links of counted items
	settled := make([]bool, len(names))
	fresh := make([]bool, len(names))
	errs := make([]error, len(names))
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	s.InParallel(workers, idx, func(i int) {
		dir := layout.TallyDir + "/" + names[i]
		fi, err := s.FS().Lstat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return // removed since the listing (fsck)
		}
		if err != nil {
			errs[i] = &durable.OpError{Op: "stat", Path: s.Abs(dir), Err: err}
			return
		}
		st, stamped := seam.StampOf(fi)
		if kept, ok := old.Buckets[names[i]]; ok && stamped && kept.Stamp == st {
			counts[i], settled[i] = kept, true
			return
		}
		var n bucketCounts
		var top Census
		err = s.ScanDir(dir, func(name []byte, _ uint64) {
			if k, failed, a, ok := parseMarker(name); ok {
				if failed {
					n.Failed++
				} else {
					n.Done++
				}
				n.Attempts += a
				top.noteMarked(k, failed, a)
				if counted[k] {
					if failed {
						again[i].Failed++
					} else {
						again[i].Done++
					}
					again[i].Attempts += a
				}
			}
		})
		if err != nil {
			errs[i] = err
			return
		}
		n.MostFailed = top.MostFailed
		counts[i] = n
		b, _ := layout.ParseBucket(names[i])
		if !stamped || float64(b+layout.TallyBucket+tallySettle) > now {
			return // still being written
		}
		fi, err = s.FS().Lstat(dir)
		if st2, ok := seam.StampOf(fi); err == nil && ok && st2 == st {
			n.Stamp = st
			counts[i], settled[i], fresh[i] = n, true, true
		}
	})
	for _, err := range errs {
		if err != nil {
			return c, err
		}
	}
	cp := checkpoint{Schema: checkpointSchema, Buckets: map[string]bucketCounts{}}
	changed := false
	for i, n := range counts {
		c.Done += n.Done - again[i].Done
		c.Failed += n.Failed - again[i].Failed
		c.Attempts += n.Attempts - again[i].Attempts
		for _, it := range n.MostFailed {
			c.offerFailed(it)
		}
		if settled[i] {
			cp.Buckets[names[i]] = n
		}
		if fresh[i] {
			changed = true
		}
	}
	for name := range old.Buckets {
		if _, ok := cp.Buckets[name]; !ok {
			changed = true // a bucket gone, or changed since
		}
	}
	c.Records = c.Done + c.Failed
	if changed {
		s.writeCheckpoint(cp, fresh, names)
	}
	return c, nil
}

// readCheckpoint reads tally/CHECKPOINT; an empty one when it is missing
// or cannot be read or decoded (it is only a cache).
func (s store) readCheckpoint() checkpoint {
	var cp checkpoint
	// ReadFile allocates what it may read: ask for the file's size (a
	// checkpoint holds about 150 bytes a bucket, 12 a day).
	fi, err := s.FS().Lstat(layout.CheckpointFile)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxCheckpoint {
		return checkpoint{}
	}
	data, err := s.FS().ReadFile(layout.CheckpointFile, int(fi.Size())+4096)
	if err != nil || len(data) > maxCheckpoint || json.Unmarshal(data, &cp) != nil || cp.Schema != checkpointSchema {
		return checkpoint{}
	}
	return cp
}

// writeCheckpoint replaces tally/CHECKPOINT by cp, best effort (a summary
// may run where it cannot write, and the checkpoint is only a cache). The
// buckets counted anew are kept only if their directories were already
// unchanged for tallyQuiet by the filesystem's clock, read from the new
// file's own time: a later change in the same tick would not show. No
// fsync: a checkpoint lost or torn by a crash is only read as empty.
func (s store) writeCheckpoint(cp checkpoint, fresh []bool, names []string) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := layout.TallyDir + "/.CHECKPOINT.tmp." + hex.EncodeToString(rnd[:])
	f, err := s.FS().CreateExcl(tmp)
	if err != nil {
		return
	}
	defer s.FS().Remove(tmp)
	fi, err := s.FS().Lstat(tmp)
	if err != nil {
		f.Close()
		return
	}
	fsNow := fi.ModTime().Add(-tallyQuiet).UnixNano()
	for i, name := range names {
		if n, ok := cp.Buckets[name]; ok && fresh[i] && n.Stamp.CtimeNS >= fsNow {
			delete(cp.Buckets, name) // listed again next time
		}
	}
	data, err := json.Marshal(cp)
	if err == nil {
		_, err = f.Write(append(data, '\n'))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		_ = s.FS().Rename(tmp, layout.CheckpointFile)
	}
}
