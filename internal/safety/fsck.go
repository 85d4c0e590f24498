package safety

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/fsck"
)

// Fsck is the Repairer of package fsck: what `lease fsck --repair` and
// `lease fsck` run.
type Fsck struct{}

func runFsck(fsys seam.FS, now float64, repair bool) (*fsck.Summary, []string, error) {
	var mu sync.Mutex
	var left []string
	sum, err := fsck.Check(context.Background(), Root, fsys, fsck.Options{Repair: repair, Now: now, Workers: 1, Spares: FullDiskSpares}, func(f *fsck.Finding) {
		if f.Left() || f.Severity() == fsck.Operational {
			mu.Lock()
			left = append(left, f.Error())
			mu.Unlock()
		}
	})
	return sum, left, err
}

// Repair implements Repairer: an error when fsck fails or leaves errors.
func (f Fsck) Repair(fsys seam.FS, now float64) error {
	_, err := f.RepairExit(fsys, now)
	return err
}

// RepairExit runs fsck --repair and returns its exit status (fsck(8): 0
// clean, 1 corrected, 4 left uncorrected, 8 operational error), with an
// error when it is not 0 or 1.
func (Fsck) RepairExit(fsys seam.FS, now float64) (int, error) {
	sum, left, err := runFsck(fsys, now, true)
	if err != nil {
		return 8, err
	}
	if code := sum.Exit(); code&^exitcode.FsckCorrected != 0 {
		return code, fmt.Errorf("exit %d, left: %s", code, strings.Join(left, "; "))
	}
	return sum.Exit(), nil
}

// Check implements Repairer: the errors a read-only run finds.
func (Fsck) Check(fsys seam.FS, now float64) (int, error) {
	sum, left, err := runFsck(fsys, now, false)
	if err != nil {
		return 0, err
	}
	if n := sum.Errors(); n > 0 {
		return n, fmt.Errorf("%s", strings.Join(left, "; "))
	}
	return 0, nil
}
