package commands

import (
	"context"
	"errors"
	"os"
	"os/signal"
)

// Signals as contexts: a wait that a signal ends (renew-batch --watch's
// rounds, --wait's backoff) waits on a context the signal cancels, so that
// the same wait also ends when its caller's context does.

// ownProcess is set when the command runs as the lease process (Main), not
// in-process through Run (the tests).
var ownProcess bool

// stopNotify ends a command's catching of its signals on c, when the
// command ends. In the lease process its outcome is decided by then and
// the process exits next, so c stays registered instead: signal.Stop on the
// last channel of a signal gives it back its default action, and one that
// came in between (Slurm signals every process of a job and mpirun passes
// its own SIGTERM on, so a rank gets two; a second ^C) would kill the
// process with that signal instead of the status it reports, a watch
// stopped by SIGINT with 143 where it promises 0. A signal caught, not
// ignored, does not pass to the children it may still start: exec gives
// it back its default action. In-process callers stop as usual.
func stopNotify(c chan<- os.Signal) {
	if !ownProcess {
		signal.Stop(c)
	}
}

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
