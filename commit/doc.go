// Package commit is the storage engine of a lease table, in three layers:
//
//   - package seam (commit/seam) is the filesystem seam: the FS interface
//     every durable operation goes through, its optional capabilities as
//     named interfaces found by seam.As (which follows Unwrap on wrappers),
//     the kernel implementation and the hook wrapper;
//   - package durable (commit/durable) writes a file of the table durably:
//     temp file, fsync, rename, directory fsync; the group commit
//     (SyncBatch); the durable cross-directory move; EnsureDir; the record
//     locks; the retries of transient errors of network filesystems;
//   - package commit itself holds the lease operations over them: claim,
//     renew, release, revoke, complete, publish and verify (ops.go,
//     batch.go, publish.go), the fencing decision (fence.go), the queue
//     (queue.go) and target groups under their locks (groups.go,
//     groupwrite.go, groupcheck.go), over one table opened by Open (store.go), with its
//     defaults in defaults.go.
//
// Three packages sit beside it: package layout names a table's files and
// parses those names, and package groups holds the pure rules of target
// groups (both no I/O), below commit, so that lease fsck and the harnesses
// spell a name or check a group without the engine; package census counts the
// table, above commit, as a reader of the Store's exported reads (nothing
// here calls it).
//
// It is the tool's own machinery, exported for the lease command, lease
// fsck, package cluster and the safety harness of internal/safety: Go
// programs that use lease tables use package leases, whose API is kept
// stable; this one changes with the tool.
//
// Unlike an atomic-rename helper, commit promises durability, not only
// atomicity: when an operation reports a record as written, the record's
// content was fsynced before its name changed, the name switched with one
// rename, and every directory the operation renamed into was fsynced.
//
// # The durability protocol
//
// Every record change is: lock → re-read and validate under the lock →
// decide, with the clock read under the lock → write a temp file
// .ID.json.tmp.<random> in the record's directory → fsync it → rename it
// over ID.json → fsync the directory before success is reported. The rules
// are those of docs/lease-format.md (durability); where each is enforced:
//
//   - G1, content before name: durable.Disk.WriteTemp (durable/disk.go)
//     fsyncs every temp file before it is renamed; Store.CompletePublish
//     (publish.go) fsyncs a staged result (FS.SyncFile) before its name
//     moves into public/.
//   - G2, one rename per record: durable.Disk.Put (durable/disk.go) moves
//     one temp file over the record through SyncBatch.Replace
//     (durable/syncbatch.go); a record that was read as missing gets its
//     first version through SyncBatch.Create instead, which never replaces
//     (renameat2 RENAME_NOREPLACE, or link(2) then unlink of the temp file
//     where the filesystem lacks it): a record that exists after all
//     (created by another client, or hidden by this client's cache) is read
//     again and decided on (durable.ErrAppeared, retry.go), never
//     destroyed.
//   - G3, success after every directory fsync: Store.apply (batch.go)
//     reports an item OK only after its SyncBatch is flushed; the group
//     writer (groupwrite.go) flushes before it reports; durable.Disk's
//     WriteFile, Move and EnsureDir fsync what they touched before they
//     return.
//   - G4, one fsync per directory per batch: SyncBatch remembers the
//     directories renamed into and fsyncs each once; Store.apply fsyncs a
//     shard as soon as its last record is renamed (Pending, SyncDir) and
//     the rest in Flush.
//   - G5, earlier renames still fsynced on failure: Store.apply stops
//     starting items after an I/O error but always flushes its SyncBatch.
//   - G6, a failed fsync fails the batch: FailBatch (fence.go), applied by
//     Store.apply to one process's batch and by package cluster across the
//     ranks of an MPI job, turns every written item into an I/O error whose
//     cause wraps ErrBatchFailed once any step failed.
//   - G7, no write for a refusal: every Decide (ops.go) returns no record
//     for a stale token or a done, released, missing or corrupt record (the
//     fencing rules of fence.go), and applyOnce (batch.go) writes nothing
//     then.
//   - G8, same-directory batches only: SyncBatch.Replace returns
//     durable.ErrCrossDirectory before renaming across directories;
//     durable.Disk.Move moves across directories without replacing,
//     fsyncing the destination directory first, then the source directory.
//   - G9, groups all or nothing: the group writer (groupwrite.go) takes
//     every lock in the global order, validates every token and encodes
//     every record before the first write, and restores the old records
//     (restoreGroups) when a write or a barrier fails.
//
// A record that exists but does not validate is never treated as free and
// never overwritten by the normal operations: it is Corrupt, left for
// lease fsck. A record that cannot be read is never treated as missing
// either: only a failed open (ENOENT from openat) means "no record"; a
// read(2) that fails after a successful open (GlusterFS's open-behind
// reports a file replaced through another client that way) is
// seam.ErrVanished, an I/O error.
//
// # Transient errors of network filesystems (retry.go, durable/retry.go)
//
// ESTALE from any call, seam.ErrVanished and durable.ErrAppeared may go
// away when the step is tried again, once the client has looked the name up
// afresh. They are retried per record, as Options.Retry says
// (durable.DefaultRetry: 9 tries, about 1.4 s of pauses, longer than
// GlusterFS's 1 s entry and metadata cache timeouts): a read is read again
// (Store.readRaw), a batch item is tried again from its lock on (applyOne),
// with the lock released between tries. One record's transient error never
// fails the batch; only when its tries run out is it an I/O error, which
// stops the batch as any I/O error does (G5, G6). After an ESTALE the FS is
// asked to drop its cached handles of the record's directory and lock file
// (seam.Refresher). A rename that answered ESTALE may have taken effect:
// the next try recognises the record it wrote by its bytes and reports it
// written, after its directory is fsynced (G3), instead of writing it
// again. Tokens never go back and every claim of an ID gets a larger token
// than any before it; an expired committing record that names a published
// result is settled under its lock (rolled forward to done or back to
// released, publish.go), never taken over.
//
// # Locks (docs/lease-format.md, locks)
//
// Mutual exclusion per record is an exclusive fcntl write lock on one byte
// of its shard's .lock file, at offset int(ID[0:15], 16), length 1:
//
//	ROOT/{work,targets,groups}/SS/.lock
//
// The lock is taken through FS.Lock (durable.Disk.Lock). On Linux it is an
// open file description (OFD) lock (seam/lock_linux.go), which conflicts
// with classic POSIX record locks taken by other programs on the same
// byte, is dropped by the kernel when the holder dies, and is carried to
// the server by NFS and Lustre clients that support fcntl locks (Linux 3.15
// or later). A batch opens each shard's lock file once and keeps it open
// until the next batch starts (seam/lockcache_linux.go); its writers share
// that descriptor, so they exclude each other through a process-local
// table of held bytes first, then take the byte's OFD lock, and unlock it
// explicitly (F_UNLCK) after the rename. POSIX locks are not used as a
// fallback: closing any descriptor of the file would drop every lock of
// the process on it. The shard lock file is created once and never
// deleted.
//
// Waiting is bounded: the process never waits inside the kernel (no
// F_OFD_SETLKW). Every try is one non-blocking F_OFD_SETLK, so an
// uncontended lock is one system call, and a contended one is tried again
// with a backoff of at most 20 ms until the lock timeout (Options.LockTimeout)
// runs out or the operation's context is done, and an error wrapping
// ErrLockTimeout is returned (and the context's error when it ended the
// wait). Every operation that can wait takes a context: once it is done,
// the items of a batch not started yet are not attempted, and the
// transient-error retries stop. On FUSE the lock and unlock calls are made
// with the calling thread's signals blocked: a signal that arrives while a
// FUSE lock request is in flight makes the kernel send the server an
// INTERRUPT, and the GlusterFS 10 client deadlocks handling interrupted
// lock requests (gluster issue 4371: every later call on the mount hangs,
// past any timeout); Go's runtime signals its threads all the time. Groups
// take the manifest's lock first, then the targets' locks in ascending ID
// order, so overlapping group claims cannot deadlock.
//
// # Clocks (docs/lease-format.md, clocks)
//
// Every decision reads the store's clock (Options.Clock, Store.At) while it
// holds the record's lock; a claim or renewal whose lease is over (less
// the clock skew) by the time it is durable is reported Expired
// (reportedLate, fence.go). A claimer takes over an expired lease only from
// expires_at + skew (Taken); a holder counts it lost from expires_at - skew
// (stillHeld).
package commit
