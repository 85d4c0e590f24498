// Package commit is the durable storage engine of a lease table: the
// filesystem seam, the record locks, the same-directory group-commit batch,
// the durable cross-directory replace, and the lease operations built on
// them (claim, renew, release, revoke, complete, publish, verify, groups).
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
// over ID.json → fsync the directory before success is reported. The
// invariants of SPEC §4, and where each is enforced:
//
//   - G1, content before name: Store.writeTemp (store.go) fsyncs every temp
//     file before SyncBatch.Replace renames it; CompletePublish
//     (publish.go) fsyncs a staged result (FS.SyncFile) before its name
//     moves into public/.
//   - G2, one rename per record: Store.stage (store.go) renames one temp
//     file over the record through SyncBatch.Replace (syncbatch.go); a
//     record that was read as missing gets its first version through
//     SyncBatch.Create instead, which never replaces (renameat2
//     RENAME_NOREPLACE, or link(2) then unlink of the temp file where the
//     filesystem lacks it): a record that exists after all (created by
//     another client, or hidden by this client's cache) is read again and
//     decided on (ErrAppeared, retry.go), never destroyed.
//   - G3, success after every directory fsync: Store.apply (batch.go)
//     reports an item OK only after SyncBatch.Flush; the group writer
//     (groupwrite.go) flushes before it reports; WriteOne, DurableMove and
//     EnsureDir (store.go) fsync what they touched before they return.
//   - G4, one fsync per directory per batch: SyncBatch (syncbatch.go)
//     remembers the directories renamed into and fsyncs each once; Apply
//     fsyncs a shard as soon as its last record is renamed (Pending,
//     SyncDir) and the rest in Flush.
//   - G5, earlier renames still fsynced on failure: Store.apply stops
//     starting items after an I/O error but always flushes its SyncBatch.
//   - G6, a failed fsync fails the batch: Store.apply turns every OK item
//     into an I/O error whose cause wraps ErrBatchFailed once any step
//     failed, and package cluster does the same across the ranks of a job.
//   - G7, no write for a refusal: every Decide (ops.go) returns no record
//     for a stale token or a done, released, missing or corrupt record,
//     and applyOne (batch.go) writes nothing then.
//   - G8, same-directory batches only: SyncBatch.Replace returns
//     ErrCrossDirectory before renaming across directories; DurableMove
//     (store.go) moves across directories without replacing, fsyncing the
//     destination directory first, then the source directory.
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
// reports a file replaced through another client that way) is seam.ErrVanished,
// an I/O error.
//
// # Transient errors of network filesystems (retry.go)
//
// ESTALE from any call, seam.ErrVanished and ErrAppeared may go away when the
// step is tried again, once the client has looked the name up afresh.
// They are retried per record, as Store.Retry says (DefaultRetry: 9 tries,
// about 1.4 s of pauses, longer than GlusterFS's 1 s entry and metadata
// cache timeouts): a read is read again (Store.readRaw), a batch item is
// tried again from its lock on (applyOne), with the lock released between
// tries. One record's transient error never fails the batch; only when its
// tries run out is it an I/O error, which stops the batch as any I/O error
// does (G5, G6). After an ESTALE the FS is asked to drop its cached
// handles of the record's directory and lock file (OSFS.Refresh). A rename
// that answered ESTALE may have taken effect: the next try recognises the
// record it wrote by its bytes and reports it written, after its directory
// is fsynced (G3), instead of writing it again. Tokens never go back and every claim of an ID gets a larger
// token than any before it; an expired committing record that names a
// published result is settled under its lock (rolled forward to done or
// back to released, publish.go), never taken over.
//
// # Locks (SPEC §5)
//
// Mutual exclusion per record is an exclusive fcntl write lock on one byte
// of its shard's .lock file, at offset int(ID[0:15], 16), length 1:
//
//	ROOT/{work,targets,groups}/SS/.lock
//
// The lock is taken through FS.Lock. On Linux it is an open file
// description (OFD) lock, which conflicts with classic POSIX record locks
// taken by other programs on the same byte, is dropped by the kernel when
// the holder dies, and is carried to the server by NFS and Lustre clients
// that support fcntl locks (Linux 3.15 or later). A batch opens each
// shard's lock file once and keeps it open until the next batch starts
// (lockcache_linux.go); its writers share that descriptor, so they exclude
// each other through a process-local table of held bytes first, then take
// the byte's OFD lock, and unlock it explicitly (F_UNLCK) after the rename.
// POSIX locks are not used as a fallback: closing any descriptor of the file
// would drop every lock of the process on it. The shard lock file is
// created once and never deleted.
//
// Waiting is bounded (lock_linux.go): the process never waits inside the
// kernel (no F_OFD_SETLKW). Every try is one non-blocking F_OFD_SETLK, so
// an uncontended lock is one system call, and a contended one is tried
// again with a backoff of at most 20 ms until Store.LockTimeout runs out,
// and ErrLockTimeout is returned. On FUSE the lock and unlock calls are
// made with the calling thread's signals blocked: a signal that arrives
// while a FUSE lock request is in flight makes the kernel send the server
// an INTERRUPT, and the GlusterFS 10 client deadlocks handling interrupted
// lock requests (gluster issue 4371: every later call on the mount hangs,
// past any timeout); Go's runtime signals its threads all the time. Groups take the manifest's lock first, then the targets' locks
// in ascending ID order, so overlapping group claims cannot deadlock.
//
// # Clocks (SPEC §6)
//
// Every decision reads Store.Clock while it holds the record's lock; a
// claim or renewal whose lease is over (less Store.ClockSkew) by the time
// it is durable is reported Expired. A claimer takes over an expired lease
// only from expires_at + ClockSkew (Taken); a holder counts it lost from
// expires_at - ClockSkew (StillHeld).
package commit
