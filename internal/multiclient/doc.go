// Package multiclient holds the tests of lease on a real multi-client
// filesystem (issue 19): GlusterFS volumes brought up by
// internal/glustertest, each mounted by two FUSE client processes that
// stand for two nodes, and real lease processes (and mpirun ranks) working
// on one table through both mounts.
//
// With the safe volume options (open-behind, stat-prefetch and quick-read
// off) the tests expect everything of a shared table: no ID granted twice
// in races through both mounts, tokens strictly increasing over expiry
// rounds, stale holders refused from both mounts, a claim through one
// mount refused as held through the other at once, a publish through one
// seen through the other, a renew-batch killed mid-way repaired through
// the other mount, and mpirun lease qualify verified with ranks on both.
// With the default options they expect lease qualify to fail and say why,
// and the engine's defences to hold what they can: a read that fails after
// its open never makes a record "missing" again, and no lock wait hangs.
//
// The tests skip (fail under LEASE_TEST_REQUIRE=all) without root,
// GlusterFS (glusterfs-server, glusterfs-client) or FUSE.
package multiclient
