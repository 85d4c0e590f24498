// Package commit is the durable storage engine of a lease table: the
// filesystem seam, the record locks, the same-directory group-commit batch,
// the durable cross-directory replace, and the lease operations built on
// them (claim, renew, release, complete, verify, groups).
//
// Unlike an atomic-rename helper, commit promises durability, not only
// atomicity: when an operation reports a record as written, the record's
// content was fsynced before its name changed (G1), the name switched with
// one rename (G2), and every directory the operation renamed into was
// fsynced (G3). A batch of N records in K shard directories makes N file
// fsyncs and K directory fsyncs (G4), issued concurrently by a bounded pool
// of writers; a failure still fsyncs the directories already renamed into
// (G5) and fails the whole batch (G6); a stale token, or a done, released,
// missing or corrupt record, causes no write and no fsync (G7). The numbers
// refer to shared/SPEC.md §4.
package commit
