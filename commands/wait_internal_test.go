package commands

import (
	"context"
	"testing"
	"time"
)

// TestBackoffEndsWithItsContext: a --wait backoff ends when its caller's
// context is done (as when a signal cancels it), not only at its deadline.
func TestBackoffEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	b := newBackoff(ctx, time.Time{}) // no deadline: waits until told
	defer b.close()
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	for b.wait(0) {
		// a try, then backoff again: only the context can end this
	}
	if !b.stopped() {
		t.Fatal("the wait ended, but not by its context")
	}
}
