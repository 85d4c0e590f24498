package commit

import (
	"bytes"
	"errors"
	"io/fs"
	"path"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
)

// Retry says how often one record's step is tried again after a transient
// error, the kind a network filesystem's client gives while another client
// replaces the file or while its own caches still describe an older
// version: ESTALE from any call, a read that fails after its open
// (seam.ErrVanished), a record created without replacing that turned out to
// exist (ErrAppeared). Retries are per record: one such error costs that
// record a pause and a fresh try, never the batch. When the tries run out
// the step fails with the error, as an I/O error; nothing is reported as
// done and, as for any I/O error, nothing is read as missing.
type Retry struct {
	// Attempts is the most tries of one step (1: no retry).
	Attempts int
	// Backoff is the pause before the second try; it doubles after each
	// try up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
}

// DefaultRetry makes 9 tries over about 1.4 s of pauses: the FUSE client of
// GlusterFS keeps a replaced directory entry for its entry-timeout and
// md-cache-timeout, 1 s each by default, so a name that still leads to the
// old file leads to the new one within that.
var DefaultRetry = Retry{Attempts: 9, Backoff: 10 * time.Millisecond, MaxBackoff: 400 * time.Millisecond}

// ErrAppeared is the cause of a record that was read as missing but existed
// when its first version was moved in without replacing (SyncBatch.Create):
// another client created it, or this client's caches hid it. The record is
// read again and the decision made again.
var ErrAppeared = errors.New("record appeared while it was being created (another client made it, or this client's cache hid it)")

// Transient reports whether err is one that trying the step again may cure
// (see Retry): ESTALE, seam.ErrVanished or ErrAppeared.
func Transient(err error) bool {
	return errors.Is(err, unix.ESTALE) || errors.Is(err, seam.ErrVanished) || errors.Is(err, ErrAppeared)
}

// retryPolicy is the store's Retry, DefaultRetry when unset.
func (s *Store) retryPolicy() Retry {
	if s.Retry.Attempts <= 0 {
		return DefaultRetry
	}
	return s.Retry
}

// again decides, after try number attempt (from 1) of a step on the record
// at the table-relative name failed with err, whether to try once more. If
// so, it counts the retry, lets the filesystem drop what it holds for the
// record's directory when the error was ESTALE (seam.Refresher), and
// pauses.
func (s *Store) again(attempt int, name string, err error) bool {
	p := s.retryPolicy()
	if err == nil || attempt >= p.Attempts || !Transient(err) {
		return false
	}
	s.Stats.Retries.Add(1)
	if errors.Is(err, unix.ESTALE) {
		if f, ok := seam.As[seam.Refresher](s.FS); ok {
			f.Refresh(path.Dir(name))
		}
	}
	d := p.Backoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	if d > p.MaxBackoff {
		d = p.MaxBackoff
	}
	time.Sleep(d)
	return true
}

// appeared turns the fs.ErrExist of a create into ErrAppeared.
func appeared(err error) error {
	if errors.Is(err, fs.ErrExist) {
		return &OpError{Op: "cannot create the record", Err: appearedError{describe(err)}}
	}
	return err
}

// appearedError is ErrAppeared (and fs.ErrExist) with the failed call's
// text; it does not unwrap to the call's path error, so that a report
// says why the create failed, not only that the name exists.
type appearedError struct{ call string }

func (a appearedError) Error() string   { return ErrAppeared.Error() + ": " + a.call }
func (a appearedError) Unwrap() []error { return []error{ErrAppeared, fs.ErrExist} }

// applyOne runs one item of a batch (applyOnce), trying it again, lock,
// read, decision and write, while it fails with a transient error and the
// store's Retry allows. Between tries the record's lock is released.
func (s *Store) applyOne(k leasefmt.Kind, it Item, decide Decide, settle settlePolicy, b *SyncBatch, r *Result) error {
	name := s.RecordPath(k, it.ID)
	var try itemTry
	for attempt := 1; ; attempt++ {
		err, transient := s.applyOnce(k, it, decide, settle, b, r, &try)
		if err == nil || !transient || !s.again(attempt, name, err) {
			return err
		}
		*r = Result{Item: r.Item, Path: r.Path}
	}
}

// itemTry is what one try of an item left for the next: the bytes it
// renamed into place when the rename failed with an error after which the
// rename may have happened all the same (ESTALE: the reply was lost, not
// the request).
type itemTry struct {
	data   []byte
	detail string
}

// wrote notes the bytes of a write that failed with err.
func (t *itemTry) wrote(data []byte, detail string, err error) {
	t.data, t.detail = nil, ""
	if errors.Is(err, unix.ESTALE) && !errors.Is(err, ErrAppeared) {
		t.data, t.detail = data, "written on a retry after: "+detail
	}
}

// landed reports whether the record read, raw, is exactly what the earlier
// try wrote: its rename took effect.
func (t *itemTry) landed(raw []byte) bool {
	return t.data != nil && raw != nil && bytes.Equal(raw, t.data)
}
