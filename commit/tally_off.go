//go:build lease_notally

package commit

// tallyWrites: this build writes no links and no flags, and its table's
// summary is wrong once anything finishes; bench/tallycost's control only.
const tallyWrites = false
