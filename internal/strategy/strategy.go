// Package strategy names the ways a batch can make its records durable:
// lease's own (Concurrent) and the algorithms of the design notes it is
// measured against by the benchmarks (bench/). It is internal: only the
// command line's hidden --strategy flag picks another than Concurrent.
package strategy

import (
	"fmt"

	"github.com/leasetool/lease/leasefmt"
)

// Kind is a commit strategy.
type Kind int

// The strategies.
const (
	// Concurrent: a pool of writers, one fsync per shard directory issued as
	// soon as that shard's last record is renamed (this project).
	Concurrent Kind = iota
	// Sequential: one writer, one fsync per shard directory at the end (F324).
	Sequential
	// OneAtATime: one writer, the directory fsynced after every record (F323).
	OneAtATime
	// NoSync: the same writes and renames without any fsync, then one
	// syncfs(2): the cost floor, not durable per record.
	NoSync
)

// Parse maps a name to a Kind.
func Parse(s string) (Kind, error) {
	switch s {
	case "concurrent", "":
		return Concurrent, nil
	case "sequential":
		return Sequential, nil
	case "one-at-a-time":
		return OneAtATime, nil
	case "nosync":
		return NoSync, nil
	}
	return 0, fmt.Errorf("unknown strategy %s (concurrent, sequential, one-at-a-time, nosync)", leasefmt.Quote(s))
}
