//go:build lease_powercut_nosync

package seam

// syncsOff: a deliberately broken build for internal/powercut's
// TestBrokenBuildLosesAcknowledged: every file and directory fsync of the
// table is skipped (fsyncFD, osFile.Sync), so operations are acknowledged
// before they are durable. Never for use.
const syncsOff = true
