// Package clusterbox holds the tests of lease as one MPI program across
// "hosts" over a real distributed filesystem, on a cluster in a box (issue
// 19): scripts/clusterbox-up.sh makes two nodes on this machine, nodeA
// (10.77.0.2) and nodeB (10.77.0.3), each a network, UTS and mount
// namespace with its own FUSE client of one shared filesystem, seen by
// every node at /run/lease-box/shared; mpirun starts its daemons in them
// through scripts/clusterbox-agent (nsenter instead of ssh).
//
// TestBox puts the box on each filesystem in turn (LEASE_BOX_FS): a safe
// GlusterFS volume (a glusterfs client per node), then CephFS (a
// one-machine Ceph cluster on the bridge address and a ceph-fuse client per
// node). On each, it runs mpirun --host nodeA:2,nodeB:2 with the MPI build
// of lease: lease qualify must be verified with 4 members on 2 distinct
// hosts, and renew-batch of a few hundred leases as one program across the
// nodes must print exactly what one process prints.
//
// The box takes its filesystem's lock (/tmp/lease-gluster.lock, as
// internal/glustertest does; /tmp/lease-ceph.lock, as internal/cephtest
// does), so it never runs beside internal/multiclient's cluster of the same
// filesystem. The tests skip (fail under LEASE_TEST_REQUIRE=all) without
// root, iproute2, nsenter, GlusterFS or Ceph, FUSE or Open MPI. A box that
// was up before the tests is left up, and only the tests of its filesystem
// run; one they brought up they take down (clusterbox-down.sh --purge).
package clusterbox
