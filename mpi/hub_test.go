package mpi_test

// Tests of the World across several in-process ranks (package mpitest).

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasetool/lease/mpi"
	"github.com/leasetool/lease/mpi/mpitest"
)

// payload is n bytes that differ by salt.
func payload(n, salt int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + salt)
	}
	return b
}

// TestFraming checks, on 4 in-process ranks, that payloads of different
// lengths per rank (0 bytes to 1 MiB) arrive whole, in rank order, at the
// right ranks.
func TestFraming(t *testing.T) {
	const n = 4
	ws, _ := mpitest.Worlds(n, 0)
	cases := [][]int{{0, 0, 0, 0}, {0, 1, 2, 3}, {5, 0, 1 << 20, 9}, {100, 100, 100, 100}}
	for ci, ls := range cases {
		root := ci % n
		mine := func(r int) []byte { return payload(ls[r], 10*ci+r) }
		err := errors.Join(mpitest.Run(ws, func(w *mpi.World) error {
			r := w.Rank()
			b, err := w.Bcast(root, mine(r))
			if err != nil {
				return err
			}
			if !bytes.Equal(b, mine(root)) || b == nil {
				return fmt.Errorf("rank %d: Bcast from %d gave %d bytes, not root's %d", r, root, len(b), ls[root])
			}
			g, err := w.Gather(root, mine(r))
			if err != nil {
				return err
			}
			if r != root && g != nil {
				return fmt.Errorf("rank %d: Gather to %d gave %d parts off root", r, root, len(g))
			}
			all, err := w.AllGather(mine(r))
			if err != nil {
				return err
			}
			for _, parts := range [][][]byte{all, g} {
				if parts == nil && r != root {
					continue
				}
				if len(parts) != n {
					return fmt.Errorf("rank %d: %d parts, want %d", r, len(parts), n)
				}
				for p := range parts {
					if !bytes.Equal(parts[p], mine(p)) || parts[p] == nil {
						return fmt.Errorf("rank %d: part %d has %d bytes, want %d", r, p, len(parts[p]), ls[p])
					}
				}
			}
			m, err := w.AllMaxInt(ls[r] - 5*r)
			if want := slices.Max([]int{ls[0], ls[1] - 5, ls[2] - 10, ls[3] - 15}); m != want || err != nil {
				return fmt.Errorf("rank %d: AllMaxInt = %d, %v; want %d", r, m, err, want)
			}
			return nil
		})...)
		if err != nil {
			t.Fatalf("lengths %v, root %d: %v", ls, root, err)
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func captureStderr(t *testing.T) *lockedBuffer {
	buf := &lockedBuffer{}
	t.Cleanup(mpi.SetStderr(buf))
	return buf
}

// TestWatchdog leaves rank 2 of 3 out of a Gather: rank 0, whose timeout
// is the shorter, must print the line and abort with status 4 once it
// passes. (Rank 1's timeout is long so that exactly one timer fires: a late
// callback would write into the next test's stderr.)
func TestWatchdog(t *testing.T) {
	errBuf := captureStderr(t)
	ws, h := mpitest.Worlds(3, 100*time.Millisecond)
	mpi.SetTimeout(ws[1], time.Minute)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- errors.Join(mpitest.Run(ws[:2], func(w *mpi.World) error {
			_, err := w.Gather(0, []byte("x"))
			return err
		})...)
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Gather still blocked 5s after its 100ms timeout")
	}
	if !errors.Is(err, mpitest.ErrAborted) {
		t.Errorf("Gather returned %v; want the abort", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("aborted after %s, before the 100ms timeout", d)
	}
	codes := h.Aborted()
	if len(codes) == 0 || codes[0] != 4 { // then Run's aborts for the failed ranks
		t.Errorf("abort codes %v; want 4 first", codes)
	}
	const want = "lease: mpi: Gather did not complete within 100ms on rank 0 of 3 (a peer rank is stuck or dead); aborting\n"
	if got := errBuf.String(); got != want {
		t.Errorf("stderr %q; want %q", got, want)
	}
}

// TestWatchdogQuiet: a collective that completes in time leaves no timer
// behind.
func TestWatchdogQuiet(t *testing.T) {
	errBuf := captureStderr(t)
	ws, h := mpitest.Worlds(2, 50*time.Millisecond)
	if err := errors.Join(mpitest.Run(ws, func(w *mpi.World) error { return w.Barrier() })...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if codes := h.Aborted(); len(codes) > 0 || errBuf.String() != "" {
		t.Errorf("watchdog fired after a completed Barrier: codes %v, stderr %q", codes, errBuf.String())
	}
}
