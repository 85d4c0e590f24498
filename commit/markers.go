package commit

import (
	"errors"
	"io/fs"
	"path"

	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// Status markers (docs/design.md#statistics). When the engine writes a work
// record done or failed, it gives the new record file a second name in the
// same shard directory, ID.STATUS.ATTEMPTS (a hard link: no bytes, no
// extra inode), under the record's lock. A marker whose inode number, as
// the directory listing gives it, is the record's own names exactly that
// version of the record: any rewrite replaces ID.json by a new file (the
// rename of docs/design.md#durability), so a record changed since — by lease
// retry, fsck, or another program that knows nothing of markers — no
// longer shares the marker's inode and is read instead. The marker keeps
// its inode alive, so the number cannot be reused while the marker exists.
// Markers are never needed for correctness: a missing one (never made, lost
// in a crash, removed) only makes the summary read that record.

// MarkerPath is the path of the marker of rec, a work record.
func (s *Store) MarkerPath(rec *leasefmt.Record) string {
	return path.Join(path.Dir(s.RecordPath(leasefmt.Work, rec.ID)), layout.MarkerName(rec.ID, rec.Status, rec.Attempts))
}

// mark links the work record rec, just written, to its marker; the caller
// holds the record's lock, so ID.json is rec's file. Best effort: an FS
// without links, or a link that fails, leaves no marker (the summary then
// reads the record). A marker of the same name left from an earlier version
// (a retry that could not remove it) is replaced.
func (s *Store) mark(rec *leasefmt.Record) {
	l, ok := seam.As[seam.Linker](s.fs)
	if !ok || !layout.Marked(rec.Status) {
		return
	}
	rp, mp := s.RecordPath(leasefmt.Work, rec.ID), s.MarkerPath(rec)
	err := l.Link(rp, mp)
	if errors.Is(err, fs.ErrExist) && s.fs.Remove(mp) == nil {
		err = l.Link(rp, mp)
	}
	if err == nil {
		s.stats.Marked.Add(1)
	}
}

// unmark removes the marker of rec, a record about to be replaced (lease
// retry of a failed item), under its lock. Best effort: a marker left
// behind no longer shares the record's inode, so nothing trusts it, and
// lease fsck --repair removes it.
func (s *Store) unmark(rec *leasefmt.Record) {
	if rec != nil && layout.Marked(rec.Status) {
		_ = s.fs.Remove(s.MarkerPath(rec))
	}
}
