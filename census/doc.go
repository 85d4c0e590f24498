// Package census counts what a lease table holds (lease status --summary,
// --watch, Prometheus; docs/design.md#statistics): queued, free, leased,
// expired, done, failed, per owner, and the most-failed items.
//
// It is a reader of the engine, not part of it: it lists and reads the table
// through the exported reads of *commit.Store (ListNames, ScanDir, Read,
// TallyTrusted) and never writes a record, and nothing in package commit
// calls it. Take counts from the tally when tally/TRUSTED says it holds
// every finished record (tally.go), and otherwise, like Listing, from the
// shards' listings, reading only the records a listing cannot account for
// (census.go). The one thing it writes is tally/CHECKPOINT, a cache of the
// cold buckets' counts.
package census
