package commands

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/mpi"
)

// batchSpec describes a batch command so that runBatch can run it in one
// process or, under mpirun, as one program across ranks (SPEC §8).
type batchSpec struct {
	name string
	kind leasefmt.Kind
	// create: the command creates the table on first use.
	create bool
	// spread: under mpirun, rank r takes the items of the shards s with
	// s % size == r; otherwise rank 0 takes them all (claim --first).
	spread bool
	// input reads and validates the whole input (rank 0 only).
	input func(c *cli.Context) ([]commit.Item, error)
	// run applies the command to this rank's items.
	run func(e *env, st *commit.Store, items []commit.Item) []commit.Result
	// exit, when set, turns the merged results into the exit error.
	exit func(res []commit.Result, reported error) error
}

// refuseUnderLauncher is the error of a binary without MPI support that
// finds itself started as several ranks.
func refuseUnderLauncher() error {
	if size, _, ok := mpi.Launched(); ok && size > 1 && !mpi.Compiled {
		return usageErr("started by mpirun as %d ranks, but this lease was built without MPI support: build it with `make` (Open MPI installed: apt-get install openmpi-bin libopenmpi-dev) or `go build -tags mpi`", size)
	}
	return nil
}

// runBatch runs a batch command. Without a launcher it reads the input,
// opens the table, runs and reports. Under mpirun every step is a
// collective and every error a value carried through it: rank 0 reads the
// input and broadcasts it, each rank renews its shards, results are
// gathered to rank 0, which prints exactly what one process would print,
// and every rank exits with the status rank 0 agreed.
func runBatch(c *cli.Context, spec batchSpec) error {
	if err := refuseUnderLauncher(); err != nil {
		return err
	}
	if size, _, ok := mpi.Launched(); !ok || size <= 1 {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		items, err := spec.input(c)
		if err != nil {
			return err
		}
		st, err := e.open(spec.create)
		if err != nil {
			return err
		}
		res := spec.run(e, st, items)
		return spec.finish(res, e.report(spec.name, res, e.snapshot(st)))
	}
	return runDistributed(c, spec)
}

func (spec batchSpec) finish(res []commit.Result, reported error) error {
	if spec.exit != nil {
		return spec.exit(res, reported)
	}
	return reported
}

// wire forms of what ranks exchange.
type wireInput struct {
	Items []commit.Item `json:"items"`
	Err   string        `json:"err,omitempty"`
	Code  int           `json:"code,omitempty"`
}

type wireResult struct {
	I int            `json:"i"`
	O commit.Outcome `json:"o"`
	T int64          `json:"t,omitempty"`
	D string         `json:"d,omitempty"`
	P string         `json:"p"`
	L int64          `json:"l,omitempty"`
	R string         `json:"r,omitempty"`
}

type wireRank struct {
	Results []wireResult    `json:"results"`
	Stats   commit.Snapshot `json:"stats"`
	Lat     []float64       `json:"lat"`
}

type wireErr struct {
	Err  string `json:"err,omitempty"`
	Code int    `json:"code,omitempty"`
}

func errValue(err error) wireErr {
	if err == nil {
		return wireErr{}
	}
	code := 1
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	}
	return wireErr{Err: err.Error(), Code: code}
}

// agree makes every rank see the same error: the first failing rank's,
// named with its rank and host.
func agree(w *mpi.World, err error, coll *time.Duration) (wireErr, error) {
	mine, _ := json.Marshal(errValue(err))
	t := time.Now()
	all, cerr := w.AllGather(mine)
	*coll += time.Since(t)
	if cerr != nil {
		return wireErr{}, cerr
	}
	for r, b := range all {
		var we wireErr
		if json.Unmarshal(b, &we) != nil {
			return wireErr{Err: fmt.Sprintf("rank %d sent a malformed message", r), Code: 4}, nil
		}
		if we.Code != 0 {
			if we.Err == "" {
				we.Err = "failed"
			}
			if w.Size() > 1 {
				we.Err = fmt.Sprintf("rank %d of %d: %s", r, w.Size(), we.Err)
			}
			return we, nil
		}
	}
	return wireErr{}, nil
}

func runDistributed(c *cli.Context, spec batchSpec) (result error) {
	e, setErr := newEnv(c)
	timeout := time.Duration(defaultMPITimeout) * time.Second
	if setErr == nil {
		timeout = time.Duration(e.set.MPITimeout * float64(time.Second))
	}
	w, err := mpi.Init(timeout)
	if err != nil {
		return cli.Exit(leasefmt.Bound(fmt.Sprintf("mpi: %v", err)), 4)
	}
	defer w.Finalize()
	var coll time.Duration
	rank0 := w.Rank() == 0
	// Only rank 0 speaks; the others exit with the agreed status.
	quiet := func(err error) error {
		if err == nil || rank0 {
			return err
		}
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			return cli.Exit("", ec.ExitCode())
		}
		return cli.Exit("", 1)
	}
	if !rank0 && e != nil {
		e.out, e.errw = io.Discard, io.Discard
	}
	if we, err := agree(w, setErr, &coll); err != nil || we.Code != 0 {
		return quiet(agreedErr(we, err))
	}
	// Rank 0 reads and validates the whole input, then broadcasts it.
	var in wireInput
	if rank0 {
		items, err := spec.input(c)
		if err != nil {
			we := errValue(err)
			in.Err, in.Code = we.Err, we.Code
		}
		in.Items = items
	}
	payload, _ := json.Marshal(in)
	t := time.Now()
	payload, err = w.Bcast(0, payload)
	coll += time.Since(t)
	if err != nil {
		return quiet(cli.Exit(leasefmt.Bound(err.Error()), 4))
	}
	if err := json.Unmarshal(payload, &in); err != nil {
		return quiet(cli.Exit("mpi: malformed input broadcast", 4))
	}
	if in.Code != 0 {
		return quiet(cli.Exit(in.Err, in.Code))
	}
	// Every rank opens the table; a rank that cannot fails them all.
	st, openErr := e.open(spec.create)
	if we, err := agree(w, openErr, &coll); err != nil || we.Code != 0 {
		return quiet(agreedErr(we, err))
	}
	mine := in.Items
	index := make([]int, 0, len(in.Items))
	if spec.spread {
		mine = nil
		n := st.Table.Shards(spec.kind)
		for i, it := range in.Items {
			if it.ID.Shard(n)%w.Size() == w.Rank() {
				mine = append(mine, it)
				index = append(index, i)
			}
		}
	} else if !rank0 {
		mine = nil
	} else {
		for i := range in.Items {
			index = append(index, i)
		}
	}
	var res []commit.Result
	if len(mine) > 0 {
		res = spec.run(e, st, mine)
	}
	snap := e.snapshot(st)
	out := wireRank{Stats: snap, Lat: snap.Latencies}
	for j, r := range res {
		i := j
		if j < len(index) {
			i = index[j]
		}
		wr := wireResult{I: i, O: r.Outcome, T: r.Token, D: r.Detail, P: r.Path, L: int64(r.Latency)}
		if r.Record != nil {
			if b, err := leasefmt.Encode(r.Record); err == nil {
				wr.R = string(b)
			}
		}
		out.Results = append(out.Results, wr)
	}
	b, _ := json.Marshal(out)
	t = time.Now()
	parts, err := w.Gather(0, b)
	coll += time.Since(t)
	if err != nil {
		return quiet(cli.Exit(leasefmt.Bound(err.Error()), 4))
	}
	code := 0
	var reported error
	if rank0 {
		merged := make([]commit.Result, len(in.Items))
		filled := make([]bool, len(in.Items))
		var total commit.Snapshot
		for r, p := range parts {
			var wr wireRank
			if err := json.Unmarshal(p, &wr); err != nil {
				return cli.Exit(fmt.Sprintf("mpi: rank %d sent malformed results", r), 4)
			}
			wr.Stats.Latencies = wr.Lat
			if r == 0 {
				total = wr.Stats
			} else {
				total.Add(wr.Stats)
			}
			for _, x := range wr.Results {
				if x.I < 0 || x.I >= len(merged) {
					continue
				}
				it := in.Items[x.I]
				m := commit.Result{Item: it, Outcome: x.O, Token: x.T, Detail: x.D, Path: x.P, Latency: time.Duration(x.L)}
				if x.R != "" {
					m.Record, _ = leasefmt.Decode([]byte(x.R), spec.kind, it.ID)
				}
				merged[x.I], filled[x.I] = m, true
			}
		}
		// G6 across ranks: an I/O error on any rank fails the whole batch.
		var ioErr string
		for i := range merged {
			if !filled[i] && spec.spread {
				merged[i] = commit.Result{Item: in.Items[i], Outcome: commit.IOError, Detail: "no rank reported this item"}
			}
			if merged[i].Outcome == commit.IOError && ioErr == "" {
				ioErr = merged[i].Detail
			}
		}
		if !spec.spread { // rank 0 ran a prefix of the input (claim --first)
			kept := merged[:0]
			for i := range merged {
				if filled[i] {
					kept = append(kept, merged[i])
				}
			}
			merged = kept
		}
		if ioErr != "" {
			for i := range merged {
				if merged[i].Outcome == commit.OK {
					merged[i].Outcome, merged[i].Detail = commit.IOError, "batch failed on another rank, not renewed: "+ioErr
				}
			}
		}
		total.Ranks = w.Size()
		total.CollectiveS = coll.Seconds()
		reported = spec.finish(merged, e.report(spec.name, merged, total))
		var ec cli.ExitCoder
		if errors.As(reported, &ec) {
			code = ec.ExitCode()
		}
	}
	cb, _ := json.Marshal(code)
	agreed, err := w.Bcast(0, cb)
	if err != nil {
		return quiet(cli.Exit(leasefmt.Bound(err.Error()), 4))
	}
	if rank0 {
		return reported
	}
	json.Unmarshal(agreed, &code)
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

func agreedErr(we wireErr, err error) error {
	if err != nil {
		return cli.Exit(leasefmt.Bound("mpi: "+err.Error()), 4)
	}
	return cli.Exit(leasefmt.Bound(we.Err), we.Code)
}
