// Package safety is the proof-of-safety harness of lease: it runs the
// durable operations against a filesystem that remembers every call and
// checks what a crash, an I/O error or a paused or killed process can do to
// the table.
//
//   - Recorder (recorder.go; its FS methods, file handles and byte locks
//     in recorder_fs.go, recorder_file.go and recorder_locks.go) is a
//     seam.FS in memory that logs every call and every effect, and
//     materialises each state a crash after any prefix of the calls could
//     leave (crashstates.go) under the persistence model documented on
//     Recorder; a state is a Tree (tree.go). Recorder and Mem have every
//     optional capability of the kernel FS (recorder_caps.go,
//     pebblefs_caps.go), so the operations explored take the kernel FS's
//     paths. Explorer (explore.go)
//     enumerates those states for an operation, repairs each with fsck and
//     checks the invariants (check.go and invariants.go; the decoding of
//     record files and the versions a record may recover to are in
//     records.go).
//   - Mem (pebblefs.go and pebblefs_*.go; ExplorePebble in
//     explore_pebble.go) is a seam.FS over Pebble's crash-simulating
//     vfs.MemFS, a second, independent crash model (random sampling).
//   - The tests inject EIO, ENOSPC and EINVAL at every call through
//     seam.WithHook, check histories of real lease processes (paused with
//     SIGSTOP past their TTL and killed with SIGKILL) for linearizability
//     with porcupine, and check the security properties of the table
//     (validated IDs only, symbolic links never followed for writing, file
//     modes, bounded inputs).
//
// The numbers of the last full run and the commands that reproduce them
// are in RESULTS.md.
package safety
