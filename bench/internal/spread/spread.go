// Package spread makes the benchmarks' IDs and the no-fsync floor they are
// measured against.
//
// ID i's first 8 hex digits (which choose its shard, docs/design.md#layout)
// are i itself, so with K shards ID i lands in shard i%K and N IDs spread
// evenly over any shard count; the other 56 digits are a SHA-256 digest of
// i, as in commit/bench_test.go.
package spread

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// ID is the benchmarks' ID number i.
func ID(i int) string {
	sum := sha256.Sum256([]byte(strconv.Itoa(i)))
	return fmt.Sprintf("%08x%s", i, hex.EncodeToString(sum[:])[8:])
}

// ShardDir is the directory name of ID i's shard among k.
func ShardDir(i, k int) string {
	w := max(2, len(strconv.FormatInt(int64(k-1), 16)))
	return fmt.Sprintf("%0*x", w, i%k)
}

// FloorCreate makes dir/queue/SS/ID for n IDs in k shards from one process,
// in ID order, with no fsync, then syncs the filesystem once: what lease add
// does without durability, locks, record reads or a writer pool.
func FloorCreate(dir string, n, k int) (time.Duration, error) {
	start := time.Now()
	for s := 0; s < k; s++ {
		if err := os.MkdirAll(filepath.Join(dir, "queue", ShardDir(s, k)), 0o755); err != nil {
			return 0, err
		}
	}
	for i := 0; i < n; i++ {
		fd, err := unix.Open(filepath.Join(dir, "queue", ShardDir(i, k), ID(i)), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return 0, err
		}
		unix.Close(fd)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
