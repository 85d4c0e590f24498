package commands

import "github.com/leasetool/lease/commit"

// SetWrapFS sets the filesystem seam of every table opened from now on
// (nil removes it) and returns a function that puts the old one back.
func SetWrapFS(w func(commit.FS) commit.FS) func() {
	old := wrapFS
	wrapFS = w
	return func() { wrapFS = old }
}
