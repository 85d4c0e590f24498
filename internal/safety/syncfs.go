package safety

import (
	"errors"

	"github.com/leasetool/lease/commit/seam"
)

// errNoSyncfs is what the crash filesystems answer for syncfs: they model
// file and directory fsyncs, not a whole-filesystem barrier, so a batch on
// them fsyncs each record and each directory (durable.Disk.Choose), as it
// does by default on the kernel's filesystems (sync = record). Exploring the
// barrier's order (issue 41) needs a model of syncfs: every file and
// directory written before it started made durable.
var errNoSyncfs = errors.New("the crash filesystems do not model syncfs(2)")

// FilesystemType implements seam.FilesystemSyncer: never a barrier here.
func (r *Recorder) FilesystemType() (string, bool, error) { return "", false, errNoSyncfs }

// OpenSyncfs implements seam.FilesystemSyncer: never called (see
// FilesystemType).
func (r *Recorder) OpenSyncfs() (seam.SyncfsHandle, error) { return nil, errNoSyncfs }

// FilesystemType implements seam.FilesystemSyncer: never a barrier here.
func (m *Mem) FilesystemType() (string, bool, error) { return "", false, errNoSyncfs }

// OpenSyncfs implements seam.FilesystemSyncer: never called (see
// FilesystemType).
func (m *Mem) OpenSyncfs() (seam.SyncfsHandle, error) { return nil, errNoSyncfs }
