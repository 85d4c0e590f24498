// Package mpitest runs several ranks of an mpi.World in one process, joined
// by an in-memory hub, so that code that runs as one program across the
// ranks of an mpirun job (package cluster) is tested by plain go test.
//
// Every collective is one exchange through the hub: each rank deposits a
// buffer and gets everyone's once all have. Abort ends the job: every
// rank blocked in a collective, and every later collective, fails with
// ErrAborted, and Aborted reports the codes.
package mpitest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/leasetool/lease/mpi"
)

// ErrAborted is returned by the collectives of a job after Abort.
var ErrAborted = errors.New("mpitest: the job was aborted")

// Hub joins the ranks of one in-process job.
type Hub struct {
	mu      sync.Mutex
	cond    *sync.Cond
	bufs    [][]byte
	arrived int
	gen     int
	result  [][]byte
	aborted []int
}

// Worlds returns the n ranks of one in-process job, every collective
// bounded by timeout (0: none), and the hub that joins them.
func Worlds(n int, timeout time.Duration) ([]*mpi.World, *Hub) {
	h := &Hub{bufs: make([][]byte, n)}
	h.cond = sync.NewCond(&h.mu)
	ws := make([]*mpi.World, n)
	for r := range ws {
		ws[r] = mpi.NewWorld(r, n, fmt.Sprintf("rank%d", r), timeout, &rank{h, r})
	}
	return ws, h
}

// Aborted returns the codes of the Abort calls so far, in order.
func (h *Hub) Aborted() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.aborted)
}

// Run runs f on every rank at once and returns each rank's error. A rank
// whose f fails aborts the job, as a real one must, so that its peers do
// not wait for it forever.
func Run(ws []*mpi.World, f func(w *mpi.World) error) []error {
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = f(w); errs[i] != nil {
				w.Abort(1)
			}
		}()
	}
	wg.Wait()
	return errs
}

func (h *Hub) exchange(r int, src []byte) ([][]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.aborted) > 0 {
		return nil, ErrAborted
	}
	gen := h.gen
	h.bufs[r] = slices.Clone(src)
	h.arrived++
	if h.arrived == len(h.bufs) {
		h.result, h.bufs = h.bufs, make([][]byte, len(h.bufs))
		h.arrived = 0
		h.gen++
		h.cond.Broadcast()
	}
	for gen == h.gen && len(h.aborted) == 0 {
		h.cond.Wait()
	}
	if gen == h.gen {
		return nil, ErrAborted
	}
	return h.result, nil
}

// rank is one rank's transport through the hub.
type rank struct {
	h *Hub
	r int
}

// tiles checks the transport's contract, equal lengths on every rank, and
// lays the buffers out in rank order.
func tiles(all [][]byte) ([]byte, error) {
	var out []byte
	for _, b := range all {
		if len(b) != len(all[0]) || len(b) == 0 {
			return nil, fmt.Errorf("mpitest: transport given unequal or empty buffers")
		}
		out = append(out, b...)
	}
	return out, nil
}

func (l *rank) Bcast(root int, buf []byte) error {
	all, err := l.h.exchange(l.r, buf)
	if err != nil {
		return err
	}
	if _, err := tiles(all); err != nil {
		return err
	}
	copy(buf, all[root])
	return nil
}

func (l *rank) Gather(root int, dst, src []byte) error {
	if (l.r == root) != (dst != nil) {
		return fmt.Errorf("mpitest: rank %d gather(root %d) given dst of %d bytes (nil %v)", l.r, root, len(dst), dst == nil)
	}
	return l.AllGather(dst, src)
}

func (l *rank) AllGather(dst, src []byte) error {
	all, err := l.h.exchange(l.r, src)
	if err != nil {
		return err
	}
	t, err := tiles(all)
	if err != nil {
		return err
	}
	if dst != nil && len(dst) != len(t) {
		return fmt.Errorf("mpitest: rank %d given dst of %d bytes for %d", l.r, len(dst), len(t))
	}
	copy(dst, t)
	return nil
}

func (l *rank) AllMax(v int64) (int64, error) {
	all, err := l.h.exchange(l.r, binary.LittleEndian.AppendUint64(nil, uint64(v)))
	if err != nil {
		return 0, err
	}
	m := int64(math.MinInt64)
	for _, b := range all {
		m = max(m, int64(binary.LittleEndian.Uint64(b)))
	}
	return m, nil
}

func (l *rank) Barrier() error {
	_, err := l.h.exchange(l.r, nil)
	return err
}

func (l *rank) Finalize() error { return l.Barrier() }

func (l *rank) Abort(code int) {
	l.h.mu.Lock()
	l.h.aborted = append(l.h.aborted, code)
	l.h.cond.Broadcast()
	l.h.mu.Unlock()
}
