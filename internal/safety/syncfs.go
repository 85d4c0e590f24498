package safety

import (
	"errors"

	"github.com/leasetool/lease/commit/seam"
)

// The Recorder models syncfs(2) (Recorder.Syncfs: every file's data and
// every directory's entries durable from there), so a batch on it under
// sync = syncfs takes the barrier's order (issue 41): temp files written,
// one syncfs, the renames, one syncfs, and no per-record fsync. Scenarios
// ask for it with Scenario.Syncfs. Mem does not model it: a batch on Mem
// fsyncs each record and each directory (durable.Disk.Choose), as the
// Recorder does unless a scenario forces the barrier.
var errNoSyncfs = errors.New("this crash filesystem does not model syncfs(2)")

// FilesystemType implements seam.FilesystemSyncer. syncfs is a whole-
// filesystem barrier in the Recorder's model, but it says it is not one,
// so that auto (the default strategy) chooses per-record fsyncs on it:
// auto asks the machine's /proc/meminfo for its dirty bytes per batch,
// which would make what a scenario explores depend on the machine. The
// scenarios that explore the barrier force it (Scenario.Syncfs: sync =
// syncfs), which durable.Disk.Choose takes whatever this says.
func (r *Recorder) FilesystemType() (string, bool, error) { return "crashfs", false, nil }

// OpenSyncfs implements seam.FilesystemSyncer: a handle whose Syncfs is
// the Recorder's.
func (r *Recorder) OpenSyncfs() (seam.SyncfsHandle, error) { return recSyncfs{r}, nil }

type recSyncfs struct{ r *Recorder }

func (h recSyncfs) Syncfs() error { return h.r.Syncfs() }
func (h recSyncfs) Close() error  { return nil }

// FilesystemType implements seam.FilesystemSyncer: not modeled.
func (m *Mem) FilesystemType() (string, bool, error) { return "", false, errNoSyncfs }

// OpenSyncfs implements seam.FilesystemSyncer: never called (see
// FilesystemType).
func (m *Mem) OpenSyncfs() (seam.SyncfsHandle, error) { return nil, errNoSyncfs }
