package safety

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
)

// Root is the table root every explored store names in its messages.
const Root = "/table"

// Retry is the retry policy of the explored stores: the engine's number of
// tries would do, but not its pauses (seconds per record under a sticky
// ESTALE, times thousands of fault points).
var Retry = durable.Retry{Attempts: 3, Backoff: time.Microsecond, MaxBackoff: time.Microsecond}

// Scenario is one operation to explore: a starting table built without
// recording, and the operation run over a Recorder.
type Scenario struct {
	Name string
	// Table is the header of the starting table; nil starts from an empty
	// root (the operation creates the table).
	Table *leasefmt.Table
	// Setup builds the starting state; it is not recorded and is durable.
	Setup func(st *commit.Store, fsys seam.FS) error
	// Damage, when set, changes the starting state after Setup (what a
	// crash or another program left for fsck).
	Damage func(st *commit.Store, t *Tree) *Tree
	// Run performs the operation and calls ack for everything it reports
	// as done, at the moment it reports it.
	Run func(r *Run)
	// Reinit is the table re-running the operation creates when a crash
	// left no TABLE (the init scenario).
	Reinit *leasefmt.Table
	// Group is set for the target-group operations (G9 applies).
	Group bool
	// NoStore: the operation opens the table itself (fsck).
	NoStore bool
	// Writers is the writer pool of batches; 1 gives one call order.
	Writers int
	// Now is the operation's clock: liveness is judged at Now.
	Now float64
	// Clock, when set, is the store's clock while the operation runs
	// (given the number of calls made so far): a clock that moves while a
	// batch waits, as for input that arrives late. Nil is Now, fixed.
	Clock func(calls int) float64
	// Wrap, when set, wraps the FS the operation runs on (not the
	// setup's): the faults of the scenario, such as a full filesystem.
	Wrap func(seam.FS) seam.FS
	// Syncfs runs the operation's batches under sync = syncfs: one
	// syncfs(2) barrier before the renames and one after, no per-record
	// fsync (the Recorder models syncfs; issue 41).
	Syncfs bool
	// SyncfsChunk, under Syncfs, cuts the batches into two-pass chunks of
	// this many records (commit.Options.SyncfsChunk; 0: the default), so
	// that chunks overlap: one renames while the next writes its temp files.
	SyncfsChunk int
	// MinToken is, per ID, a token some holder may have had that the
	// starting table no longer shows (bytes that fsck cannot read): every
	// claim after recovery must get a larger one.
	MinToken map[leasefmt.ID]int64
}

// Run is what an operation gets.
type Run struct {
	FS      seam.FS
	Store   *commit.Store // nil when the scenario starts without a table
	Rec     *Recorder     // nil when the operation runs on another FS
	calls   func() int    // calls made so far
	state   func() *Tree  // the current state, read around the seam
	acks    []Ack
	exit    int  // the exit status the command would return
	cleanup bool // calls now are best-effort cleanup (BestEffort)
	mu      sync.Mutex
	// now is the clock of the last At (when fixed): the time of the
	// acknowledgements that follow.
	now   float64
	fixed bool
}

// Outcome notes an outcome the command would report.
func (r *Run) Outcome(o commit.Outcome) {
	r.mu.Lock()
	r.exit = exitcode.Worse(r.exit, exitcode.Of(o))
	r.mu.Unlock()
}

// SetExit sets the exit status (fsck's follow fsck(8), not Outcome).
func (r *Run) SetExit(code int) {
	r.mu.Lock()
	r.exit = code
	r.mu.Unlock()
}

// Exit is the exit status the command would return (docs/design.md#cli).
func (r *Run) Exit() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exit
}

// Ack is something an operation reported as done.
type Ack struct {
	// Record is the record version reported (a claimed, renewed, released
	// or completed lease), nil for a table creation.
	Record *leasefmt.Record
	// Published and PublishedData name a file complete --publish reported
	// as published, and its bytes.
	Published     string
	PublishedData []byte
	// PublishedFiles are the files of a directory result reported as
	// published, by path below public/ (a whole staging directory as
	// ID/..., a directory NAME as NAME/...).
	PublishedFiles map[string][]byte
	// Table is set when the operation reported the table created.
	Table *leasefmt.Table
	// Queued is an ID lease add reported added to the queue.
	Queued leasefmt.ID
	// Op names the operation, for messages.
	Op string
	// call is the number of calls made when it was reported, at is the
	// store's clock then.
	call int
	at   float64
}

// BestEffort runs fn, whose calls are best-effort cleanup after the
// operation reported (the removal of a failed item's queue entry, under
// its lock): a fault in them need not change the exit status.
func (r *Run) BestEffort(fn func()) {
	r.mu.Lock()
	r.cleanup = true
	r.mu.Unlock()
	fn()
	r.mu.Lock()
	r.cleanup = false
	r.mu.Unlock()
}

// inCleanup reports whether the calls made now are best-effort cleanup.
func (r *Run) inCleanup() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cleanup
}

// At is the run's store read at the clock now, which is also the time the
// acknowledgements that follow are reported at: how a scenario runs an
// operation at a given time.
func (r *Run) At(now float64) *commit.Store {
	r.mu.Lock()
	r.now, r.fixed = now, true
	r.mu.Unlock()
	return r.Store.At(now)
}

// Ack records a as reported now: at the clock of the last At, else the
// store's.
func (r *Run) Ack(a Ack) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.call = r.calls()
	switch {
	case r.fixed:
		a.at = r.now
	case r.Store != nil:
		a.at = r.Store.Now()
	}
	r.acks = append(r.acks, a)
}

// AckResults acknowledges every OK result of a batch.
func (r *Run) AckResults(op string, res []commit.Result) {
	for _, x := range res {
		r.Outcome(x.Outcome)
		if x.Outcome == commit.OK {
			r.Ack(Ack{Op: op, Record: x.Record})
		}
	}
}

// Repairer repairs a crashed table through fsys at now, as `lease fsck
// --repair` would; check is the read-only run that must then find nothing.
type Repairer interface {
	Repair(fsys seam.FS, now float64) error
	Check(fsys seam.FS, now float64) (errs int, err error)
}

// Explorer runs scenarios and checks every crash state.
type Explorer struct {
	// Repair is fsck; nil checks the crash states as they are, with no
	// repair (the minimal check).
	Repair Repairer
	// Budget bounds the states built per crash point.
	Budget int
	// Seed drives sampling.
	Seed uint64
	// ClaimAfter: in one crash state out of ClaimAfter (by hash), claim
	// every ID the operation touched at a far future time after recovery
	// and check the tokens; 0 never. It costs a batch per state.
	ClaimAfter int
	// GoOn: instead of the crash states, the state a kill of the process
	// leaves after every call (Recorder.Killed) is checked as the
	// campaign goes on from it without a repair (checker.goOn): a claim
	// from the queue and of every ID by name long after every lease
	// expired, the items granted completed; the summary must then count
	// what the records say and fsck without a repair find no error. It
	// needs Repair (its Check).
	GoOn bool
	// Wrap, when set, wraps the recording FS the operation runs on (tests
	// of the explorer break the protocol with it).
	Wrap func(seam.FS) seam.FS
	// Points, when > 0 and the operation made more calls, crashes after
	// about Points call prefixes spread evenly over them (the empty prefix
	// and the whole operation always) instead of after every prefix: the
	// sample's bound on its biggest scenarios (make test; see
	// sampleBudget in crash_test.go). 0: every prefix.
	Points int
}

// Result sums an exploration.
type Result struct {
	Scenario    string
	Calls       int // calls the operation made
	CrashPoints int // call prefixes crashed after
	States      int // distinct crash states checked
	Checked     int // crash states checked, duplicates across prefixes included
	Acks        int
	Violations  []string
}

// Base builds the starting state of sc.
func Base(sc *Scenario) (*Tree, error) {
	rec := NewRecorder(nil)
	if sc.Table == nil {
		return rec.Snapshot(), nil
	}
	st, err := commit.Open(Root, commit.Options{FS: rec, Create: sc.Table, Writers: 1})
	if err != nil {
		return nil, err
	}
	if sc.Setup != nil {
		if err := sc.Setup(st, rec); err != nil {
			return nil, fmt.Errorf("setup of %s: %w", sc.Name, err)
		}
	}
	t := rec.Snapshot()
	if sc.Damage != nil {
		t = sc.Damage(st, t)
	}
	return t, nil
}

// Record runs sc over a Recorder on its starting state and returns it.
func Record(sc *Scenario, fsys func(*Recorder) seam.FS) (*Run, *Tree, error) {
	base, err := Base(sc)
	if err != nil {
		return nil, nil, err
	}
	rec := NewRecorder(base)
	if sc.Writers > 1 {
		rec.Yield = runtime.Gosched
	}
	var f seam.FS = rec
	if fsys != nil {
		f = fsys(rec)
	}
	run := &Run{FS: f, Rec: rec, calls: rec.NumCalls, state: rec.Snapshot}
	if err := run.start(sc); err != nil {
		return nil, nil, err
	}
	return run, base, nil
}

// start opens the store of a scenario that has a table, and runs it.
func (run *Run) start(sc *Scenario) error {
	if sc.Wrap != nil {
		run.FS = sc.Wrap(run.FS)
	}
	f := run.FS
	if sc.Table != nil && !sc.NoStore {
		opts := commit.Options{FS: f, Writers: max(sc.Writers, 1), Retry: Retry}
		if sc.Syncfs {
			opts.Sync, opts.SyncfsChunk = new(durable.Syncfs), sc.SyncfsChunk
		}
		if sc.Clock != nil {
			calls := run.calls
			opts.Clock = func() float64 { return sc.Clock(calls()) }
		}
		st, err := commit.Open(Root, opts)
		if err != nil {
			run.Outcome(commit.IOError) // the commands exit 4 when the table cannot be read
			return fmt.Errorf("open %s: %w", sc.Name, err)
		}
		run.Store = st
	}
	sc.Run(run)
	return nil
}

// Explore records sc and checks every crash state of every call prefix.
func (x *Explorer) Explore(sc *Scenario) (*Result, error) {
	var wrap func(*Recorder) seam.FS
	if x.Wrap != nil {
		wrap = func(r *Recorder) seam.FS { return x.Wrap(r) }
	}
	run, base, err := Record(sc, wrap)
	if err != nil {
		return nil, err
	}
	res := &Result{Scenario: sc.Name, Calls: run.Rec.NumCalls(), Acks: len(run.acks)}
	chk := newChecker(x, sc, base, run.acks, run.Rec.Written(), run.Rec.Calls())
	budget := x.Budget
	if budget <= 0 {
		budget = 64
	}
	var (
		mu   sync.Mutex
		seen = map[[32]byte]bool{}
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				if x.GoOn && x.Repair != nil {
					vs := chk.goOn(run.Rec.Killed(c))
					mu.Lock()
					res.States++
					for _, v := range vs {
						res.Violations = append(res.Violations, fmt.Sprintf("%s: killed after call %d/%d (%s): %s", sc.Name, c, res.Calls, chk.callName(c), v))
					}
					mu.Unlock()
					continue
				}
				rng := rand.New(rand.NewPCG(x.Seed, uint64(c)))
				for _, t := range run.Rec.CrashStates(c, budget, rng) {
					h := t.Hash()
					mu.Lock()
					res.Checked++
					dup := seen[h]
					if !dup {
						seen[h] = true
						res.States++
					}
					mu.Unlock()
					// The same state after a later prefix differs only by the
					// acks made since: check it again only when there are new ones.
					if dup && !chk.acksAt(c) {
						continue
					}
					vs := chk.check(t, c, x.ClaimAfter > 0 && int(h[0])%x.ClaimAfter == 0)
					mu.Lock()
					for _, v := range vs {
						res.Violations = append(res.Violations, fmt.Sprintf("%s: crash after call %d/%d (%s): %s", sc.Name, c, res.Calls, chk.callName(c), v))
					}
					mu.Unlock()
				}
			}
		}()
	}
	stride := 1
	if x.Points > 0 && res.Calls > x.Points {
		stride = (res.Calls + x.Points - 1) / x.Points
	}
	for c := 0; c <= res.Calls; c++ {
		if c%stride != 0 && c != res.Calls {
			continue
		}
		res.CrashPoints++
		next <- c
	}
	close(next)
	wg.Wait()
	sort.Strings(res.Violations)
	return res, nil
}

// isNotExist is errors.Is(err, fs.ErrNotExist).
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
