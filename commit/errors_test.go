package commit_test

// Each outcome's reason word and sentinel error.

import (
	"testing"

	"github.com/leasetool/lease/commit"
)

func TestOutcomeReasonsAndErrors(t *testing.T) {
	t.Parallel()
	for o, want := range map[commit.Outcome]struct {
		reason string
		err    error
	}{
		commit.OK: {"ok", nil}, commit.StaleToken: {"stale-token", commit.ErrStale}, commit.Expired: {"expired", commit.ErrExpired},
		commit.Held: {"held", commit.ErrHeld}, commit.Done: {"done", commit.ErrDone}, commit.Released: {"released", commit.ErrReleased},
		commit.Missing: {"missing", commit.ErrMissing}, commit.Exists: {"exists", commit.ErrExists}, commit.Corrupt: {"corrupt", commit.ErrCorrupt},
		commit.LockTimeout: {"lock-timeout", commit.ErrLockTimeout}, commit.IOError: {"io-error", commit.ErrIO},
	} {
		if o.Reason() != want.reason || o.Err() != want.err {
			t.Errorf("outcome %d: reason %s, error %v; want %s, %v", o, o.Reason(), o.Err(), want.reason, want.err)
		}
		r := commit.Result{Outcome: o}
		if got, ok := commit.OutcomeOf(r.Err()); !ok || got != o {
			t.Errorf("outcome %d: OutcomeOf(Result.Err()) = %d, %v", o, got, ok)
		}
	}
}
