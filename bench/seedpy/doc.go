// Package seedpy holds seed.py, a Python 3 reimplementation of the seed's
// renewal algorithms (F323: one directory fsync per record; F324: shard
// group commit, one directory fsync per touched shard at the end of the
// batch; nosync: the floor) on a real lease table. bench/matrix runs it
// beside `lease renew-batch` on the same tables as the strategies py-f323,
// py-f324 and py-nosync (issue 8: the ratios must hold against the seed's
// Python algorithms too). It is a benchmark baseline, not a second product.
//
// The test of this package checks that seed.py writes records that lease
// reads back as valid, renewed and fenced: go test ./seedpy inside bench/,
// its own module (it builds lease from the repository root and needs python3
// on PATH; LEASE_TEST_REQUIRE=all makes a missing python3 a failure).
package seedpy
