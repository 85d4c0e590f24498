//go:build !linux

package slack

// Raise does nothing where there is no PR_SET_TIMERSLACK.
func Raise() {}

// Child runs start.
func Child(start func()) { start() }
