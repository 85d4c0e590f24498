// Package faultfs is a FUSE filesystem for tests: it mirrors a backing
// directory (loopback, built on go-fuse's fs.LoopbackNode) and, per Rule,
// delays or fails the calls the lease durability protocol depends on: file
// fsync, directory fsync, rename, write, open and create. It counts every
// such call, so a test can check that an operation issued exactly the fsyncs
// and renames the protocol promises (docs/design.md#durability, G1–G9), and it can make
// byte-range locks non-exclusive (LocksBroken) to show that `lease qualify`
// notices.
//
// Mounting needs Linux, root (the mount is made with mount(2) directly: no
// fusermount is involved) and a usable /dev/fuse; Available says whether this
// machine qualifies. Passthrough (FUSE_PASSTHROUGH) is always disabled so that
// every read and write goes through faultfs, and the kernel does not cache
// names or attributes (zero entry and attribute timeouts), so changes made
// directly in the backing directory are seen through the mount at once.
// It has no extended attributes (ENOSYS, as on an NFS mount, which carries
// no security.* attributes), so the kernel does not ask for
// security.capability before writing to each new file.
//
// The command faultfs/cmd/lease-faultfs mounts one from the shell; the
// package faultfs/faultfstest mounts one inside a Go test.
package faultfs
