package commit

// Publishing a result exactly once (docs/design.md#records, #staging): complete --publish moves
// a staged result from the holder's own staging directory to public/
// between committing and done, under the record's lock; a committing record
// whose publisher is gone is settled (rolled forward or back) by whoever
// meets it under its lock next, never taken over.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// ErrStaged is wrapped by errors about the staged file of a publish.
var ErrStaged = errors.New("staged result")

// publishState is what a publish finds of its result.
type publishState struct {
	staged bool // a regular file or a directory where the result is staged
	public bool // something at its public/ name
	same   bool // both, and one file (a link left by an interrupted move)
	dir    bool // the staged result is a directory
}

func (p publishState) moved() bool { return p.public && (!p.staged || p.same) }

// maxCompare bounds the bytes compared to tell whether a staged result and
// its public/ name are one file where the filesystem gives no inode.
const maxCompare = 16 << 20

// sameResult reports whether the staged result and its public/ name hold
// the same result: one inode (a link left when a no-replace move fell back
// to link and unlink), or the same size and bytes (a crash that left the
// renamed file under both names where the filesystem keeps no link, or a
// filesystem that tells no inode). Publishing bytes that public/ already
// holds under the name would change nothing.
func (s *Store) sameResult(staged, public string, sfi, pfi fs.FileInfo) bool {
	if seam.SameFile(sfi, pfi) {
		return true
	}
	n := sfi.Size()
	if n != pfi.Size() || n > maxCompare {
		return false
	}
	a, err1 := s.fs.ReadFile(staged, int(n))
	b, err2 := s.fs.ReadFile(public, int(n))
	return err1 == nil && err2 == nil && string(a) == string(b)
}

func (s *Store) publishState(staged, public string) (publishState, error) {
	var p publishState
	sfi, err := s.fs.Lstat(staged)
	switch {
	case err == nil:
		p.staged, p.dir = sfi.Mode().IsRegular() || sfi.IsDir(), sfi.IsDir()
	case !errors.Is(err, fs.ErrNotExist):
		return p, err
	}
	pfi, err := s.fs.Lstat(public)
	switch {
	case err == nil:
		p.public = true
		p.same = p.staged && (pfi.Mode().IsRegular() && sfi.Mode().IsRegular() && s.sameResult(staged, public, sfi, pfi) ||
			pfi.IsDir() && sfi.IsDir() && (seam.SameDir(sfi, pfi) || s.sameTree(staged, public)))
	case !errors.Is(err, fs.ErrNotExist):
		return p, err
	}
	return p, nil
}

// dropStage removes the staging directory of token of id if it is empty,
// once its result was published: garbage collection, best effort and
// outside the record protocol (no fsync; a directory left, empty or not,
// is lease fsck's to clean up).
func (s *Store) dropStage(id leasefmt.ID, token int64) {
	s.fs.Remove(layout.StagePath(id, token))
}

// ResultPublished reports whether the result name that the holder of token
// of id staged has reached public/: public/NAME is there and
// stage/ID.TOKEN/NAME is gone or is the same file (docs/design.md#staging).
func (s *Store) ResultPublished(id leasefmt.ID, token int64, name string) (bool, error) {
	p, err := s.publishState(layout.ResultPaths(id, token, name))
	return p.moved(), err
}

// settle is what an abandoned committing record that names a published
// result becomes (docs/design.md#records): done when the result reached public/ (rolled
// forward), else released (rolled back: the staged file stays in its
// stage/ID.TOKEN/ directory), so a result is published at most once per ID.
func (s *Store) settle(cur *leasefmt.Record, now float64) (*leasefmt.Record, string, error) {
	staged, public := layout.ResultPaths(cur.ID, cur.Token, cur.Publish)
	p, err := s.publishState(staged, public)
	if err != nil {
		return nil, "", fmt.Errorf("settle the publish of %s token %d: %w", cur.ID, cur.Token, err)
	}
	if p.moved() {
		return doneRecord(cur, now), fmt.Sprintf("an interrupted publish was rolled forward: %s is in %s/, the record is done (token %d)",
			leasefmt.Quote(path.Base(public)), layout.PublicDir, cur.Token), nil
	}
	return released(cur, now), fmt.Sprintf("an interrupted publish was rolled back: %s was not published, the record was released (token %d)",
		leasefmt.Quote(cur.Publish), cur.Token), nil
}

// Settle settles the committing work record of id if it names a published
// result (docs/design.md#records): lease fsck's roll forward and back. It rolls forward
// whenever the result is in public/ (a committing record met under its
// lock has no completer at work, and done is what the completer would
// write), and rolls back only once a claimer could take the record over
// (expired by more than the clock skew), since until then its holder may
// still resume the publish. It returns the record as written, or nil when
// nothing was done, and a detail saying what was done.
func (s *Store) Settle(ctx context.Context, id leasefmt.ID) (*leasefmt.Record, string, error) {
	unlock, err := s.Lock(ctx, leasefmt.Work, id)
	if err != nil {
		return nil, "", err
	}
	defer unlock()
	cur, err := s.Read(ctx, leasefmt.Work, id)
	if err != nil || cur == nil || !abandonedPublish(cur) {
		return nil, "", err
	}
	now := s.now()
	next, detail, err := s.settle(cur, now)
	if err != nil {
		return nil, "", err
	}
	if next.Status != leasefmt.Done && !s.settleWhenTaken(cur, now) {
		return nil, "", nil // not published, and its holder may still resume
	}
	if err := s.WriteOne(next); err != nil {
		return nil, "", err
	}
	return next, detail, nil
}

// abandonedPublish reports whether cur is a committing record that names a
// published result: settled, not taken over, once its holder is gone.
func abandonedPublish(cur *leasefmt.Record) bool {
	return cur.Kind == leasefmt.Work && cur.Status == leasefmt.Committing && cur.Publish != ""
}

// CompletePublish completes one lease and publishes its staged result
// ROOT/stage/ID.TOKEN/name (a regular file or a directory) as
// ROOT/public/name, or with name leasefmt.PublishStage the whole staging
// directory as ROOT/public/ID (see ResultPaths), between committing and
// done, holding the record's lock throughout: the staged result is
// fsynced (every file and directory of a tree), then committing (with
// "publish") is made durable, then the result is moved with a durable
// cross-directory rename that never replaces, and done is written after
// it. A crash at any point leaves a state that the next claim
// or lease fsck settles (docs/design.md#records). Retried with the same token and name it
// resumes an interrupted publish, or succeeds again when it finished. An
// error wrapping ErrStaged means the staged file is unusable and nothing
// was written.
func (s *Store) CompletePublish(ctx context.Context, it Item, name string) (Result, error) {
	r := Result{Item: it, Path: s.Abs(s.RecordPath(leasefmt.Work, it.ID))}
	if err := leasefmt.CheckPublish(name); err != nil {
		return r, fmt.Errorf("%w: %v", ErrStaged, err)
	}
	staged, public := layout.ResultPaths(it.ID, it.Token, name)
	unlock, err := s.Lock(ctx, leasefmt.Work, it.ID)
	if err != nil {
		return r, s.lockFailed(err, &r, "lock")
	}
	defer unlock()
	cur, err := s.Read(ctx, leasefmt.Work, it.ID)
	if err != nil {
		return r, s.readFailed(err, &r)
	}
	now := s.now()
	r.Record = cur
	if cur != nil {
		r.Token = cur.Token
	}
	next, out, detail := CommittingDecision(name, s.skew)(it, cur, now)
	resumed := cur != nil && cur.Token == it.Token && cur.Status == leasefmt.Committing && cur.Publish == name
	if resumed {
		// Its own interrupted publish: resumed whatever the expiry, as
		// nobody can have taken the record over without settling it first.
		next, out, detail = cur, OK, ""
	}
	if r.Outcome, r.Detail = out, detail; out != OK {
		s.count(out)
		return r, nil
	}
	if next == nil { // already done with this token and name: a retry
		s.finishLeft(cur)
		s.dequeue(it.ID) // a complete killed after done
		s.count(OK)
		return r, nil
	}
	p, err := s.publishState(staged, public)
	if err != nil {
		r.Outcome, r.Detail = IOError, fmt.Sprintf("publish %s: %v", leasefmt.Quote(name), err)
		s.count(IOError)
		return r, err
	}
	switch {
	case !resumed && !p.staged:
		r.Outcome = Missing
		what := "no such file"
		if fi, err := s.fs.Lstat(staged); err == nil {
			what = "not a regular file or a directory"
			if fi.Mode()&fs.ModeSymlink != 0 {
				what = "a symbolic link, never followed"
			}
		}
		return r, fmt.Errorf("%w %s: %s (the holder of token %d stages its results in %s/, LEASE_STAGE of lease run)",
			ErrStaged, s.Abs(staged), what, it.Token, s.Abs(layout.StagePath(it.ID, it.Token)))
	case resumed && !p.staged && !p.public:
		r.Outcome, r.Detail = Missing, fmt.Sprintf("interrupted publish: %s is neither in %s nor in %s/", leasefmt.Quote(name), s.Abs(path.Dir(staged)), s.Abs(layout.PublicDir))
		s.count(Missing)
		return r, nil
	case p.public && !p.moved():
		r.Outcome, r.Detail = Exists, fmt.Sprintf("%s already exists; publish never replaces", s.Abs(public))
		s.count(Exists)
		return r, nil
	}
	// public/ of a table another program made may not exist yet: made
	// durably before committing is written, so that a publish never stops
	// half way for want of its destination (docs/lease-format.md, Layout).
	if err := s.disk.EnsureDir(layout.PublicDir); err != nil {
		r.Outcome, r.Detail = IOError, fmt.Sprintf("make %s: %v", s.Abs(layout.PublicDir), err)
		s.count(IOError)
		return r, err
	}
	s.stats.Batches.Add(1)
	if !resumed {
		// G1 for the result itself: its bytes (every file of a
		// directory, and its entries) are durable before its name moves
		// into public/.
		if err := s.syncResult(staged); errors.Is(err, ErrStaged) {
			r.Outcome = Missing
			return r, err
		} else if err != nil {
			r.Outcome, r.Detail = IOError, fmt.Sprintf("fsync staged result %s: %v", s.Abs(staged), err)
			s.count(IOError)
			return r, err
		}
		if err := s.writeHeld(next); err != nil {
			r.Outcome, r.Detail = IOError, fmt.Sprintf("write committing record: %v", err)
			s.count(IOError)
			return r, err
		}
	}
	switch {
	case p.same && p.dir:
		// A directory under both names of its rename (a crash): it is
		// published; the staged name is lease fsck's.
	case p.same:
		// A link left by a move that died between link and unlink.
		if err := s.fs.Remove(staged); err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.Outcome, r.Detail = IOError, "record is committing, removing the staged name failed: "+err.Error()
			s.count(IOError)
			return r, err
		}
	case !p.public:
		err := s.disk.Move(staged, public)
		if p.dir {
			s.disk.Forget(staged)
		}
		if err != nil {
			r.Outcome, r.Detail = IOError, fmt.Sprintf("record is committing, publish %s failed: %v", s.Abs(public), err)
			s.count(IOError)
			return r, err
		}
	}
	done := doneRecord(next, s.now())
	if err := s.writeHeld(done); err != nil {
		r.Outcome, r.Detail = IOError, "published, record still committing: "+err.Error()
		s.count(IOError)
		return r, err
	}
	s.dropStage(it.ID, it.Token)
	s.dequeue(it.ID)
	r.Outcome, r.Record, r.Token = OK, done, done.Token
	s.unhold([]Result{r})
	s.count(OK)
	return r, nil
}
