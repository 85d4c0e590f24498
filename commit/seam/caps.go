package seam

import (
	"errors"
	"io"
)

// The optional capabilities of an FS. Each is a named interface that the
// engine looks up with As, never with an ad-hoc type assertion, so that a
// wrapper (WithHook, a test's fault injector, a benchmark strategy) passes
// every capability it does not implement itself on to the FS it wraps by
// having an Unwrap method, as the wrappers of Pebble's vfs do, instead of
// forwarding each one by hand. An FS without a capability gets the
// fallback each one names.

// Unwrapper is implemented by an FS that wraps another: Unwrap returns the
// wrapped FS, where As looks for the capabilities the wrapper lacks.
type Unwrapper interface{ Unwrap() FS }

// As returns the capability T of f: f itself when it implements T, else
// the first FS down its chain of Unwrap calls that does; false when none
// does.
func As[T any](f FS) (T, bool) {
	for f != nil {
		if c, ok := f.(T); ok {
			return c, true
		}
		u, ok := f.(Unwrapper)
		if !ok {
			break
		}
		f = u.Unwrap()
	}
	var zero T
	return zero, false
}

// DirOpener reads a directory a bounded number of names at a time, so that
// a claim of the queue's next item reads a few directory blocks of a shard
// of a million entries, not all of it (docs/lease-format.md, the queue).
// Without it, OpenDir reads the directory whole with ReadDir.
type DirOpener interface {
	OpenDir(name string) (DirReader, error)
}

// LockPreparer opens a lock file ahead of a batch (creating it if needed)
// and keeps it for the batch, so that a batch finds out that it may not
// lock a shard before it writes anything. Without it, a batch finds out
// at its first Lock of that shard.
type LockPreparer interface {
	PrepareLock(name string) error
}

// Refresher drops what the FS caches for directory dir (its handle, and
// the lock files in it) after an ESTALE: a network filesystem's client
// answers ESTALE for a handle whose file the server no longer knows by it,
// and only a fresh lookup of the name cures that. Without it, a retry uses
// what the FS holds.
type Refresher interface {
	Refresh(dir string)
}

// IdleLockDropper closes the lock files no caller holds or waits for: every
// batch starts with it, so that a long-running process never keeps locking
// through a lock file that was replaced meanwhile. Without it, nothing is
// cached to drop.
type IdleLockDropper interface {
	DropIdleLocks()
}

// Syncer flushes the whole filesystem the FS is on (syncfs(2)): what a
// benchmark's no-fsync floor does once instead of per-record fsyncs. The
// engine itself never needs it.
type Syncer interface {
	Syncfs() error
}

// PrivateDirMaker creates a directory that only its owner (the process's
// account) can enter or write from the moment it exists (mode 0700; a
// setgid parent's group and setgid bit are kept): a staging directory,
// which no other account may plant anything in while its claimer's
// command writes there. It fails with fs.ErrExist when name exists:
// whatever is there was made by someone else. Without it, Mkdir makes
// the directory with the modes it gives.
type PrivateDirMaker interface {
	MkdirPrivate(name string) error
}

// Sharer gives every directory and file created from now on the modes of a
// shared table (see Sharing), whatever the process's umask. Without it,
// what the FS creates gets the modes the umask gives.
type Sharer interface {
	SetSharing(Sharing)
}

// PermFixer sets the mode and group (gid -1 leaves it) of a directory or
// file of the table, name "" being the root, never following a link: lease
// fsck --repair of a shared table, and publication. The kernel FS opens the
// entry with O_PATH|O_NOFOLLOW below its directory's descriptor, checks
// what that descriptor is (a directory, or a regular file of one link,
// else ErrNotInPlace) and changes the mode through it, never by a path
// that could meet a link swapped in. Without it, such repairs are left.
type PermFixer interface {
	FixPerm(name string, mode uint32, gid int) error
}

// Share passes sharing s to f when f (or an FS it wraps) is a Sharer.
func Share(f FS, s Sharing) {
	if sh, ok := As[Sharer](f); ok {
		sh.SetSharing(s)
	}
}

// FileOpener opens a regular file for reading as a stream, never through a
// symbolic link, so that a large stored input is hashed without being read
// into memory whole. Without it, the file is read whole with ReadFile.
type FileOpener interface {
	OpenRead(name string) (io.ReadCloser, error)
}

// Linker gives an existing regular file a second name (link(2), never
// following a symbolic link, never replacing a name: fs.ErrExist when
// newname exists). The engine links a record it has just written done or
// failed to a status marker beside it, so that lease status --summary can
// count the record from the directory listing alone (docs/design.md#statistics).
// Without it, no markers are made and the summary reads those records.
type Linker interface {
	Link(oldname, newname string) error
}

// DirentScanner is implemented by a DirReader that also hands out the
// inode number of each name, which getdents(2) returns with it at no extra
// cost: two names listed with the same inode number are one file. Without
// it, a summary cannot tell a marker from a stale one and reads the record.
type DirentScanner interface {
	// ScanDirents calls fn with each name left to read and its inode
	// number, until the end of the directory. name is valid only during
	// the call (it is the reader's buffer: a listing of a million names
	// allocates nothing per name).
	ScanDirents(fn func(name []byte, ino uint64)) error
}

// Overwriter is what the table's reserve of spare files needs
// (docs/design.md#durability): writing a record in place into a file whose
// blocks are allocated already, and swapping that file with the record in
// one step, so that a holder renews and completes its lease while the
// filesystem is full, and the replaced record's file, swapped into the
// reserve, is the next spare. Neither allocates anything: no block, no
// inode, no directory entry. Without it, a table has no usable reserve: a
// write on a full filesystem fails as it always did.
type Overwriter interface {
	// Exchange swaps the names a and b, two existing files, atomically
	// (renameat2 RENAME_EXCHANGE), in one directory or two; an error
	// wrapping errors.ErrUnsupported where the filesystem cannot.
	Exchange(a, b string) error
	// Overwrite writes data over the start of the existing regular file
	// name, in place, cuts the file to len(data) and makes it durable
	// (fdatasync), allocating nothing. It fails with an error wrapping
	// ErrUnfit, having written nothing, when name has another name too (a
	// record's file that a crash left in the reserve as well) or fewer
	// bytes allocated than data needs.
	Overwrite(name string, data []byte) error
}

// ErrUnfit is the error of Overwriter.Overwrite for a file that is not a
// usable spare: it has another name as well, or too little allocated.
var ErrUnfit = errors.New("not a usable spare (another name links to it, or it has too little space allocated)")

// ReadLockFinder tells whether a lock file of the table is held by a read
// lock. lease's writers take write locks only (an OFD lock on one byte
// each); a read lock needs only a descriptor open for reading, so one is
// held by a process that could not have held a lease, and stops every
// writer of the shard while it is held. lease fsck and lease status report
// it. Without it, nothing is reported.
type ReadLockFinder interface {
	// ReadLocked reports whether a read lock is held on any byte of name
	// (a regular file, opened without following a link), and the pid of a
	// process holding one, when the kernel tells (0 for an OFD lock).
	ReadLocked(name string) (locked bool, pid int, err error)
}

// FilesystemSyncer is syncfs(2) of the table's filesystem as the barrier of
// a batch (docs/design.md#durability): where the filesystem makes syncfs a
// whole-filesystem barrier, one syncfs after a batch's temp files and one
// after its renames stand for their file and directory fsyncs. The engine
// looks it up on the FS itself, not through Unwrap: a wrapper that sees the
// file and directory fsyncs (a fault injector, a crash filesystem's
// recorder) would not see the barrier that replaces them, so it has the
// barrier only if it implements it. Without it, every batch fsyncs each
// record and each directory.
type FilesystemSyncer interface {
	// FilesystemType names the root's filesystem by its statfs f_type
	// ("ext4", "xfs", "btrfs", "tmpfs", "nfs", "fuse", ... or the type in
	// hex) and says whether syncfs is a whole-filesystem barrier there.
	FilesystemType() (name string, barrier bool, err error)
	// OpenSyncfs opens a new descriptor of the root for syncfs: its
	// errors report the writeback errors of the filesystem since it was
	// opened (Linux 5.8), so a batch opens its own before it writes.
	OpenSyncfs() (SyncfsHandle, error)
}

// SyncfsHandle is one descriptor of FilesystemSyncer.OpenSyncfs.
type SyncfsHandle interface {
	Syncfs() error
	Close() error
}
