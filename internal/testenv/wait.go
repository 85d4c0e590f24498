package testenv

import (
	"testing"
	"time"
)

// WaitFor waits until cond holds, polling it (every millisecond at first,
// at most every 20 ms), and fails t when it has not held within limit: a
// bound against a condition that never comes, not a timing assertion.
// Tests wait on conditions this way, never on sleeps.
func WaitFor(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(pause)
	}
}
