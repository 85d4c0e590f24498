package safety

// ExplorePebble: the crash exploration of a scenario on Mem, sampling
// Pebble's crash clones, with the FS wrapper that captures every content
// written.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/leasetool/lease/commit/seam"
)

// capture remembers every content written through it.
type capture struct {
	seam.FS
	mu      sync.Mutex
	written [][]byte
}

func (c *capture) CreateExcl(name string) (seam.File, error) {
	f, err := c.FS.CreateExcl(name)
	if err != nil {
		return nil, err
	}
	return &captureFile{File: f, c: c}, nil
}

type captureFile struct {
	seam.File
	c    *capture
	data []byte
}

func (f *captureFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.data = append(f.data, p[:n]...)
	f.c.mu.Lock()
	f.c.written = append(f.c.written, bytes.Clone(f.data))
	f.c.mu.Unlock()
	return n, err
}

// ExplorePebble runs sc on a Mem over Pebble's crash-simulating vfs and,
// before every call and after the last, takes samples crash clones (one
// with only synced data, one with everything, the rest at random with half
// of the unsynced entries and blocks) and checks each distinct one like
// Explore does.
func (x *Explorer) ExplorePebble(sc *Scenario, samples int) (*Result, error) {
	base, err := Base(sc)
	if err != nil {
		return nil, err
	}
	m := NewMem()
	if err := m.load(base); err != nil {
		return nil, fmt.Errorf("load %s: %w", sc.Name, err)
	}
	type point struct {
		call int
		t    *Tree
	}
	var (
		mu     sync.Mutex
		calls  []Call
		points []point
		rng    = rand.New(rand.NewPCG(x.Seed, 7))
		cerr   error
	)
	clone := func() {
		for i := 0; i < samples; i++ {
			cfg := vfs.CrashCloneCfg{}
			switch {
			case i == 1:
				cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rng}
			case i > 1:
				cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rng}
			}
			t, err := m.CrashClone(cfg).tree()
			if err != nil && cerr == nil {
				cerr = err
			}
			if t != nil {
				points = append(points, point{len(calls), t})
			}
		}
	}
	cap := &capture{FS: m}
	hooked := seam.WithHook(cap, func(op seam.Op, name string) error {
		mu.Lock()
		defer mu.Unlock()
		clone()
		calls = append(calls, Call{Op: op, Name: name})
		return nil
	})
	run := &Run{FS: hooked, calls: func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(calls)
	}, state: func() *Tree {
		t, err := m.tree()
		if err != nil {
			panic(err)
		}
		return t
	}}
	if err := run.start(sc); err != nil {
		return nil, err
	}
	mu.Lock()
	clone()
	mu.Unlock()
	if cerr != nil {
		return nil, cerr
	}
	res := &Result{Scenario: sc.Name, Calls: len(calls), CrashPoints: len(calls) + 1, Acks: len(run.acks)}
	chk := newChecker(x, sc, base, run.acks, cap.written, calls)
	seen := map[[32]byte]bool{}
	for _, p := range points {
		h := p.t.Hash()
		res.Checked++
		if seen[h] && !chk.acksAt(p.call) {
			continue
		}
		if !seen[h] {
			seen[h] = true
			res.States++
		}
		for _, v := range chk.check(p.t, p.call, false) {
			res.Violations = append(res.Violations, fmt.Sprintf("%s (pebble): crash after call %d/%d (%s): %s", sc.Name, p.call, res.Calls, chk.callName(p.call), v))
		}
	}
	sort.Strings(res.Violations)
	return res, nil
}
