package commit

// Locks (SPEC §5).
//
// Mutual exclusion per record is an exclusive fcntl write lock on one byte
// of its shard's .lock file, at offset int(ID[0:15], 16), length 1:
//
//	ROOT/{work,targets,groups}/SS/.lock
//
// The lock is taken through FS.Lock. On Linux it is an open file description
// (OFD) lock, which conflicts with classic POSIX record locks taken by other
// programs on the same byte, is dropped by the kernel when the holder dies,
// and is carried to the server by NFS and Lustre clients that support fcntl
// locks (Linux 3.15 or later). A batch opens each shard's lock file once and
// keeps it open until the next batch starts (lockcache_linux.go); its
// writers share that descriptor, so they exclude each other through a
// process-local table of held bytes first, then take the byte's OFD lock,
// and unlock it explicitly (F_UNLCK) after the rename. POSIX locks are not
// used as a fallback: closing any descriptor of the file would drop every
// lock of the process on it. The shard lock file is created once and never
// deleted.
//
// Waiting is bounded: the lock is retried with a backoff of at most 20 ms
// until the timeout (default 10 s) runs out, and ErrLockTimeout is returned
// (exit 5). Groups take the manifest's lock first, then the targets' locks
// in ascending ID order, so overlapping group claims cannot deadlock.
