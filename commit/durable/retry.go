package durable

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit/seam"
)

// Retry says how often one record's step is tried again after a transient
// error, the kind a network filesystem's client gives while another client
// replaces the file or while its own caches still describe an older
// version: ESTALE from any call, a read that fails after its open
// (seam.ErrVanished), a record created without replacing that turned out
// to exist (ErrAppeared). Retries are per record: one such error costs that
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

// Again decides, after try number attempt (from 1) of a step on the file
// at the table-relative name failed with err, whether to try once more
// under policy p (DefaultRetry when p has no attempts). If so, it counts
// the retry, lets the FS drop what it holds for the file's directory when
// the error was ESTALE (seam.Refresher), and pauses; a ctx done before or
// during the pause ends the retries (false), so the step fails with err.
func (d *Disk) Again(ctx context.Context, p Retry, attempt int, name string, err error) bool {
	if p.Attempts <= 0 {
		p = DefaultRetry
	}
	if err == nil || attempt >= p.Attempts || !Transient(err) || ctx.Err() != nil {
		return false
	}
	d.counts.Retries.Add(1)
	if errors.Is(err, unix.ESTALE) {
		if f, ok := seam.As[seam.Refresher](d.fs); ok {
			f.Refresh(path.Dir(name))
		}
	}
	pause := p.Backoff
	for i := 1; i < attempt && pause < p.MaxBackoff; i++ {
		pause *= 2
	}
	if pause > p.MaxBackoff {
		pause = p.MaxBackoff
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Appeared turns the fs.ErrExist of a create into ErrAppeared.
func Appeared(err error) error {
	if errors.Is(err, fs.ErrExist) {
		return &OpError{Op: "cannot create the record", Err: appearedError{Describe(err)}}
	}
	return err
}

// appearedError is ErrAppeared (and fs.ErrExist) with the failed call's
// text; it does not unwrap to the call's path error, so that a report
// says why the create failed, not only that the name exists.
type appearedError struct{ call string }

func (a appearedError) Error() string   { return ErrAppeared.Error() + ": " + a.call }
func (a appearedError) Unwrap() []error { return []error{ErrAppeared, fs.ErrExist} }
