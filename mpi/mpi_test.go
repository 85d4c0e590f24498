package mpi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// launcherVars are the variables Launched reads.
var launcherVars = []string{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"}

// noLauncher hides the launcher's variables, should the tests run under one.
func noLauncher(t *testing.T) {
	t.Helper()
	for _, v := range launcherVars {
		t.Setenv(v, "")
	}
}

func TestLaunched(t *testing.T) {
	for _, tc := range []struct {
		env        map[string]string
		size, rank int
		ok         bool
		name       string
	}{
		{name: "none", env: nil},
		{name: "open mpi", env: map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "2"}, size: 4, rank: 2, ok: true},
		{name: "pmix with pmi size", env: map[string]string{"PMIX_RANK": "3", "PMI_SIZE": "5"}, size: 5, rank: 3, ok: true},
		{name: "pmix with open mpi size", env: map[string]string{"PMIX_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}, size: 2, rank: 1, ok: true},
		{name: "pmix alone", env: map[string]string{"PMIX_RANK": "1"}, size: 0, rank: 1, ok: true},
		{name: "hydra", env: map[string]string{"PMI_SIZE": "8", "PMI_RANK": "7"}, size: 8, rank: 7, ok: true},
		{name: "malformed", env: map[string]string{"PMI_SIZE": "many", "PMI_RANK": "-1"}, size: 0, rank: 0, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLauncher(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			size, rank, ok := Launched()
			if size != tc.size || rank != tc.rank || ok != tc.ok {
				t.Errorf("Launched() = %d, %d, %v; want %d, %d, %v", size, rank, ok, tc.size, tc.rank, tc.ok)
			}
		})
	}
}

func initSingle(t *testing.T) *World {
	t.Helper()
	noLauncher(t)
	w, err := Init(0)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestInitSingle(t *testing.T) {
	w := initSingle(t)
	host, _ := os.Hostname()
	if w.Rank() != 0 || w.Size() != 1 || w.Host() != host {
		t.Errorf("rank %d size %d host %q; want 0, 1, %q", w.Rank(), w.Size(), w.Host(), host)
	}
	if _, err := Init(-time.Second); err == nil {
		t.Error("Init(-1s) succeeded")
	}
}

// lengths are the payload sizes every collective must carry.
var lengths = []int{0, 1, 7, 4096, 1 << 20}

func payload(n, salt int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + salt)
	}
	return b
}

func TestSingleAnyLength(t *testing.T) {
	w := initSingle(t)
	for _, n := range lengths {
		data := payload(n, n)
		want := slices.Clone(data)

		got, err := w.Bcast(0, data)
		if err != nil || got == nil || !bytes.Equal(got, want) {
			t.Fatalf("Bcast(%d bytes) = %d bytes (nil %v), %v", n, len(got), got == nil, err)
		}
		if n > 0 {
			data[0]++ // the result is a copy
			if got[0] != want[0] {
				t.Errorf("Bcast(%d bytes) returned the caller's slice", n)
			}
			data[0]--
		}
		for name, gather := range map[string]func([]byte) ([][]byte, error){
			"Gather":    func(b []byte) ([][]byte, error) { return w.Gather(0, b) },
			"AllGather": w.AllGather,
		} {
			parts, err := gather(data)
			if err != nil || len(parts) != 1 || parts[0] == nil || !bytes.Equal(parts[0], want) {
				t.Fatalf("%s(%d bytes) = %d parts, %v", name, n, len(parts), err)
			}
		}
	}
}

func TestSingleAllMaxInt(t *testing.T) {
	w := initSingle(t)
	for _, v := range []int{0, -1, 42, math.MinInt, math.MaxInt} {
		if got, err := w.AllMaxInt(v); got != v || err != nil {
			t.Errorf("AllMaxInt(%d) = %d, %v", v, got, err)
		}
	}
	if err := w.Barrier(); err != nil {
		t.Error(err)
	}
}

func TestRootOutOfRange(t *testing.T) {
	w := initSingle(t)
	if _, err := w.Bcast(1, nil); err == nil || !strings.Contains(err.Error(), "root 1 out of range") {
		t.Errorf("Bcast(root 1 of 1) error = %v", err)
	}
	if _, err := w.Gather(-1, nil); err == nil || !strings.Contains(err.Error(), "root -1 out of range") {
		t.Errorf("Gather(root -1 of 1) error = %v", err)
	}
}

func TestFinalize(t *testing.T) {
	w := initSingle(t)
	if err := w.Finalize(); err != nil {
		t.Fatal(err)
	}
	if err := w.Finalize(); err != nil {
		t.Errorf("second Finalize: %v", err)
	}
	if _, err := w.AllGather(nil); err == nil || !strings.Contains(err.Error(), "AllGather after Finalize") {
		t.Errorf("AllGather after Finalize: %v", err)
	}
}

func TestPayloadLimit(t *testing.T) {
	defer func(old int64) { maxPayload = old }(maxPayload)
	maxPayload = 10
	w := initSingle(t)
	if _, err := w.Bcast(0, make([]byte, 10)); err != nil {
		t.Errorf("Bcast at the limit: %v", err)
	}
	if _, err := w.Bcast(0, make([]byte, 11)); err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Errorf("Bcast over the limit: %v", err)
	}
	if _, err := w.Gather(0, make([]byte, 11)); err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Errorf("Gather over the limit: %v", err)
	}
}

// TestAbortExits runs Abort in a child copy of the test binary: it must
// end the process with the given status.
func TestAbortExits(t *testing.T) {
	if os.Getenv("LEASE_MPI_ABORT_CHILD") == "1" {
		w, err := Init(0)
		if err != nil {
			os.Exit(90)
		}
		w.Abort(7)
		os.Exit(91) // Abort returned
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAbortExits$")
	cmd.Env = append(os.Environ(), "LEASE_MPI_ABORT_CHILD=1")
	for _, v := range launcherVars {
		cmd.Env = append(cmd.Env, v+"=")
	}
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("child ended with %v; want exit status 7", err)
	}
}

// hub joins in-process ranks (loop transports) so that the framing of
// variable-length payloads can be tested across several ranks without
// MPI. Every collective is one exchange: each rank deposits a buffer and
// gets everyone's once all have.
type hub struct {
	mu      sync.Mutex
	cond    *sync.Cond
	bufs    [][]byte
	arrived int
	gen     int
	result  [][]byte
	aborted []int // abort codes, in order
}

func newHub(n int) *hub {
	h := &hub{bufs: make([][]byte, n)}
	h.cond = sync.NewCond(&h.mu)
	return h
}

var errAborted = errors.New("aborted")

func (h *hub) exchange(rank int, src []byte) ([][]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	gen := h.gen
	h.bufs[rank] = slices.Clone(src)
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
	if len(h.aborted) > 0 {
		return nil, errAborted
	}
	return h.result, nil
}

// tiles checks the transport's contract, equal lengths on every rank, and
// lays the buffers out in rank order.
func tiles(all [][]byte) ([]byte, error) {
	var out []byte
	for _, b := range all {
		if len(b) != len(all[0]) || len(b) == 0 {
			return nil, fmt.Errorf("transport given lengths %v", lens(all))
		}
		out = append(out, b...)
	}
	return out, nil
}

func lens(all [][]byte) []int {
	var n []int
	for _, b := range all {
		n = append(n, len(b))
	}
	return n
}

type loop struct {
	h    *hub
	rank int
}

func (l loop) bcast(root int, buf []byte) error {
	all, err := l.h.exchange(l.rank, buf)
	if err != nil {
		return err
	}
	if _, err := tiles(all); err != nil {
		return err
	}
	copy(buf, all[root])
	return nil
}

func (l loop) gather(root int, dst, src []byte) error {
	if (l.rank == root) != (dst != nil) {
		return fmt.Errorf("rank %d gather(root %d) given dst of %d bytes (nil %v)", l.rank, root, len(dst), dst == nil)
	}
	return l.allGather(dst, src)
}

// allGather also serves gather: MPI ignores dst off root, here nil.
func (l loop) allGather(dst, src []byte) error {
	all, err := l.h.exchange(l.rank, src)
	if err != nil {
		return err
	}
	t, err := tiles(all)
	if err != nil {
		return err
	}
	if dst != nil && len(dst) != len(t) {
		return fmt.Errorf("rank %d given dst of %d bytes for %d", l.rank, len(dst), len(t))
	}
	copy(dst, t)
	return nil
}

func (l loop) allMax(v int64) (int64, error) {
	all, err := l.h.exchange(l.rank, binary.LittleEndian.AppendUint64(nil, uint64(v)))
	if err != nil {
		return 0, err
	}
	m := int64(math.MinInt64)
	for _, b := range all {
		m = max(m, int64(binary.LittleEndian.Uint64(b)))
	}
	return m, nil
}

func (l loop) barrier() error {
	_, err := l.h.exchange(l.rank, nil)
	return err
}

func (l loop) finalize() error { return l.barrier() }

func (l loop) abort(code int) {
	l.h.mu.Lock()
	l.h.aborted = append(l.h.aborted, code)
	l.h.cond.Broadcast()
	l.h.mu.Unlock()
}

// loopWorlds returns n in-process ranks joined by one hub.
func loopWorlds(n int, timeout time.Duration) ([]*World, *hub) {
	h := newHub(n)
	ws := make([]*World, n)
	for r := range ws {
		ws[r] = &World{rank: r, size: n, host: "loop", timeout: timeout, t: loop{h, r}}
	}
	return ws, h
}

// onAll runs f on every rank at once and returns their errors. A rank
// that fails aborts the job, as a real one must, so that its peers do not
// wait for it forever.
func onAll(ws []*World, f func(w *World) error) error {
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			if errs[i] = f(w); errs[i] != nil {
				w.Abort(1)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// TestFraming checks, on 4 in-process ranks, that payloads of different
// lengths per rank (0 bytes to 1 MiB) arrive whole, in rank order, at the
// right ranks.
func TestFraming(t *testing.T) {
	const n = 4
	ws, _ := loopWorlds(n, 0)
	cases := [][]int{{0, 0, 0, 0}, {0, 1, 2, 3}, {5, 0, 1 << 20, 9}, {100, 100, 100, 100}}
	for ci, ls := range cases {
		root := ci % n
		mine := func(r int) []byte { return payload(ls[r], 10*ci+r) }
		err := onAll(ws, func(w *World) error {
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
		})
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
	old := stderr
	buf := &lockedBuffer{}
	stderr = buf
	t.Cleanup(func() { stderr = old })
	return buf
}

// TestWatchdog leaves rank 2 of 3 out of a Gather: rank 0, whose timeout
// is the shorter, must print the line and abort with status 4 once it
// passes. (Rank 1's timeout is long so that exactly one timer fires: a late
// callback would write into the next test's stderr.)
func TestWatchdog(t *testing.T) {
	errBuf := captureStderr(t)
	ws, h := loopWorlds(3, 100*time.Millisecond)
	ws[1].timeout = time.Minute
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- onAll(ws[:2], func(w *World) error {
			_, err := w.Gather(0, []byte("x"))
			return err
		})
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Gather still blocked 5s after its 100ms timeout")
	}
	if !errors.Is(err, errAborted) {
		t.Errorf("Gather returned %v; want the abort", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("aborted after %s, before the 100ms timeout", d)
	}
	h.mu.Lock()
	codes := slices.Clone(h.aborted)
	h.mu.Unlock()
	if len(codes) == 0 || codes[0] != 4 { // then onAll's aborts for the failed ranks
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
	ws, h := loopWorlds(2, 50*time.Millisecond)
	if err := onAll(ws, func(w *World) error { return w.Barrier() }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.aborted) > 0 || errBuf.String() != "" {
		t.Errorf("watchdog fired after a completed Barrier: codes %v, stderr %q", h.aborted, errBuf.String())
	}
}
