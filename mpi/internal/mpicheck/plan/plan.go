// Package plan is the script that the mpicheck program runs under mpirun
// and that mpi's tests check its reports against: which root, which
// payload lengths, which values, all derived from one seed, so the test
// can compute every expected payload without trusting the program.
package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
)

// MiB is the largest payload in the plan.
const MiB = 1 << 20

// Bcast is one broadcast round: root sends Payload(seed, "bcast", round,
// Root, Len); the other ranks pass junk of their own length.
type Bcast struct {
	Root, Len int
}

// Gather is one Gather or AllGather round: rank r sends Payload(seed, op,
// round, r, Lens[r]). Root is unused by AllGather.
type Gather struct {
	Root int
	Lens []int
}

// Bcasts returns the broadcast rounds for a job of size ranks: the edge
// lengths (empty, one byte, 1 MiB) and random ones, the root moving round
// the ranks.
func Bcasts(seed uint64, size int) []Bcast {
	r := rng(seed, "bcast")
	lens := []int{0, 1, 3, MiB, r.IntN(300000), r.IntN(5000), 0, r.IntN(MiB)}
	out := make([]Bcast, len(lens))
	for i, n := range lens {
		out[i] = Bcast{Root: i % size, Len: n}
	}
	return out
}

// Gathers returns the rounds of op ("gather" or "allgather"): all empty,
// lengths growing with rank (rank 0 empty), one rank alone with 1 MiB, and
// random lengths.
func Gathers(seed uint64, op string, size int) []Gather {
	r := rng(seed, op)
	var out []Gather
	add := func(f func(rank int) int) {
		g := Gather{Root: (len(out) + 1) % size, Lens: make([]int, size)}
		for rank := range g.Lens {
			g.Lens[rank] = f(rank)
		}
		out = append(out, g)
	}
	add(func(int) int { return 0 })
	add(func(rank int) int { return rank * 1001 })
	add(func(rank int) int {
		if rank == size-1 {
			return MiB
		}
		return 0
	})
	add(func(int) int { return r.IntN(100000) })
	add(func(int) int { return 1 + r.IntN(7) })
	return out
}

// Values returns, per AllMaxInt round, each rank's value.
func Values(seed uint64, size int) [][]int {
	r := rng(seed, "max")
	out := [][]int{make([]int, size), make([]int, size), make([]int, size)}
	for rank := range size {
		out[0][rank] = r.IntN(1_000_000) - 500_000
		out[1][rank] = -1 - rank // all negative: max is -1
		out[2][rank] = int(r.Int64())
	}
	return out
}

// Payload returns the n bytes that rank sends in round of op.
func Payload(seed uint64, op string, round, rank, n int) []byte {
	in := binary.LittleEndian.AppendUint64(nil, seed)
	in = binary.LittleEndian.AppendUint64(in, uint64(round))
	in = binary.LittleEndian.AppendUint64(in, uint64(rank))
	key := sha256.Sum256(append(in, op...))
	b := make([]byte, n)
	rand.NewChaCha8(key).Read(b)
	return b
}

// Digest stands for one received payload in a report.
type Digest struct {
	Len int    `json:"len"`
	SHA string `json:"sha256"`
}

// Sum returns b's digest.
func Sum(b []byte) Digest {
	s := sha256.Sum256(b)
	return Digest{Len: len(b), SHA: hex.EncodeToString(s[:])}
}

// Report is what one rank of mpicheck writes after the plan.
type Report struct {
	Rank     int  `json:"rank"`
	Size     int  `json:"size"`
	Compiled bool `json:"compiled"`
	// Launcher, LaunchSize, LaunchRank and LaunchTask are what mpi.Detect
	// said.
	Launcher   string `json:"launcher"`
	LaunchSize int    `json:"launch_size"`
	LaunchRank int    `json:"launch_rank"`
	LaunchTask bool   `json:"launch_task"`
	Host       string `json:"host"`
	// Bcast holds one digest per round.
	Bcast []Digest `json:"bcast"`
	// Gather holds per round the digests in rank order on the round's
	// root, and null elsewhere.
	Gather    [][]Digest `json:"gather"`
	AllGather [][]Digest `json:"allgather"`
	Max       []int      `json:"max"`
}

func rng(seed uint64, op string) *rand.Rand {
	var s uint64
	for _, c := range op {
		s = s*131 + uint64(c)
	}
	return rand.New(rand.NewPCG(seed, s))
}
