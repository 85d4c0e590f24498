package commands

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/internal/worker"
)

// --wait [SECONDS]: wait with backoff for what is busy, as flock -w and
// consul lock do. The flag takes an optional value (`--wait` waits until
// done, `--wait=SECONDS` or `--wait SECONDS` at most that long), so it is a
// flag.Value that is also a boolean flag for the flag package.

// waitValue is the value of --wait.
type waitValue struct {
	set     bool
	forever bool
	secs    float64
}

func (w *waitValue) IsBoolFlag() bool { return true }

func (w *waitValue) String() string {
	switch {
	case w == nil || !w.set:
		return ""
	case w.forever:
		return "true"
	}
	return strconv.FormatFloat(w.secs, 'g', -1, 64)
}

func (w *waitValue) Set(s string) error {
	w.set = true
	switch s {
	case "true":
		w.forever = true
		return nil
	case "false":
		w.set = false
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("want a finite number of seconds >= 0, got %q", s)
	}
	w.forever, w.secs = false, v
	return nil
}

// waitFlag is --wait.
func waitFlag(what string) cli.Flag {
	return &cli.GenericFlag{Name: "wait", Value: &waitValue{},
		Usage: "when " + what + ", wait with backoff: --wait alone until it is not, --wait=SECONDS or --wait SECONDS at most that long"}
}

// waiting is --wait as given: whether to wait and the deadline (zero:
// none). args are the positional arguments; a number right after a bare
// --wait is its value, taken off args (`--wait 30`), when takeNumber says
// the command has no numeric arguments of its own.
func waiting(c *cli.Context, args []string, takeNumber bool) (wait bool, deadline time.Time, rest []string, err error) {
	w, _ := c.Generic("wait").(*waitValue)
	if w == nil || !w.set {
		return false, time.Time{}, args, nil
	}
	// The value lives in the command's flag, which outlives one run when
	// lease runs in-process (tests): take it and clear it.
	given := *w
	*w = waitValue{}
	w = &given
	if w.forever && takeNumber && len(args) > 0 {
		if _, perr := strconv.ParseFloat(args[0], 64); perr == nil {
			if err := w.Set(args[0]); err != nil {
				return false, time.Time{}, nil, usageErr("--wait %s: %v", args[0], err)
			}
			args = args[1:]
		}
	}
	if w.forever {
		return true, time.Time{}, args, nil
	}
	return true, time.Now().Add(seconds(w.secs)), args, nil
}

// backoff is worker.Backoff whose waits also end when the process is
// asked to stop (SIGINT, SIGTERM, which cancel it while the backoff
// waits), or the caller's context is done.
type backoff struct {
	*worker.Backoff
	cancel func()
}

func newBackoff(parent context.Context, deadline time.Time) *backoff {
	ctx, cancel := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	return &backoff{Backoff: worker.NewBackoff(ctx, deadline), cancel: cancel}
}

func (b *backoff) wait(hint float64) bool { return b.Wait(hint) }

// stopped reports whether a signal (or the caller's context) ended the
// wait.
func (b *backoff) stopped() bool { return b.Stopped() }

func (b *backoff) close() {
	b.Close()
	b.cancel()
}
