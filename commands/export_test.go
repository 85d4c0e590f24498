package commands

import "github.com/leasetool/lease/commit/seam"

// SetWrapFS sets the filesystem seam of every table opened from now on
// (nil removes it) and returns a function that puts the old one back.
func SetWrapFS(w func(seam.FS) seam.FS) func() {
	old := wrapFS
	wrapFS = w
	return func() { wrapFS = old }
}

// LaunchPolicy names the policy of command name under a launcher
// ("distributed", "once", "alone"); ok is false when it has none.
func LaunchPolicy(name string) (policy string, ok bool) {
	p, ok := launchPolicies[name]
	return [...]string{"distributed", "once", "alone"}[p], ok
}
