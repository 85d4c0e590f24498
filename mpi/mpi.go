// Package mpi lets one lease command run as a single program across the
// ranks of an mpirun job (docs/design.md#mpi).
//
// Built with -tags mpi it is a thin layer over github.com/emer/empi/mpi
// (Open MPI, linked through `pkg-config ompi`); built without the tag it is
// a pure-Go single-process twin with the same API, in which every
// collective is the identity on one rank. The exported API lives in this
// file only, so both builds document and behave the same; the build-tagged
// files hold just [Compiled] and the unexported transport that moves
// fixed-size buffers between ranks.
//
// Payloads of any length are framed here: a collective first agrees on the
// lengths, then moves the bytes (padding to the longest payload where MPI
// needs equal counts, and trimming afterwards).
//
// Every collective runs under the watchdog set by [Init] (seed F357: a
// failure on one rank must become a bounded negative result, never a
// hang). When a collective does not complete in time, the rank prints one
// line to stderr naming the collective and aborts the whole job with exit
// status 4.
//
// Errors are returned as values; the package ends the process only
// through [World.Abort] (and so through the watchdog).
package mpi

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"
)

// watchdogExit is the exit status of every rank when the watchdog fires.
const watchdogExit = 4

// Test seams.
var (
	// stderr receives the watchdog's line.
	stderr io.Writer = os.Stderr
	// maxPayload is the longest payload one collective moves: MPI counts
	// are C ints.
	maxPayload int64 = math.MaxInt32
)

// transport moves fixed-size buffers between the ranks of a world. Every
// rank passes the same lengths; the exported methods of World do the
// framing and the watchdog, and never pass an empty src or buf.
type transport interface {
	// bcast overwrites buf on every rank with root's buf.
	bcast(root int, buf []byte) error
	// gather tiles every rank's src into dst (size*len(src) bytes) on
	// root; dst is nil on the other ranks.
	gather(root int, dst, src []byte) error
	// allGather tiles every rank's src into dst on every rank.
	allGather(dst, src []byte) error
	// allMax returns the largest v over all ranks, on every rank.
	allMax(v int64) (int64, error)
	barrier() error
	finalize() error
	// abort ends the job with the given status; it does not return.
	abort(code int)
}

// Transport moves fixed-size buffers between the ranks of a world: what
// a World needs from its MPI, for a world made with [NewWorld] (tests run
// several ranks in one process with the one of package mpitest). Every
// rank passes the same lengths, and never an empty src or buf; the World
// does the framing of payloads of any length and the watchdog.
type Transport interface {
	// Bcast overwrites buf on every rank with root's buf.
	Bcast(root int, buf []byte) error
	// Gather tiles every rank's src into dst (size*len(src) bytes) on
	// root; dst is nil on the other ranks.
	Gather(root int, dst, src []byte) error
	// AllGather tiles every rank's src into dst on every rank.
	AllGather(dst, src []byte) error
	// AllMax returns the largest v over all ranks, on every rank.
	AllMax(v int64) (int64, error)
	Barrier() error
	Finalize() error
	// Abort ends the job with the given status.
	Abort(code int)
}

// NewWorld returns rank rank of a world of size ranks on host joined by t,
// with every collective bounded by timeout (0: none). Init makes the
// worlds of real jobs; NewWorld is for other transports (tests).
func NewWorld(rank, size int, host string, timeout time.Duration, t Transport) *World {
	return &World{rank: rank, size: size, host: host, timeout: timeout, t: exported{t}}
}

// exported adapts a Transport to the package's transport.
type exported struct{ t Transport }

func (e exported) bcast(root int, buf []byte) error       { return e.t.Bcast(root, buf) }
func (e exported) gather(root int, dst, src []byte) error { return e.t.Gather(root, dst, src) }
func (e exported) allGather(dst, src []byte) error        { return e.t.AllGather(dst, src) }
func (e exported) allMax(v int64) (int64, error)          { return e.t.AllMax(v) }
func (e exported) barrier() error                         { return e.t.Barrier() }
func (e exported) finalize() error                        { return e.t.Finalize() }
func (e exported) abort(code int)                         { e.t.Abort(code) }

// World is this process's place in the job: its rank, the number of
// ranks, and the collectives that join them. Get one from [Init].
//
// Collectives must be called by every rank in the same order, as in MPI;
// calls from several goroutines of one rank are serialized.
type World struct {
	rank, size int
	host       string
	timeout    time.Duration
	t          transport

	mu        sync.Mutex // serializes collectives
	finalized bool
}

// Init joins the job and returns this process's World.
//
// When this process is one of several tasks of a launcher (see [Detect]
// and [Launch.Distributed]) a binary built with -tags mpi calls MPI_Init
// (asking for MPI_THREAD_MULTIPLE, which the watchdog's abort needs) and
// checks that MPI's world has the size the launcher announced; call it
// once per process. Otherwise (no launcher, one task, a process that a
// task started, LEASE_MPI=off) the World is rank 0 of 1 and MPI is never
// touched. A launch whose tasks cannot join one program ([Launch.Check]:
// a build without MPI, srun --mpi=none, a PMI the library lacks) is an
// error before MPI is touched.
//
// timeout bounds every later collective, and MPI_Init itself (which gets
// at least 30s); 0 means no bound. See the package doc for what happens
// when it passes.
func Init(timeout time.Duration) (*World, error) {
	if timeout < 0 {
		return nil, fmt.Errorf("mpi: negative timeout %s", timeout)
	}
	l, err := Detect()
	if err != nil {
		return nil, err
	}
	if err := l.Check(); err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("mpi: host name: %w", err)
	}
	w := &World{size: 1, host: host, timeout: timeout, t: single{}}
	if l.Distributed() {
		if err := join(w, l.Size, l.Rank); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Rank returns this process's rank, from 0 to Size()-1.
func (w *World) Rank() int { return w.rank }

// Size returns the number of ranks in the job (1 without a launcher).
func (w *World) Size() int { return w.size }

// Host returns the host name of this rank, as os.Hostname gave it at Init.
func (w *World) Host() string { return w.host }

// Bcast returns root's data on every rank. data may have any length (up to
// 2 GiB-1) and is ignored on the other ranks; the result is a fresh slice,
// empty but not nil for an empty payload.
func (w *World) Bcast(root int, data []byte) ([]byte, error) {
	var out []byte
	err := w.collective("Bcast", root, func() error {
		hdr := make([]byte, 8)
		if w.rank == root {
			binary.LittleEndian.PutUint64(hdr, uint64(len(data)))
		}
		if err := w.t.bcast(root, hdr); err != nil {
			return err
		}
		n := int64(binary.LittleEndian.Uint64(hdr))
		if n < 0 || n > maxPayload {
			return fmt.Errorf("payload of %d bytes exceeds the limit of %d", n, maxPayload)
		}
		out = make([]byte, n)
		if n == 0 {
			return nil
		}
		if w.rank == root {
			copy(out, data)
		}
		return w.t.bcast(root, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Gather returns, on root, every rank's data in rank order; each rank's
// data may have its own length. Other ranks get nil.
func (w *World) Gather(root int, data []byte) ([][]byte, error) {
	var out [][]byte
	err := w.collective("Gather", root, func() error {
		lens, width, err := w.lengths(len(data))
		if err != nil {
			return err
		}
		var dst []byte
		if w.rank == root {
			dst = make([]byte, w.size*width)
		}
		if width > 0 {
			if err := w.t.gather(root, dst, padded(data, width)); err != nil {
				return err
			}
		}
		if w.rank == root {
			out = split(dst, lens, width)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AllGather returns every rank's data in rank order, on every rank; each
// rank's data may have its own length.
func (w *World) AllGather(data []byte) ([][]byte, error) {
	var out [][]byte
	err := w.collective("AllGather", 0, func() error {
		lens, width, err := w.lengths(len(data))
		if err != nil {
			return err
		}
		dst := make([]byte, w.size*width)
		if width > 0 {
			if err := w.t.allGather(dst, padded(data, width)); err != nil {
				return err
			}
		}
		out = split(dst, lens, width)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AllMaxInt returns the largest v over all ranks, on every rank: the way
// ranks agree on one value (a deadline, an exit status).
func (w *World) AllMaxInt(v int) (int, error) {
	var out int64
	err := w.collective("AllMaxInt", 0, func() (err error) {
		out, err = w.t.allMax(int64(v))
		return err
	})
	return int(out), err
}

// Barrier returns once every rank has called it.
func (w *World) Barrier() error {
	return w.collective("Barrier", 0, w.t.barrier)
}

// Finalize leaves the job (MPI_Finalize, itself collective and under the
// watchdog). Later collectives return an error; a second Finalize returns
// nil, so `defer w.Finalize()` beside an explicit call is safe.
func (w *World) Finalize() error {
	w.mu.Lock()
	done := w.finalized
	w.mu.Unlock()
	if done {
		return nil
	}
	return w.collective("Finalize", 0, func() error {
		w.finalized = true // MPI cannot be used again, even if finalize fails
		return w.t.finalize()
	})
}

// Abort ends every rank of the job with exit status code: MPI_Abort on the
// world under MPI, os.Exit in a single process (or when MPI is not, or no
// longer, initialized). It does not return.
func (w *World) Abort(code int) {
	w.t.abort(code)
}

// collective runs op as the collective name under the watchdog; root is
// checked for the collectives that have one (0 is always valid).
func (w *World) collective(name string, root int, op func() error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finalized {
		return fmt.Errorf("mpi: %s after Finalize", name)
	}
	if root < 0 || root >= w.size {
		return fmt.Errorf("mpi: %s: root %d out of range for %d ranks", name, root, w.size)
	}
	if w.timeout > 0 {
		timer := time.AfterFunc(w.timeout, func() {
			fmt.Fprintf(stderr, "lease: mpi: %s did not complete within %s on rank %d of %d (a peer rank is stuck or dead); aborting\n",
				name, w.timeout, w.rank, w.size)
			w.t.abort(watchdogExit)
		})
		defer timer.Stop()
	}
	if err := op(); err != nil {
		return fmt.Errorf("mpi: %s on rank %d of %d: %w", name, w.rank, w.size, err)
	}
	return nil
}

// lengths shares n with every rank and returns all ranks' lengths in rank
// order and the longest. Every rank sees the same numbers, so every rank
// fails alike on an oversized payload.
func (w *World) lengths(n int) (lens []int, width int, err error) {
	src := make([]byte, 8)
	binary.LittleEndian.PutUint64(src, uint64(n))
	dst := make([]byte, 8*w.size)
	if err := w.t.allGather(dst, src); err != nil {
		return nil, 0, err
	}
	lens = make([]int, w.size)
	for i := range lens {
		l := int64(binary.LittleEndian.Uint64(dst[8*i:]))
		if l < 0 || l > maxPayload {
			return nil, 0, fmt.Errorf("rank %d's payload of %d bytes exceeds the limit of %d", i, l, maxPayload)
		}
		lens[i] = int(l)
		width = max(width, lens[i])
	}
	return lens, width, nil
}

// padded returns data extended with zeros to width bytes.
func padded(data []byte, width int) []byte {
	p := make([]byte, width)
	copy(p, data)
	return p
}

// split cuts tiles of width bytes out of dst, trimmed to lens; the parts
// share dst but cannot grow into each other.
func split(dst []byte, lens []int, width int) [][]byte {
	out := make([][]byte, len(lens))
	for i, n := range lens {
		out[i] = dst[i*width : i*width+n : i*width+n]
	}
	return out
}

// single is the transport of a world of one rank: every collective is the
// identity.
type single struct{}

func (single) bcast(int, []byte) error { return nil }

func (single) gather(_ int, dst, src []byte) error {
	copy(dst, src)
	return nil
}

func (single) allGather(dst, src []byte) error {
	copy(dst, src)
	return nil
}

func (single) allMax(v int64) (int64, error) { return v, nil }
func (single) barrier() error                { return nil }
func (single) finalize() error               { return nil }
func (single) abort(code int)                { os.Exit(code) }
