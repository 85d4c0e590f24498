//go:build !lease_notally

package commit

// tallyWrites: the engine keeps the tally (docs/design.md#tally). Only
// bench/tallycost builds without it (-tags lease_notally), to measure what
// the tally's writes cost a writer against the same tree.
const tallyWrites = true
