//go:build !linux

package seam

import "io/fs"

// StampOf returns fi's Stamp; outside Linux it never says, so a summary
// lists every bucket of the tally.
func StampOf(fi fs.FileInfo) (Stamp, bool) { return Stamp{}, false }
