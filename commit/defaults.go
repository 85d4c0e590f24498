package commit

import "time"

// The defaults of a table's settings, each written once: Open's options,
// package config's settings table (the command line's flags, environment
// and lease.toml), package leases' options and lease fsck take them from
// here.
const (
	// DefaultLockTimeout bounds a lock wait.
	DefaultLockTimeout = 10 * time.Second
	// DefaultWriters is the writer pool of a batch. Measured on journaled
	// ext4: 64 writers merge file fsyncs into few journal commits.
	DefaultWriters = 64
	// DefaultClockSkew bounds the clock difference between the nodes.
	DefaultClockSkew = time.Second
	// DefaultTTL is the lease duration of a claim that names none (the
	// command line's default is the larger of it and 4 target timeouts).
	DefaultTTL = 120 * time.Second
	// DefaultShards is the shard count of each kind of a new table.
	DefaultShards = 16
)
