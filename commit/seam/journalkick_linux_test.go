//go:build linux

package seam

import (
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testKicker is a kicker whose kicks touch and fsync dir (a local one:
// the kick is the same system calls, it just asks nothing of a server).
func testKicker(t *testing.T, dir string) *kicker {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	k := &kicker{fd: fd}
	k.delay.Store(int64(kickStart))
	t.Cleanup(k.close)
	return k
}

// TestKickerNotOnLocalFS: no kicker on a local filesystem, so its reads
// are never watched (a nil kicker's watch is a no-op).
func TestKickerNotOnLocalFS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		t.Fatal(err)
	}
	for _, fuse := range []bool{false, true} {
		if k := newKicker(fd, fuse, int64(st.Type)); k != nil {
			k.close()
			t.Errorf("newKicker(fuse=%v) on %s: a kicker, want none", fuse, dir)
		}
	}
	var k *kicker
	k.watch()()
	k.close()
	o, err := OS(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.kick != nil || o.journalKicks() != 0 {
		t.Errorf("OS(%s) has a kicker", dir)
	}
}

// fakeClock is a kickClock whose time moves only when the test says
// (advance), so that what a kicker does at each moment is certain.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c     *fakeClock
	when  time.Time
	armed bool
	f     func()
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) kickTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, when: c.now.Add(d), armed: true, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.armed = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.when, t.armed = t.c.now.Add(d), true
	return was
}

// advance moves the time on by d and runs every timer then due, all at
// once, each in its goroutine as time.AfterFunc does, and waits for them.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	for _, t := range c.timers {
		if t.armed && !t.when.After(c.now) {
			t.armed = false
			due = append(due, t.f)
		}
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, f := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	wg.Wait()
}

// TestKickerKicksSlowReads: a read that ends before the delay is never
// kicked; one still in flight is, and the kick touched the directory;
// many reads waiting at once share one kick; a read a kick ended brings
// the delay down to kickMin, and one still in flight a delay after its
// kick doubles it. The kicker's time is a fakeClock: each step is taken
// at a moment the test chose, however loaded the machine.
func TestKickerKicksSlowReads(t *testing.T) {
	dir := t.TempDir()
	k := testKicker(t, dir)
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	k.clock = clock
	k.watch()()
	clock.advance(2 * kickStart)
	if n := k.kicks.Load(); n != 0 {
		t.Fatalf("%d kicks for a read that ended at once", n)
	}

	old := time.Now().Add(-time.Hour)
	if err := unix.UtimesNano(dir, []unix.Timespec{unix.NsecToTimespec(old.UnixNano()), unix.NsecToTimespec(old.UnixNano())}); err != nil {
		t.Fatal(err)
	}
	stop := k.watch()
	clock.advance(kickStart - time.Nanosecond)
	if n := k.kicks.Load(); n != 0 {
		t.Fatalf("%d kicks before the delay", n)
	}
	clock.advance(time.Nanosecond)
	if n := k.kicks.Load(); n != 1 {
		t.Fatalf("%d kicks at the delay, want 1", n)
	}
	stop() // ended by its first kick: helped
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	if time.Unix(st.Mtim.Unix()).Before(old.Add(time.Minute)) {
		t.Errorf("the kick left the directory's mtime at %v", time.Unix(st.Mtim.Unix()))
	}
	if d := time.Duration(k.delay.Load()); d != kickMin {
		t.Errorf("delay %v after a read its kick ended, want %v", d, kickMin)
	}

	// A read that stays in flight: kicked again and again, each time
	// slower, never more than once per delay.
	before := k.kicks.Load()
	stop = k.watch()
	for i, d := range []time.Duration{kickMin, kickMin, 2 * kickMin} {
		clock.advance(d - time.Nanosecond)
		if n := k.kicks.Load() - before; n != int64(i) {
			t.Fatalf("%d kicks %v into the delay of kick %d, want %d", n, d-time.Nanosecond, i+1, i)
		}
		clock.advance(time.Nanosecond)
		if n := k.kicks.Load() - before; n != int64(i+1) {
			t.Fatalf("%d kicks at the delay %v of kick %d", n, d, i+1)
		}
	}
	stop()
	if d := time.Duration(k.delay.Load()); d != 4*kickMin {
		t.Errorf("delay %v after a read that two kicks did not end, want %v", d, 4*kickMin)
	}
	after := k.kicks.Load()
	clock.advance(kickMax)
	if n := k.kicks.Load(); n != after {
		t.Errorf("%d kicks after the read ended", n-after)
	}

	// Many reads waiting at once, with a long delay: one kick for all.
	k.delay.Store(int64(200 * time.Millisecond))
	k.last.Store(0)
	before = k.kicks.Load()
	var stops []func()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := k.watch()
			mu.Lock()
			stops = append(stops, s)
			mu.Unlock()
		}()
	}
	wg.Wait()
	clock.advance(200 * time.Millisecond)
	for _, s := range stops {
		s()
	}
	if n := k.kicks.Load() - before; n != 1 {
		t.Errorf("20 reads waiting at once got %d kicks, want 1", n)
	}
	if d := time.Duration(k.delay.Load()); d != kickMin {
		t.Errorf("delay %v after reads one kick ended, want %v", d, kickMin)
	}
	k.close()
	k.kickOnce() // closed: nothing to touch, no crash
}
