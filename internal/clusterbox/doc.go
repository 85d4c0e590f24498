// Package clusterbox holds the tests of lease as one MPI program across
// "hosts" over a real distributed filesystem, on a cluster in a box (issue
// 19): scripts/clusterbox-up.sh makes two nodes on this machine, nodeA
// (10.77.0.2) and nodeB (10.77.0.3), each a network, UTS and mount
// namespace with its own GlusterFS FUSE client of one safe volume, seen by
// every node at /run/lease-box/shared; mpirun starts its daemons in them
// through scripts/clusterbox-agent (nsenter instead of ssh).
//
// The tests run mpirun --host nodeA:2,nodeB:2 with the MPI build of lease:
// lease qualify must be verified with 4 members on 2 distinct hosts, and
// renew-batch of a few hundred leases as one program across the nodes must
// print exactly what one process prints.
//
// The box takes /tmp/lease-gluster.lock, as internal/glustertest does, so
// it never runs beside internal/multiclient's GlusterFS. The tests skip
// (fail under LEASE_TEST_REQUIRE=all) without root, iproute2, nsenter,
// GlusterFS, FUSE or Open MPI. A box that was up before the tests is left
// up; one they brought up they take down (clusterbox-down.sh --purge).
package clusterbox
