package commit

import "time"

// What the external tests (package commit_test) reach of the engine's
// unexported knobs; compiled only into the tests.
var (
	MostFailedK       = mostFailedK
	ErrContentChanged = errContentChanged
	// GroupChunkLocks and TwoPassChunk point at the chunk sizes a test may
	// lower (tests that set them are not parallel).
	GroupChunkLocks = &groupChunkLocks
	TwoPassChunk    = &twoPassChunk
)

// TallyQuietForTest sets how long a bucket must have been unchanged before
// a census keeps its counts and returns the old value.
func TallyQuietForTest(d time.Duration) time.Duration {
	old := tallyQuiet
	tallyQuiet = d
	return old
}
