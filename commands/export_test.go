package commands

import "time"

// LaunchPolicyOf names the policy of command name under a launcher
// ("distributed", "once", "alone"); ok is false when it has none.
func LaunchPolicyOf(name string) (policy string, ok bool) {
	d := descriptorOf(name)
	if d == nil || d.Launch == launchUnset {
		return "", false
	}
	return d.Launch.String(), true
}

// Register registers d as a command's file does, for one test, and returns
// the function that removes it again.
func Register(d *Descriptor) (remove func()) {
	register(d)
	return func() { delete(descriptors, d.Command.Name) }
}

// SetProgressDelay sets how long a streamed batch runs before --progress
// auto draws its bar, for one test, and returns the function that puts
// the old delay back.
func SetProgressDelay(d time.Duration) (restore func()) {
	old := progressDelay
	progressDelay = d
	return func() { progressDelay = old }
}

// SetChunkSize sets the number of items a streamed batch commits at a
// time, for one test, and returns the function that puts it back.
func SetChunkSize(n int) (restore func()) {
	old := chunkSize
	chunkSize = n
	return func() { chunkSize = old }
}
