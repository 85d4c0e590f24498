package commands

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/cluster"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/config"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/mpi"
)

// batchSpec describes a batch command so that runBatch can run it in one
// process or, under mpirun, as one program across ranks (docs/design.md#mpi,
// package cluster).
type batchSpec struct {
	name string
	kind leasefmt.Kind
	// spread: under mpirun, rank r takes the items of the shards s with
	// s % size == r; otherwise rank 0 takes them all (claim --first).
	spread bool
	// input reads and validates the whole input (rank 0 only).
	input func(c *cli.Context) ([]commit.Item, error)
	// run applies the command to this rank's items.
	run func(e *env, st *commit.Store, items []commit.Item) []commit.Result
	// before, when set, is told the number of distinct IDs of the input
	// once the table is open, before anything is written (rank 0 only;
	// lease add's warning).
	before func(e *env, st *commit.Store, distinct int)
	// stream, when set, runs the batch in chunks from a spool of its
	// input (stream.go), except under mpirun.
	stream *streamSpec
	reportOpts
}

// runBatch runs a batch command: reads the input, opens the table, runs
// and reports; under mpirun as one program across the ranks.
func runBatch(c *cli.Context, spec batchSpec) error {
	if launch().Distributed() {
		return runDistributed(c, spec)
	}
	if spec.stream != nil {
		return runStream(c, spec, *spec.stream)
	}
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	items, err := spec.input(c)
	if err != nil {
		return err
	}
	st, err := e.open(false)
	if err != nil {
		return err
	}
	if spec.before != nil {
		spec.before(e, st, distinctIDs(items))
	}
	flush := bufferedOutput(c, e)
	res := spec.run(e, st, items)
	reported := e.reportWith(spec.name, res, e.snapshot(st), spec.reportOpts)
	if err := flush(); err != nil {
		return err
	}
	return reported
}

// exitOf is the exit status err calls for: its own, 2 for ranks that see
// different tables (a usage error of the job), else 1.
func exitOf(err error) int {
	if errors.Is(err, cluster.ErrOtherTable) {
		return exitcode.Usage
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	var ce *cluster.Error
	if errors.As(err, &ce) && ce.Code != 0 {
		return ce.Code
	}
	if err != nil {
		return exitcode.Negative
	}
	return exitcode.OK
}

// joinWorld starts MPI for a command run across ranks; the settings error,
// if any, is agreed on by every rank once the world is up.
func joinWorld(c *cli.Context) (*env, *mpi.World, error, error) {
	e, setErr := newEnv(c)
	timeout := time.Duration(config.DefaultMPITimeout * float64(time.Second))
	if setErr == nil {
		timeout = seconds(e.set.MPITimeout)
	}
	w, err := mpi.Init(timeout)
	if err != nil {
		return nil, nil, nil, cli.Exit(leasefmt.Bound(err.Error()), exitcode.IO) // mpi's errors say "mpi:"
	}
	if w.Rank() != 0 && e != nil {
		e.out, e.errw = discard{}, discard{}
	}
	return e, w, setErr, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// ranked turns an error of a step across ranks into the command's: an
// agreed error keeps the status it called for, a failed collective exits
// 4. Rank 0 says it; every other rank exits with the status, silently.
// An agreed error is said before any rank exits (cluster.Say): every rank
// has it, so every rank can wait for rank 0 to have written it.
func ranked(c *cli.Context, w *mpi.World, err error) error {
	if err == nil {
		return nil
	}
	code, msg := exitcode.IO, err.Error() // a collective's error says "mpi:"
	var ce *cluster.Error
	if errors.As(err, &ce) {
		cluster.Say(w, c.App.ErrWriter, exitLine(c, ce.Error()))
		return cli.Exit("", ce.Code)
	}
	if w.Rank() != 0 {
		msg = ""
	}
	return cli.Exit(leasefmt.Bound(msg), code)
}

// exitLine is the line Run prints for an action's error msg.
func exitLine(c *cli.Context, msg string) string {
	return leasefmt.Bound(commandName(c) + ": " + leasefmt.Bound(msg))
}

// sayFirst writes the message of rank 0's final error err now and returns
// err without it, with its status: the collective that agrees on the exit
// status comes next, so no rank exits before the message was written
// (the launcher would kill rank 0 before it printed the reason).
func sayFirst(c *cli.Context, w *mpi.World, err error) error {
	if err == nil || w.Rank() != 0 {
		return err
	}
	msg, code := err.Error(), 1
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	}
	if msg == "" {
		return err
	}
	fmt.Fprintln(c.App.ErrWriter, exitLine(c, msg))
	return cli.Exit("", code)
}

// runDistributed runs a batch as one program across the ranks of an
// mpirun job (docs/design.md#mpi): rank 0 reads the input, every rank opens the
// table (the same one), the batch runs split by shard, and rank 0 prints
// exactly what one process would print; every rank exits with the status
// rank 0 reported.
func runDistributed(c *cli.Context, spec batchSpec) error {
	e, w, setErr, err := joinWorld(c)
	if err != nil {
		return err
	}
	defer w.Finalize()
	if err := cluster.Agree(w, setErr, exitOf); err != nil {
		return ranked(c, w, err)
	}
	var items []commit.Item
	var inErr error
	if w.Rank() == 0 {
		items, inErr = spec.input(c)
	}
	if err := cluster.Agree(w, inErr, exitOf); err != nil {
		return ranked(c, w, err)
	}
	sess, err := cluster.Open(w, func() (*commit.Store, error) { return e.open(false) }, exitOf)
	if err != nil {
		return ranked(c, w, err)
	}
	if spec.before != nil && w.Rank() == 0 {
		spec.before(e, sess.Store, distinctIDs(items))
	}
	res, err := sess.Batch(e.ctx(), cluster.Batch{Kind: spec.kind, Spread: spec.spread, Records: e.json,
		Run: func(_ context.Context, mine []commit.Item) []commit.Result { return spec.run(e, sess.Store, mine) }}, items)
	if err != nil {
		return ranked(c, w, err)
	}
	var reported error
	if w.Rank() == 0 {
		flush := bufferedOutput(c, e)
		reported = e.reportWith(spec.name, res, sess.Stats(time.Since(e.started)), spec.reportOpts)
		if err := flush(); err != nil {
			reported = err
		}
	}
	reported = sayFirst(c, w, reported)
	code, err := sess.Exit(exitOf(reported))
	if err != nil {
		return ranked(c, w, err)
	}
	if w.Rank() == 0 {
		return reported
	}
	if code != exitcode.OK {
		return cli.Exit("", code)
	}
	return nil
}

// distinctIDs is the number of distinct IDs of items.
func distinctIDs(items []commit.Item) int {
	ids := make(map[leasefmt.ID]bool, len(items))
	for _, it := range items {
		ids[it.ID] = true
	}
	return len(ids)
}
