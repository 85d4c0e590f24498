package mpi

import (
	"io"
	"time"
)

// SetStderr sends the watchdog's line to w and returns a function that
// puts the old writer back.
func SetStderr(w io.Writer) func() {
	old := stderr
	stderr = w
	return func() { stderr = old }
}

// SetTimeout changes the collective timeout of one rank.
func SetTimeout(w *World, d time.Duration) { w.timeout = d }
