package durable

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
)

// fakeSyncfs is a syncfs that makes durable the writes completed when it
// started, and runs each round until the test releases it.
type fakeSyncfs struct {
	written atomic.Int64 // writes completed
	durable atomic.Int64 // writes covered by the last finished round
	started chan int64   // each round's snapshot, when it starts
	release chan error   // ends the running round with this error
}

func (f *fakeSyncfs) sync() error {
	snap := f.written.Load()
	f.started <- snap
	err := <-f.release
	if err == nil {
		f.durable.Store(snap)
	}
	return err
}

// next is the snapshot of the next round to start, failing the test when
// none starts (generously bounded).
func (f *fakeSyncfs) next(t *testing.T) int64 {
	t.Helper()
	select {
	case snap := <-f.started:
		return snap
	case <-time.After(time.Minute):
		t.Fatal("no syncfs round started")
	}
	return 0
}

func (b *Barrier) waiters() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting
}

// TestBarrierCoversOnlyEarlierWrites: a Sync returns only after a syncfs
// that started after the caller's write completed; callers that arrived
// while a round ran share the next round (3 writers, 2 rounds), and the
// round running when they arrived does not cover them.
func TestBarrierCoversOnlyEarlierWrites(t *testing.T) {
	t.Parallel()
	f := &fakeSyncfs{started: make(chan int64, 8), release: make(chan error)}
	var count atomic.Int64
	b := NewBarrier(f.sync, nil, &count)
	type done struct {
		write   int64
		durable int64
	}
	results := make(chan done, 8)
	writer := func() {
		w := f.written.Add(1)
		err := b.Sync()
		if err != nil {
			t.Errorf("Sync: %v", err)
		}
		results <- done{w, f.durable.Load()}
	}
	go writer() // write 1 starts round 1
	if snap := f.next(t); snap != 1 {
		t.Fatalf("round 1 started covering %d writes, want 1", snap)
	}
	var wg sync.WaitGroup
	for range 2 { // writes 2 and 3 arrive while round 1 runs
		wg.Add(1)
		go func() { defer wg.Done(); writer() }()
	}
	testenv.WaitFor(t, "2 writers waiting on the running round", time.Minute, func() bool { return b.waiters() == 2 })
	f.release <- nil // round 1 ends: it covers write 1 only
	r := <-results
	if r.write != 1 || r.durable < 1 {
		t.Fatalf("first return: write %d with %d durable", r.write, r.durable)
	}
	if snap := f.next(t); snap != 3 {
		t.Fatalf("round 2 started covering %d writes, want 3", snap)
	}
	select {
	case r := <-results:
		t.Fatalf("write %d returned while only round 1, which started before it, had finished", r.write)
	case <-time.After(50 * time.Millisecond):
	}
	f.release <- nil
	wg.Wait()
	for range 2 {
		r := <-results
		if r.durable < r.write {
			t.Errorf("write %d returned with only %d writes durable", r.write, r.durable)
		}
	}
	if n := count.Load(); n != 2 {
		t.Errorf("%d syncfs rounds for 3 writers, want 2", n)
	}
}

// TestBarrierError: a failed round fails every Sync from then on without
// another syncfs (G6), and Final runs one more round all the same (G5).
func TestBarrierError(t *testing.T) {
	t.Parallel()
	f := &fakeSyncfs{started: make(chan int64, 8), release: make(chan error, 8)}
	var count atomic.Int64
	b := NewBarrier(f.sync, nil, &count)
	eio := errors.New("EIO")
	f.release <- eio
	if err := b.Sync(); !errors.Is(err, eio) {
		t.Fatalf("Sync after a failed round: %v, want EIO", err)
	}
	if err := b.Sync(); !errors.Is(err, eio) || count.Load() != 1 {
		t.Fatalf("second Sync: %v after %d rounds, want EIO after 1", err, count.Load())
	}
	f.release <- nil
	if err := b.Final(); !errors.Is(err, eio) || count.Load() != 2 {
		t.Fatalf("Final: %v after %d rounds, want EIO after 2", err, count.Load())
	}
}
