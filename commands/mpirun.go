package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
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
	reportOpts
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
		return e.reportWith(spec.name, res, e.snapshot(st), spec.reportOpts)
	}
	return runDistributed(c, spec)
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
	// CollS is the time this rank spent in collectives before the gather
	// of the results completed.
	CollS float64 `json:"coll_s"`
	Host  string  `json:"host"`
}

type wireErr struct {
	Err  string `json:"err,omitempty"`
	Code int    `json:"code,omitempty"`
	Host string `json:"host,omitempty"`
	// Root and Table name the table this rank opened (see
	// tableIdentity).
	Root  string `json:"root,omitempty"`
	Table string `json:"table,omitempty"`
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
	msg := err.Error()
	if msg == "" {
		msg = "failed"
	}
	return wireErr{Err: msg, Code: code}
}

// agree makes every rank see the same error: the first failing rank's,
// named with its rank and host.
func agree(w *mpi.World, err error, coll *time.Duration) (wireErr, error) {
	_, we, cerr := exchange(w, errValue(err), coll)
	return we, cerr
}

// exchange gathers every rank's message on every rank and returns them
// with the agreed error (the first failing rank's, named with its rank and
// host); every rank computes the same answer from the same messages.
func exchange(w *mpi.World, mine wireErr, coll *time.Duration) ([]wireErr, wireErr, error) {
	mine.Host = w.Host()
	b, _ := json.Marshal(mine)
	t := time.Now()
	all, cerr := w.AllGather(b)
	*coll += time.Since(t)
	if cerr != nil {
		return nil, wireErr{}, cerr
	}
	msgs := make([]wireErr, len(all))
	for r, b := range all {
		if json.Unmarshal(b, &msgs[r]) != nil {
			return nil, wireErr{Err: fmt.Sprintf("rank %d of %d sent a malformed message", r, w.Size()), Code: 4}, nil
		}
	}
	for r, we := range msgs {
		if we.Code != 0 {
			if we.Err == "" {
				we.Err = "failed"
			}
			if w.Size() > 1 {
				we.Err = fmt.Sprintf("rank %d of %d (host %s): %s", r, w.Size(), leasefmt.Quote(we.Host), we.Err)
			}
			return msgs, we, nil
		}
	}
	return msgs, wireErr{}, nil
}

// tableIdentity names the table st opened so that ranks can check they
// all opened the same one: its header and the modification time of the
// TABLE file, which is written once and never changes, and which every
// client of a shared filesystem sees alike.
func tableIdentity(st *commit.Store) string {
	hdr, _ := leasefmt.EncodeTable(st.Table)
	id := string(bytes.TrimSpace(hdr))
	if fi, err := st.FS.Lstat(commit.TableFile); err == nil {
		id += fmt.Sprintf(" mtime=%d", fi.ModTime().UnixNano())
	}
	return id
}

// openAll opens the table on every rank. Rank 0 opens it first (and
// creates it if the command does); the other ranks then open it without
// creating it, so that a rank whose view of the root is missing fails
// instead of making a table of its own. Every rank must have opened the
// same table as rank 0.
func openAll(w *mpi.World, e *env, spec batchSpec, coll *time.Duration) (*commit.Store, wireErr, error) {
	var st *commit.Store
	var err error
	if w.Rank() == 0 {
		st, err = e.open(spec.create)
	}
	if we, cerr := agree(w, err, coll); cerr != nil || we.Code != 0 {
		return nil, we, cerr
	}
	var mine wireErr
	if w.Rank() != 0 {
		st, err = e.open(false)
		mine = errValue(err)
	}
	if st != nil {
		mine.Root, mine.Table = e.root(), tableIdentity(st)
	}
	msgs, we, cerr := exchange(w, mine, coll)
	if cerr != nil || we.Code != 0 {
		return nil, we, cerr
	}
	for r := 1; r < len(msgs); r++ {
		if msgs[r].Table != msgs[0].Table {
			return nil, wireErr{Code: 2, Err: leasefmt.Bound(fmt.Sprintf(
				"rank %d of %d (host %s) opened another table than rank 0 (host %s): %s holds %s, %s holds %s; every rank must see the same table",
				r, w.Size(), leasefmt.Quote(msgs[r].Host), leasefmt.Quote(msgs[0].Host),
				msgs[r].Root, msgs[r].Table, msgs[0].Root, msgs[0].Table))}, nil
		}
	}
	return st, wireErr{}, nil
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
	// A rank that cannot decode the input must not leave the others
	// waiting: the decode error is agreed like any other.
	var decodeErr error
	if err := json.Unmarshal(payload, &in); err != nil {
		decodeErr = cli.Exit(leasefmt.Bound(fmt.Sprintf("mpi: malformed input broadcast (%d bytes): %v", len(payload), err)), 4)
	}
	if we, err := agree(w, decodeErr, &coll); err != nil || we.Code != 0 {
		return quiet(agreedErr(we, err))
	}
	if in.Code != 0 {
		return quiet(cli.Exit(in.Err, in.Code))
	}
	// Every rank opens the table; a rank that cannot fails them all.
	st, we, err := openAll(w, e, spec, &coll)
	if err != nil || we.Code != 0 {
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
	out := wireRank{Stats: snap, Lat: snap.Latencies, CollS: coll.Seconds(), Host: w.Host()}
	for j, r := range res {
		i := j
		if j < len(index) {
			i = index[j]
		}
		wr := wireResult{I: i, O: r.Outcome, T: r.Token, D: r.Detail, P: r.Path, L: int64(r.Latency)}
		if r.Record != nil && e.json { // only --json prints records
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
		reported = mergeAndReport(w, e, spec, in.Items, parts, coll)
		var ec cli.ExitCoder
		if errors.As(reported, &ec) {
			code = ec.ExitCode()
		} else if reported != nil {
			code = 1
		}
	}
	// Every rank exits with the status rank 0 reported.
	cb, _ := json.Marshal(code)
	agreed, err := w.Bcast(0, cb)
	if err != nil {
		return quiet(cli.Exit(leasefmt.Bound(err.Error()), 4))
	}
	if rank0 {
		return reported
	}
	if json.Unmarshal(agreed, &code) != nil {
		code = 4
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// mergeAndReport is rank 0's part: it puts the gathered results back in
// input order, sums the statistics, applies G6 across ranks and prints
// what one process would print. It returns the exit error.
func mergeAndReport(w *mpi.World, e *env, spec batchSpec, items []commit.Item, parts [][]byte, coll time.Duration) error {
	merged := make([]commit.Result, len(items))
	filled := make([]bool, len(items))
	from := make([]int, len(items)) // the rank that reported each item
	hosts := make([]string, len(parts))
	var total commit.Snapshot
	// collective_s is the least time any rank spent in collectives: the
	// cost of the collectives themselves, without the time a rank waited
	// for slower peers to finish their shards.
	collS := coll.Seconds()
	var bad []string
	for r, p := range parts {
		var wr wireRank
		if err := json.Unmarshal(p, &wr); err != nil {
			bad = append(bad, fmt.Sprintf("rank %d sent malformed results", r))
			continue
		}
		wr.Stats.Latencies = wr.Lat
		hosts[r] = wr.Host
		if r == 0 {
			total = wr.Stats
		} else {
			total.Add(wr.Stats)
			collS = min(collS, wr.CollS)
		}
		for _, x := range wr.Results {
			if x.I < 0 || x.I >= len(merged) || filled[x.I] {
				bad = append(bad, fmt.Sprintf("rank %d reported item %d twice or out of range", r, x.I))
				continue
			}
			it := items[x.I]
			m := commit.Result{Item: it, Outcome: x.O, Token: x.T, Detail: x.D, Path: x.P, Latency: time.Duration(x.L)}
			if x.R != "" {
				m.Record, _ = leasefmt.Decode([]byte(x.R), spec.kind, it.ID)
			}
			merged[x.I], filled[x.I], from[x.I] = m, true, r
		}
	}
	// G6 across ranks: an I/O error on any rank fails the whole batch.
	// The cause named is the first error a rank met itself, not one of
	// the items its batch then gave up.
	ioErr := ""
	if len(bad) > 0 {
		ioErr = "mpi: " + strings.Join(bad, "; ")
	}
	for i := range merged {
		if !filled[i] && spec.spread {
			merged[i] = commit.Result{Item: items[i], Outcome: commit.IOError, Detail: "no rank reported this item"}
			filled[i], from[i] = true, -1
		}
	}
	derived := func(d string) bool {
		return strings.HasPrefix(d, "not attempted: ") || strings.HasPrefix(d, "batch failed, not renewed: ") ||
			strings.HasPrefix(d, "written, but the batch failed")
	}
	for pass := 0; pass < 2 && ioErr == ""; pass++ {
		for i := range merged {
			if filled[i] && merged[i].Outcome == commit.IOError && (pass == 1 || !derived(merged[i].Detail)) {
				ioErr = merged[i].Detail
				if r := from[i]; r >= 0 && w.Size() > 1 {
					ioErr = fmt.Sprintf("rank %d of %d (host %s): %s", r, w.Size(), leasefmt.Quote(hosts[r]), ioErr)
				}
				break
			}
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
				merged[i].Outcome, merged[i].Detail = commit.IOError, leasefmt.Bound("batch failed, not renewed: "+ioErr)
			}
		}
	}
	total.Ranks = w.Size()
	total.CollectiveS = collS
	return e.reportWith(spec.name, merged, total, spec.reportOpts)
}

func agreedErr(we wireErr, err error) error {
	if err != nil {
		return cli.Exit(leasefmt.Bound("mpi: "+err.Error()), 4)
	}
	return cli.Exit(leasefmt.Bound(we.Err), we.Code)
}
