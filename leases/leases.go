// Package leases is the Go API to a lease table: what a fuzzing harness
// written in Go uses instead of running the lease command. It opens the
// same tables, with the same records, locks and durability (docs/design.md),
// so Go programs, the lease command and other programs can share one
// table.
//
// A worker claims items and gets a fencing token for each ([Table.Claim]),
// keeps them alive ([Table.Renew], or [Table.KeepAlive] for one lease while
// its work runs), publishes results only while its token is current
// ([Table.Stage], [Table.Publish]) and completes or releases them
// ([Table.Complete], [Table.Release]). Every call that takes several leases
// is one group commit: N records in K shard directories cost N file fsyncs
// and K directory fsyncs.
//
// A campaign uses the table's queue: [Table.AddContent] (or [Table.Add],
// [Table.AddFiles]) enqueues the items with their input, [Table.ClaimNext]
// claims the next free one ([ErrEmpty], [ErrBusy] when there is none), and
// [Table.Work] is the whole worker of lease work: it claims, keeps the
// lease alive while a function runs, publishes what the function staged
// as public/ID/, counts an attempt when it fails (failed at max_attempts)
// and goes on until the queue is empty. IDs are the SHA-256 of an item's
// content ([IDOf], [IDOfFile]), as lease id makes them.
//
// Results carry an error ([Result.Err]) that wraps one of the sentinels
// below and names the record's path:
//
//	if err := res.Err(); errors.Is(err, leases.ErrHeld) { ... }
//
// Every call that can wait (for a record's lock, or while a transient
// error of a network filesystem is retried) waits at most the lock timeout
// (WithLockTimeout) and no longer than its context: a context done before
// the call is its error, and one that ends during it ends the waits: the
// lease waited for, and those not yet tried, are reported with an error
// wrapping ErrLockTimeout and the context's error.
//
// The package never changes GOMAXPROCS and never exits; exit statuses are
// the command line's.
package leases

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/config"
	"github.com/leasetool/lease/keepalive"
	"github.com/leasetool/lease/leasefmt"
)

// The errors a Result wraps: why a lease was not granted, renewed,
// released, completed or verified.
var (
	// ErrStale: the token is not the record's current token (another claim
	// came since).
	ErrStale = commit.ErrStale
	// ErrExpired: the lease ran out (or counts as lost: within the clock
	// skew of its expiry).
	ErrExpired = commit.ErrExpired
	// ErrHeld: another holder has the lease.
	ErrHeld = commit.ErrHeld
	// ErrDone: the work is done.
	ErrDone = commit.ErrDone
	// ErrReleased: the lease was released (or revoked).
	ErrReleased = commit.ErrReleased
	// ErrFailed: the work failed max_attempts times; claims refuse it until
	// lease retry puts it back.
	ErrFailed = commit.ErrFailed
	// ErrMissing: the ID has no record.
	ErrMissing = commit.ErrMissing
	// ErrExists: a result of that name was already published.
	ErrExists = commit.ErrExists
	// ErrCorrupt: the record exists but does not validate; lease fsck
	// repairs it. It is never treated as free.
	ErrCorrupt = commit.ErrCorrupt
	// ErrLockTimeout: the record's lock was not granted in time.
	ErrLockTimeout = commit.ErrLockTimeout
	// ErrIO: the filesystem failed; nothing in flight was reported done.
	ErrIO = commit.ErrIO
	// ErrNoTable: Open found no table at the root (create one with Create
	// or lease init).
	ErrNoTable = commit.ErrNoTable
)

// Table is an open lease table. Its methods may be called from several
// goroutines at once.
type Table struct {
	st    *commit.Store
	owner string
	ttl   time.Duration
}

// Option configures Open and Create.
type Option interface{ apply(*options) }

type options struct {
	owner        string
	ttl          time.Duration
	lockTimeout  time.Duration
	clockSkew    time.Duration
	writers      int
	clock        func() time.Time
	workShards   int
	targetShards int
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithOwner names the holder written into the leases this table claims
// (default: USER@HOST/PID, with the rank of a launcher's task when one
// started the process, USER@HOST/rank-N/PID, as lease run and lease work
// name theirs).
func WithOwner(name string) Option { return optionFunc(func(o *options) { o.owner = name }) }

// WithTTL is the lease duration of claims when a call gives none (default
// 120 s).
func WithTTL(d time.Duration) Option { return optionFunc(func(o *options) { o.ttl = d }) }

// WithLockTimeout bounds every wait for a record's lock (default 10 s).
func WithLockTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.lockTimeout = d })
}

// WithClockSkew is the bound on the clock difference between the nodes
// sharing the table (default 1 s): a claim takes over an expired lease
// only from its expiry plus the skew, and a holder counts its lease lost
// from its expiry less the skew.
func WithClockSkew(d time.Duration) Option { return optionFunc(func(o *options) { o.clockSkew = d }) }

// WithWriters bounds the concurrent record writers of a call (default 64).
func WithWriters(n int) Option { return optionFunc(func(o *options) { o.writers = n }) }

// WithClock replaces the system clock (tests).
func WithClock(now func() time.Time) Option { return optionFunc(func(o *options) { o.clock = now }) }

// WithShards sets the shard counts of a table that Create makes (default
// 16 and 16); it is refused by Open and Create when an existing table has
// others.
func WithShards(work, targets int) Option {
	return optionFunc(func(o *options) { o.workShards, o.targetShards = work, targets })
}

func resolve(opts []Option) *options {
	o := &options{ttl: commit.DefaultTTL, lockTimeout: commit.DefaultLockTimeout, clockSkew: commit.DefaultClockSkew, writers: commit.DefaultWriters}
	for _, opt := range opts {
		opt.apply(o)
	}
	return o
}

// Open opens the table at root. A root without a table is ErrNoTable:
// Open never creates anything.
func Open(root string, opts ...Option) (*Table, error) {
	return open(root, resolve(opts), false)
}

// Create opens the table at root, creating it durably (root included)
// when there is none, with the shard counts of WithShards.
func Create(root string, opts ...Option) (*Table, error) {
	o := resolve(opts)
	if err := durable.MkdirRoot(root); err != nil {
		return nil, fmt.Errorf("create table root %s: %w", root, err)
	}
	return open(root, o, true)
}

func open(root string, o *options, create bool) (*Table, error) {
	if o.owner == "" {
		o.owner = defaultOwner()
	}
	if err := leasefmt.CheckOwner(o.owner); err != nil {
		return nil, err
	}
	if o.ttl <= o.clockSkew {
		return nil, fmt.Errorf("ttl %v must be more than the clock skew %v", o.ttl, o.clockSkew)
	}
	var tmpl *leasefmt.Table
	if create {
		tmpl = &leasefmt.Table{WorkShards: orDefault(o.workShards, commit.DefaultShards), TargetShards: orDefault(o.targetShards, commit.DefaultShards), CreatedAt: leasefmt.Now()}
	}
	opts := commit.Options{Create: tmpl, LockTimeout: o.lockTimeout, Writers: max(o.writers, 1), ClockSkew: o.clockSkew.Seconds()}
	if o.lockTimeout <= 0 {
		opts.LockTimeout = -1 // a timeout of 0: one try
	}
	if o.clock != nil {
		opts.Clock = func() float64 { return float64(o.clock().UnixMicro()) / 1e6 }
	}
	st, err := commit.Open(root, opts)
	if err != nil {
		var re *commit.RootError
		switch {
		case errors.Is(err, seam.ErrUnsupported):
			return nil, err
		case errors.As(err, &re) && !create:
			return nil, fmt.Errorf("%w at %s: %w", ErrNoTable, root, re.Err)
		case errors.As(err, &re):
			return nil, re.Err
		}
		return nil, err
	}
	if err := st.CheckShards(o.workShards, o.targetShards); err != nil {
		st.Close()
		return nil, err
	}
	return &Table{st: st, owner: o.owner, ttl: o.ttl}, nil
}

func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// Close releases the table's open directories and lock files.
func (t *Table) Close() error { return t.st.Close() }

// Root is the table's root directory.
func (t *Table) Root() string { return t.st.Root() }

// Lease is a lease held by this table's owner: an ID and its fencing token.
type Lease struct {
	ID    string
	Token int64
	// Expires is when the lease runs out, as last written (zero when not
	// known).
	Expires time.Time
}

// Result is the outcome of one lease of a call.
type Result struct {
	Lease
	// Path is the record's path.
	Path string
	err  error
}

// Err is nil when the lease was granted, renewed, released, completed,
// published or verified, else an error that wraps one of the package's
// sentinels (ErrHeld, ErrStale, ...) and names the record's path.
func (r Result) Err() error { return r.err }

func results(res []commit.Result) []Result {
	out := make([]Result, len(res))
	for i, r := range res {
		// A success holds the token granted or kept; a failure the token
		// asked about (0 for a claim), never another holder's.
		out[i] = Result{Lease: Lease{ID: string(r.ID), Token: r.Item.Token}, Path: r.Path, err: r.Err()}
		if r.Outcome == commit.OK {
			out[i].Token = r.Token
			if r.Record != nil {
				out[i].Expires = time.UnixMicro(int64(r.Record.ExpiresAt * 1e6))
			}
		}
	}
	return out
}

// items validates IDs (64 lowercase hex characters) before anything is
// touched.
func items(ids []string, tokens []int64) ([]commit.Item, error) {
	out := make([]commit.Item, len(ids))
	seen := make(map[leasefmt.ID]bool, len(ids))
	for i, s := range ids {
		id, err := leasefmt.ParseID(s)
		if err != nil {
			return nil, err
		}
		if seen[id] {
			return nil, fmt.Errorf("duplicate id %s", id)
		}
		seen[id] = true
		out[i] = commit.Item{ID: id}
		if tokens != nil {
			out[i].Token = tokens[i]
		}
	}
	return out, nil
}

func leaseItems(ls []Lease) ([]commit.Item, error) {
	ids := make([]string, len(ls))
	toks := make([]int64, len(ls))
	for i, l := range ls {
		ids[i], toks[i] = l.ID, l.Token
		if _, err := leasefmt.ParseToken(fmt.Sprint(l.Token)); err != nil {
			return nil, fmt.Errorf("%s: %w", l.ID, err)
		}
	}
	return items(ids, toks)
}

// call runs op, whose waits end with ctx (op passes it to the engine), unless
// ctx is done already.
func (t *Table) call(ctx context.Context, op func() []commit.Result) ([]Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return results(op()), nil
}

// Claim claims the IDs that are missing, released or expired, for ttl (0:
// the table's WithTTL), each with a token larger than any earlier claim of
// it; the results are in the order of ids. The error is for input that
// is refused before anything is touched (a bad ID, a duplicate) or a
// context already done.
func (t *Table) Claim(ctx context.Context, ttl time.Duration, ids ...string) ([]Result, error) {
	its, err := items(ids, nil)
	if err != nil {
		return nil, err
	}
	if ttl == 0 {
		ttl = t.ttl
	}
	return t.call(ctx, func() []commit.Result { return t.st.Claim(ctx, its, t.owner, ttl.Seconds()) })
}

// Renew renews leases for ttl from now, or with ttl 0 for each lease's own
// duration, as one group commit.
func (t *Table) Renew(ctx context.Context, ttl time.Duration, leases ...Lease) ([]Result, error) {
	its, err := leaseItems(leases)
	if err != nil {
		return nil, err
	}
	return t.call(ctx, func() []commit.Result { return t.st.Renew(ctx, its, ttl.Seconds()) })
}

// Release gives leases up: the next claim of each gets a larger token.
func (t *Table) Release(ctx context.Context, leases ...Lease) ([]Result, error) {
	its, err := leaseItems(leases)
	if err != nil {
		return nil, err
	}
	return t.call(ctx, func() []commit.Result { return t.st.Release(ctx, its) })
}

// Complete marks leases done (leased to done, durably, in one group commit),
// only while each token is current. Completing again with the token that
// completed it succeeds.
func (t *Table) Complete(ctx context.Context, leases ...Lease) ([]Result, error) {
	its, err := leaseItems(leases)
	if err != nil {
		return nil, err
	}
	return t.call(ctx, func() []commit.Result { return t.st.Complete(ctx, its) })
}

// Verify checks, without locks or writes, that each lease's token is
// current and live: the fencing check before a side effect.
func (t *Table) Verify(ctx context.Context, leases ...Lease) ([]Result, error) {
	its, err := leaseItems(leases)
	if err != nil {
		return nil, err
	}
	return t.call(ctx, func() []commit.Result { return t.st.Verify(ctx, its) })
}

// Stage returns the staging directory of l, made durably if needed: the
// only place from which Publish takes l's results.
func (t *Table) Stage(l Lease) (string, error) {
	its, err := leaseItems([]Lease{l})
	if err != nil {
		return "", err
	}
	return t.st.MakeStage(its[0].ID, its[0].Token)
}

// Publish completes l and publishes the file name of its staging
// directory as public/name, exactly once: only while l's token is current,
// never over an existing name, durably; a crash at any point is settled
// by the next claim or lease fsck.
func (t *Table) Publish(ctx context.Context, l Lease, name string) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	its, err := leaseItems([]Lease{l})
	if err != nil {
		return Result{}, err
	}
	r, err := t.st.CompletePublish(ctx, its[0], name)
	if errors.Is(err, commit.ErrStaged) {
		return Result{}, err
	}
	return results([]commit.Result{r})[0], nil
}

// ErrLost is wrapped by the error of KeepAlive when the lease is gone.
var ErrLost = errors.New("lease lost")

// KeepAlive keeps l alive while its work runs, by the rules of lease run
// (package keepalive): a renewal every interval, each for the lease's own
// duration; between renewals a read-only check of the record, at least
// every second, so that a lease released or revoked from outside (lease
// release, lease revoke) ends at once; each renewal waits for the
// record's lock no longer than the lease leaves (the WithLockTimeout, at
// most the lease's duration - interval - clock skew, never past its lost
// point). It returns nil when ctx is done, and otherwise when the lease
// ends: an error wrapping ErrLost and the cause when it is gone (a
// refusal: stale token, released, expired, missing; or failures that may
// pass, a lock timeout, an I/O error, a corrupt record, until it counts as
// lost at its expiry less the clock skew), or wrapping ErrDone when it
// was completed meanwhile. A lease whose Expires is zero is checked first
// to learn it. Run the work under a context that KeepAlive's return
// cancels; when it returns no renewal is in flight, so the lease may be
// released or completed at once.
func (t *Table) KeepAlive(ctx context.Context, l Lease, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("keep-alive interval %v: want more than 0", interval)
	}
	its, err := leaseItems([]Lease{l})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return nil
	}
	skew := time.Duration(t.st.ClockSkew() * float64(time.Second))
	cfg := keepalive.Config{Interval: interval, LockTimeout: t.st.LockTimeout(), ClockSkew: skew}
	var failed commit.Result // the last failure that might have passed
	end := keepalive.Keep(ctx, keepalive.Store(t.st), keepalive.Expiring(its[0], l.Expires, skew), cfg, func(r keepalive.Report) {
		if r.Event == keepalive.Retry {
			failed = r.Result
		}
	})
	switch {
	case end.Event == keepalive.Stopped:
		return nil
	case end.Event == keepalive.Done:
		return end.Result.Err()
	case end.Expired && end.Result.Outcome != commit.OK:
		return fmt.Errorf("%w: not renewed before it counted as lost: %w", ErrLost, end.Result.Err())
	case end.Expired && failed.Outcome != commit.OK:
		return fmt.Errorf("%w: not renewed before it counted as lost: %w", ErrLost, failed.Err())
	case end.Expired:
		return fmt.Errorf("%w: not renewed before it counted as lost", ErrLost)
	}
	return fmt.Errorf("%w: %w", ErrLost, end.Result.Err())
}

// defaultOwner is the command line's worker owner (config.WorkerOwner):
// the processes of one host are told apart in the records.
func defaultOwner() string { return config.WorkerOwner(os.Getenv) }
