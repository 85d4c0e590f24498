package commit

import "time"

// What the external tests (package commit_test) reach of the engine's
// unexported knobs; compiled only into the tests.
var (
	ErrContentChanged = errContentChanged
	// GroupChunkLocks points at the chunk size a test may lower (tests
	// that set it are not parallel).
	GroupChunkLocks = &groupChunkLocks
)

// SetLockTimeout changes the bound of every later lock wait of s: for the
// lock tests, which wait briefly for a lock another process holds and
// then long for it once that process is gone. Commands bound one call's
// wait through its context instead.
func (s *Store) SetLockTimeout(d time.Duration) { s.lockWait.Store(int64(d)) }
