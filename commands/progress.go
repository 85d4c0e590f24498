package commands

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/leasetool/lease/leasefmt"
)

// The --progress option of fsck and renew-batch: auto (a bar when stderr is
// a terminal), always or never.

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
