// Package leasefmt is the on-disk format of a lease table: IDs, the shard
// mapping, the TABLE header and the work, target and group records
// (shared/SPEC.md §2–§3).
//
// Decoding is strict: every rule the contract lists is checked before a
// record is handed to a caller, because a record that does not validate must
// never be taken as free. Encoding is canonical and keeps keys written by
// other programs.
package leasefmt

import (
	"errors"
	"fmt"
	"strconv"
)

// IDLen is the length of an ID: a SHA-256 digest in lowercase hex.
const IDLen = 64

// ID is a validated work, target or group identifier. Only ParseID makes
// one, so a path built from an ID can never escape its shard directory.
type ID string

// ErrBadID is wrapped by every ID validation error.
var ErrBadID = errors.New("bad ID")

// ParseID returns s as an ID when it is exactly 64 lowercase hex characters.
func ParseID(s string) (ID, error) {
	if len(s) != IDLen {
		return "", fmt.Errorf("%w %s: want 64 lowercase hex characters, got %d characters", ErrBadID, Quote(s), len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", fmt.Errorf("%w %s: character %d is not lowercase hex", ErrBadID, Quote(s), i+1)
		}
	}
	return ID(s), nil
}

// Shard is the index of the shard that holds id in a table of n shards:
// int(ID[0:8], 16) % n.
func (id ID) Shard(n int) int {
	v, _ := strconv.ParseUint(string(id[:8]), 16, 32)
	return int(v % uint64(n))
}

// LockOffset is the byte of the shard's .lock file that guards id:
// int(ID[0:15], 16).
func (id ID) LockOffset() int64 {
	v, _ := strconv.ParseUint(string(id[:15]), 16, 64)
	return int64(v)
}

// FileName is the record file name of id: ID.json.
func (id ID) FileName() string { return string(id) + ".json" }

// Short is a prefix of id for human-readable output.
func (id ID) Short() string { return string(id[:12]) }

// ShardDirName is the directory name of shard s in a table of n shards:
// lowercase hex, zero-padded to max(2, len(hex(n-1))) digits.
func ShardDirName(s, n int) string {
	width := len(strconv.FormatUint(uint64(n-1), 16))
	if width < 2 {
		width = 2
	}
	return fmt.Sprintf("%0*x", width, s)
}

// ParseShardDirName is the inverse of ShardDirName; ok is false when name
// is not exactly the directory name of a shard of a table of n shards.
func ParseShardDirName(name string, n int) (int, bool) {
	v, err := strconv.ParseUint(name, 16, 32)
	if err != nil || int(v) >= n || ShardDirName(int(v), n) != name {
		return 0, false
	}
	return int(v), true
}

// MaxShards bounds the shard count of a table.
const MaxShards = 1 << 16
