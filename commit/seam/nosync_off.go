//go:build !lease_powercut_nosync

package seam

// syncsOff is true only in a build with the tag lease_powercut_nosync, which
// internal/powercut's TestBrokenBuildLosesAcknowledged makes to show that
// its power cuts catch a lease that acknowledges before its writes are
// durable. The normal build syncs.
const syncsOff = false
