package commit

import "time"

// What the external tests (package commit_test) reach of the engine's
// unexported knobs; compiled only into the tests.
var (
	ErrContentChanged = errContentChanged
	// GroupChunkLocks and TwoPassChunk point at the chunk sizes a test may
	// lower (tests that set them are not parallel).
	GroupChunkLocks = &groupChunkLocks
	TwoPassChunk    = &twoPassChunk
)

// SetLockTimeout changes the bound of every later lock wait of s: for the
// lock tests, which wait briefly for a lock another process holds and
// then long for it once that process is gone. Commands bound one call's
// wait through its context instead.
func (s *Store) SetLockTimeout(d time.Duration) { s.lockWait.Store(int64(d)) }
