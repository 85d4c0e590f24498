package commands

import (
	"context"
	"errors"
	"os"
)

// Signals as contexts: a wait that a signal ends (renew-batch --watch's
// rounds, --wait's backoff) waits on a context the signal cancels, so that
// the same wait also ends when its caller's context does.

// signalled is the cause of a context that a signal ended.
type signalled struct{ sig os.Signal }

func (s signalled) Error() string { return "stopped by " + signalName(s.sig) }

// onSignal returns a context that the first signal received on sigc
// cancels, with that signal as its cause (stoppedBy). stop releases it.
func onSignal(parent context.Context, sigc <-chan os.Signal) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		select {
		case s := <-sigc:
			cancel(signalled{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

// stoppedBy is the signal that ended ctx, nil when none did.
func stoppedBy(ctx context.Context) os.Signal {
	var s signalled
	if errors.As(context.Cause(ctx), &s) {
		return s.sig
	}
	return nil
}
