package commit

// What the external tests (package commit_test) reach of the engine's
// unexported knobs; compiled only into the tests.
var (
	ErrContentChanged = errContentChanged
	// GroupChunkLocks and TwoPassChunk point at the chunk sizes a test may
	// lower (tests that set them are not parallel).
	GroupChunkLocks = &groupChunkLocks
	TwoPassChunk    = &twoPassChunk
)
