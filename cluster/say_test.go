package cluster

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasetool/lease/mpi"
)

// slowWriter is rank 0's stderr, slow to take the line (as a rank is that
// the launcher schedules late), and remembers that it did.
type slowWriter struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written atomic.Bool
}

func (s *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(50 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	s.written.Store(true)
	return n, err
}

// TestSay: rank 0 alone writes the message, once, and no rank returns from
// Say (to exit) before rank 0's write has returned.
func TestSay(t *testing.T) {
	var zero, others slowWriter
	early := make([]bool, 4)
	errs := onRanks(t, 4, func(w *mpi.World) error {
		out := &others
		if w.Rank() == 0 {
			out = &zero
		}
		err := Say(w, out, "lease renew-batch: the reason")
		early[w.Rank()] = !zero.written.Load()
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
		if early[r] {
			t.Errorf("rank %d returned from Say before rank 0 had written the message", r)
		}
	}
	if got := zero.b.String(); got != "lease renew-batch: the reason\n" {
		t.Errorf("rank 0 wrote %q", got)
	}
	if others.b.Len() != 0 {
		t.Errorf("the other ranks wrote %q; only rank 0 speaks", others.b.String())
	}
}
