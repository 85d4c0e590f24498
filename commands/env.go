package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/config"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/internal/worker"
	"github.com/leasetool/lease/leasefmt"
)

// getenv is os.Getenv, replaced in tests.
var getenv = os.Getenv

// usageErr is an error that exits 2: usage, configuration or input.
func usageErr(format string, args ...any) error {
	return cli.Exit(leasefmt.Bound(fmt.Sprintf(format, args...)), exitcode.Usage)
}

// env is what an action works with: its settings, its clock and its output.
type env struct {
	// share is lease init --shared: how the table it creates is shared.
	share *seam.Sharing
	// extra are the keys lease init records in a TABLE it creates
	// besides the shard counts (see guard.go).
	extra []leasefmt.Field
	// warned: the warning of a table on an unsafe filesystem was given.
	warned  bool
	c       *cli.Context
	set     *config.Settings
	now     float64
	json    bool
	verbose bool
	out     io.Writer
	errw    io.Writer
	started time.Time
}

func newEnv(c *cli.Context) (*env, error) {
	set, err := config.Load(c, getenv)
	if err != nil {
		return nil, cli.Exit(err.Error(), exitcode.Usage)
	}
	e := &env{c: c, set: set, json: c.Bool("json"), verbose: c.Bool("verbose"),
		out: c.App.Writer, errw: c.App.ErrWriter, started: time.Now()}
	if c.IsSet("now") {
		e.now = c.Float64("now")
		if err := leasefmt.CheckTime("--now", e.now); err != nil {
			return nil, usageErr("%v", err)
		}
	} else {
		e.now = leasefmt.Now()
	}
	return e, nil
}

// ctx is the context of the command's engine calls: what bounds their lock
// waits and retries beyond the lock timeout (the command line's own,
// c.Context, which no signal cancels unless the command says so).
func (e *env) ctx() context.Context {
	if e.c != nil && e.c.Context != nil {
		return e.c.Context
	}
	return context.Background()
}

// clock is the time now: the --now clock when given, else the system's.
func (e *env) clock() float64 {
	if e.c.IsSet("now") {
		return e.now
	}
	return leasefmt.Now()
}

// storeClock is the clock a store reads under each record's lock.
func (e *env) storeClock() func() float64 {
	if e.c.IsSet("now") {
		return func() float64 { return e.now }
	}
	return leasefmt.Now
}

// renewTTL is the duration a renewal gives: --ttl (or LEASE_TTL) when
// given, else 0, which keeps each lease's own duration (docs/design.md#clocks).
func (e *env) renewTTL() float64 {
	if e.set.FromCommandLine("ttl") {
		return e.set.TTL
	}
	return 0
}

// timing is how a holder of this command keeps its leases and bounds
// their finish (worker.NewTiming: the renewal interval was checked, or
// derived from the ttl, by config).
func (e *env) timing() worker.Timing {
	t, _ := worker.NewTiming(e.set.TTL, e.renewTTL(), e.set.RenewInterval, e.set.Grace, e.set.ClockSkew, e.set.LockTimeout)
	return t
}

// root is the absolute table root.
func (e *env) root() string {
	r, err := filepath.Abs(e.set.Root)
	if err != nil {
		return e.set.Root
	}
	return r
}

// open opens the table. Only lease init creates one (create): every other
// command refuses a root without TABLE and creates nothing there (docs/design.md#layout),
// so a mistyped root or an unset LEASE_ROOT never starts a second campaign.
// Its lock waits are bounded by lock_timeout.
func (e *env) open(create bool) (*commit.Store, error) {
	return e.openWaiting(create, time.Duration(e.set.LockTimeout*float64(time.Second)))
}

// openWaiting is open with every lock wait bounded by lockWait (0: one
// try) instead of lock_timeout.
func (e *env) openWaiting(create bool, lockWait time.Duration) (*commit.Store, error) {
	root := e.root()
	if create {
		if err := durable.MkdirRoot(root); err != nil {
			if isAccess(err) {
				return nil, e.accessError(e.c.Command.Name, accessPath(err, root), err, true)
			}
			return nil, cli.Exit(leasefmt.Bound(fmt.Sprintf("table root %s: %v", root, err)), exitcode.IO)
		}
	}
	var tmpl *leasefmt.Table
	if create {
		tmpl = &leasefmt.Table{WorkShards: e.set.Shards, TargetShards: e.set.TargetShards, CreatedAt: e.now, Extra: e.extra}
	}
	g, writers := e.guard(root)
	if lockWait <= 0 {
		lockWait = -1 // one try (commit.Options: 0 is the default)
	}
	st, err := commit.Open(root, commit.Options{Create: tmpl, Share: e.share, Wrap: wrapFS, LockTimeout: lockWait,
		Writers: writers, Clock: e.storeClock(), MoreProcs: moreProcs, ClockSkew: e.set.ClockSkew, Sync: &e.set.Sync})
	var rootErr *commit.RootError
	var shareErr *commit.ShareRootError
	switch {
	case err == nil:
		if o, ok := e.c.App.Metadata[storesKey].(*openedStores); ok {
			o.add(st) // closed when Run returns
		}
	case errors.As(err, &rootErr):
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, noTable(root)
		}
		if isAccess(err) {
			return nil, e.accessError(e.c.Command.Name, root, rootErr.Err, false)
		}
		return nil, cli.Exit(leasefmt.Bound(fmt.Sprintf("table root %s: %v", root, rootErr.Err)), exitcode.IO)
	case errors.As(err, &shareErr):
		return nil, shareRootError(root, shareErr.Err)
	case errors.Is(err, commit.ErrNoTable):
		return nil, noTable(root)
	case errors.Is(err, leasefmt.ErrCorrupt):
		return nil, cli.Exit(leasefmt.Bound(fmt.Sprintf("%v (lease fsck checks the table)", err)), exitcode.Corrupt)
	case isAccess(err):
		return nil, e.accessError(e.c.Command.Name, accessPath(err, root), err, create)
	default:
		return nil, cli.Exit(leasefmt.Bound(err.Error()), exitcode.IO)
	}
	var work, target int
	if e.set.Explicit("shards") {
		work = e.set.Shards
	}
	if e.set.Explicit("target_shards") {
		target = e.set.TargetShards
	}
	if sh := st.Sharing(); e.share != nil && (sh == nil || sh.Name != e.share.Name) {
		st.Close()
		has := "is not shared"
		if sh != nil {
			has = "is shared as " + leasefmt.Quote(sh.Name)
		}
		return nil, usageErr("--shared %s: the table at %s %s (the sharing is fixed when the table is created; lease fsck --repair puts the modes of a shared table right)", e.share.Name, root, has)
	}
	if err := st.CheckShardsFrom(work, e.set.Origin("shards"), target, e.set.Origin("target_shards")); err != nil {
		st.Close()
		return nil, usageErr("%v", err)
	}
	e.warnUnsafe(g, st.Table())
	return st, nil
}

// wrapFS, when set, wraps the filesystem of every table a command opens:
// the seam through which tests inject faults (a read-only or full
// filesystem) and kill a process at an exact call, and through which
// bench/leasebench runs the seed's commit strategies (bench/strategy).
// The lease binary never sets it.
var wrapFS func(seam.FS) seam.FS

// SetWrapFS sets the filesystem seam of every table opened from now on
// (nil removes it) and returns a function that puts the old one back: for
// tests and for the benchmark binary of bench/, which wrap the filesystem;
// the lease command itself never calls it.
func SetWrapFS(w func(seam.FS) seam.FS) func() {
	old := wrapFS
	wrapFS = w
	return func() { wrapFS = old }
}

// noTable is the error of a command run where no table is (docs/design.md#layout).
func noTable(root string) error {
	return usageErr("no lease table at %s: create it with lease init (or name the table with --root or LEASE_ROOT)", root)
}

// snapshot returns the store's statistics so far.
func (e *env) snapshot(st *commit.Store) commit.Snapshot {
	return st.Stats().Snapshot(time.Since(e.started))
}

// remainingS is the time left on r at now, never negative.
func remainingS(r *leasefmt.Record, now float64) float64 {
	return math.Max(0, r.ExpiresAt-now)
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// shareRootError is the error of a root whose mode lease init --shared
// cannot set (a root another account owns).
func shareRootError(root string, err error) error {
	if isAccess(err) {
		return usageErr("--shared: cannot make %s group-writable and setgid (%v): only its owner can; make the table in a directory of your own", root, err)
	}
	return cli.Exit(leasefmt.Bound(fmt.Sprintf("--shared: %s: %v", root, err)), exitcode.IO)
}
