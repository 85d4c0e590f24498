package commands

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/leasetool/lease/leasefmt"
)

// The --progress option of fsck and the batch commands: auto (a bar when
// stderr is a terminal), always or never.

// progressFlag is the --progress flag of the streamed batches (add, claim,
// complete; renew-batch has its own words for --watch).
func progressFlag() cli.Flag {
	return &cli.StringFlag{Name: "progress", Value: "auto", Usage: "progress bar on stderr for a run longer than a second: auto (when stderr is a terminal), always, never; not under mpirun"}
}

// checkProgress refuses a --progress value other than auto, always or never.
func checkProgress(mode string) error {
	if mode != "auto" && mode != "always" && mode != "never" {
		return fmt.Errorf("--progress %s: want auto, always or never", leasefmt.Quote(mode))
	}
	return nil
}

// showProgress decides whether a progress bar is drawn on w.
func showProgress(mode string, w io.Writer) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newBar is a progress bar of total units on w, redrawn at most every 100 ms
// and cleared when finished.
func newBar(w io.Writer, total int, desc, units string) *progressbar.ProgressBar {
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionSetItsString(units),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}
