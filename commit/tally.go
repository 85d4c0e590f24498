package commit

import (
	"errors"
	"io/fs"
	"path"

	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// The tally (docs/design.md#statistics): a second place for the status
// markers, sorted by time instead of by ID, so that what a summary lists
// does not grow with the items done.
//
// When the engine writes a work record done or failed it also links the
// new record file as tally/B/ID.STATUS.ATTEMPTS, where B is the record's
// renewed_at (the time it finished) rounded down to TallyBucket seconds,
// not durably (the link is not fsynced: a crash may lose it, and lease
// fsck --repair, the procedure after a crash, makes it again). A bucket only receives links while its time is now, so every
// bucket but the newest is cold: a summary lists it once, keeps its counts
// in tally/CHECKPOINT with the directory's inode, size and change times, and
// afterwards only looks at the directory (one stat) to know its counts still
// hold. What changes a cold bucket (lease retry removing a link, a late
// writer) changes its ctime, so the summary lists it again.
//
// The tally is trusted only while tally/TRUSTED exists: lease init makes it
// for a new table, lease fsck --repair after it checked every finished
// record has its link. Whatever leaves a finished record without its link
// (a filesystem without hard links, a link that fails) removes it, and the
// summary then reads the table as before (censusShard). A record of an
// item that has no queue entry (claimed by name) gets a flag,
// tally/unqueued/ID, before it is first written, so that a summary that
// lists the queue instead of the shards still finds it. The tally's
// names are package layout's (TallyDir, TallyPath, ...).

// syncer is what the tally's writes need from their operation: a directory
// to fsync before the operation reports success (durable.SyncBatch.Mark in
// a batch; fsync now for a single write).
type syncer func(dir string) error

// retally keeps the tally in step with one work record write, under the
// record's lock: cur is the record that was there, next the one just
// renamed into place (so ID.json is next's file). A finished cur loses its
// link unless next keeps the same name; a finished next gets its link. A
// failure untrusts the tally (the counts would be wrong), never the write.
func (s *Store) retally(cur, next *leasefmt.Record, sync syncer) {
	if !tallyWrites {
		return
	}
	if cur != nil && layout.Marked(cur.Status) && !(next != nil && layout.Marked(next.Status) && layout.TallyPath(cur) == layout.TallyPath(next)) {
		s.untally(cur, sync)
	}
	if next == nil || !layout.Marked(next.Status) {
		return
	}
	l, ok := seam.As[seam.Linker](s.fs)
	if !ok {
		s.Untrust()
		return
	}
	tp := layout.TallyPath(next)
	dir := path.Dir(tp)
	rp := s.RecordPath(leasefmt.Work, next.ID)
	// The link first: its bucket exists but once every 5 minutes, and a
	// lookup of it would be one more round trip on a network filesystem.
	err := l.Link(rp, tp)
	if errors.Is(err, fs.ErrNotExist) {
		if err = s.disk.EnsureDir(dir); err == nil {
			err = l.Link(rp, tp)
		}
	}
	if errors.Is(err, fs.ErrExist) {
		// An older version's link of the same name (the record was
		// written again): the name must be this file.
		if err = s.fs.Remove(tp); err == nil || errors.Is(err, fs.ErrNotExist) {
			err = l.Link(rp, tp)
		}
	}
	// The link is not fsynced (docs/performance.md#budget): its bucket
	// would be one more directory to fsync for every item finished. A
	// crash may lose it after the record's done became durable and its
	// queue entry's removal too: lease fsck --repair, the procedure after
	// any crash, finds the finished record without its link and makes it.
	if err != nil {
		s.Untrust()
		return
	}
	s.stats.Tallied.Add(1)
}

// finishLeft completes what a finisher killed between the rename of rec,
// a finished work record, and its links left undone: its status marker and
// its link in the tally. Whoever drops the queue entry of a finished item
// calls it first, under the record's lock with rec read there: while the
// entry exists the summary counts a finished record without its link from
// the queue (tallyShard), so dropping the entry before the link exists
// would lose the item from the count (docs/design.md#tally). The link is
// not fsynced, as a finisher's is not (retally): against a kill its order
// before the entry's removal is enough, and what a crash loses lease fsck
// --repair makes again. A record whose link is there costs one lookup; a
// link that cannot be made untrusts the tally, as retally does, and the
// summary then reads the records.
func (s *Store) finishLeft(rec *leasefmt.Record) {
	if !tallyWrites || rec == nil || rec.Kind != leasefmt.Work || !layout.Marked(rec.Status) {
		return
	}
	_, err := s.fs.Lstat(layout.TallyPath(rec))
	switch {
	case err == nil:
		return
	case !errors.Is(err, fs.ErrNotExist):
		s.Untrust()
		return
	}
	s.mark(rec)
	s.retally(nil, rec, s.syncNow)
}

// untally removes the link of rec, a finished record being replaced; its
// removal is fsynced with the operation. A link that cannot be removed
// untrusts the tally.
func (s *Store) untally(rec *leasefmt.Record, sync syncer) {
	tp := layout.TallyPath(rec)
	err := s.fs.Remove(tp)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		err = sync(path.Dir(tp))
	}
	if err != nil {
		s.Untrust()
	}
}

// flagUnqueued makes the flag of id, an item whose first record is about
// to be written, when it has no queue entry either (a claim by name), before
// the record exists: a summary that lists the queue and the flags then
// finds every unfinished record. The flags' directory is fsynced with the
// operation's group commit (a crash may keep a record whose flag was lost,
// of a claim never reported: lease fsck --repair flags it). A failure
// untrusts the tally.
func (s *Store) flagUnqueued(id leasefmt.ID, sync syncer) {
	if !tallyWrites {
		return
	}
	if _, err := s.fs.Lstat(s.QueuePath(id)); err == nil {
		return
	} else if !errors.Is(err, fs.ErrNotExist) {
		s.Untrust()
		return
	}
	flag := layout.UnqueuedFlag(id)
	if err := s.disk.EnsureDir(layout.UnqueuedDir); err != nil {
		s.Untrust()
		return
	}
	f, err := s.fs.CreateExcl(flag)
	switch {
	case errors.Is(err, fs.ErrExist):
		return // made before (and fsynced by whoever made it)
	case err == nil:
		err = f.Close()
	}
	if err == nil {
		err = sync(layout.UnqueuedDir)
	}
	if err != nil {
		s.Untrust()
	}
}

// Untrust removes the tally's trust (TrustedFile and a repair's
// TrustPending), durably: the summary reads the table until lease fsck
// --repair has checked the tally again. It is what a writer does when it
// could not keep the tally; its own failure is reported by the next fsck.
func (s *Store) Untrust() {
	removed := false
	for _, name := range []string{layout.TrustedFile, layout.TrustPending} {
		if err := s.fs.Remove(name); err == nil {
			removed = true
		}
	}
	if removed {
		_ = s.fs.SyncDir(layout.TallyDir)
	}
	s.stats.Untrusted.Add(1)
}

// TallyTrusted reports whether a summary may count from the tally.
func (s *Store) TallyTrusted() (bool, error) {
	_, err := s.fs.Lstat(layout.TrustedFile)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}
