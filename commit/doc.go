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
//     file over the record through SyncBatch.Replace (syncbatch.go).
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
// lease fsck. Tokens never go back and every claim of an ID gets a larger
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
// Waiting is bounded (lock_linux.go): the lock is retried with a backoff
// of at most 20 ms until Store.LockTimeout runs out, and ErrLockTimeout is
// returned. Groups take the manifest's lock first, then the targets' locks
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
