// Package cluster runs a lease batch as one program across the ranks of an
// mpirun job (docs/design.md#mpi), over an mpi.World:
//
//   - every step is a collective, and every error a value carried through
//     one ([Agree]): a failure on one rank becomes the same bounded error
//     on every rank (seed F357), never a hang;
//   - the table is opened by rank 0 first and then by the others, and every
//     rank must have opened the same table ([Open]);
//   - a batch ([Session.Batch]) is read on rank 0 and broadcast, split by
//     shard (rank r takes the shards s with s % size == r) or run by rank 0
//     alone, run, gathered back to rank 0 and merged in input order, with
//     G6 across ranks: an I/O error on any rank fails the whole batch, so
//     nothing is reported as done that another rank's failure undid;
//   - statistics are summed on rank 0 ([Session.Stats]), and the ranks
//     agree on stopping ([Session.Any]) and on the exit status
//     ([Session.Exit]).
//
// One-shot batches and the rounds of renew-batch --watch use the same
// calls, so they share one wire format, one merge and one identity check.
// With a World of one rank (no launcher) every collective is the identity
// and the package adds nothing but the calls.
package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/mpi"
)

// Error is an error every rank agreed on: the first failing rank's, named
// by its rank and host when the world has several.
type Error struct {
	Rank, Size int
	Host       string
	Msg        string
	// Code is what the failing rank's code function said of its error
	// (the exit status, for the commands).
	Code int
}

// Error says which rank failed and why.
func (e *Error) Error() string {
	if e.Size <= 1 {
		return e.Msg
	}
	return fmt.Sprintf("rank %d of %d (host %s): %s", e.Rank, e.Size, leasefmt.Quote(e.Host), e.Msg)
}

// ErrProtocol is wrapped by errors about a malformed message between ranks:
// a rank that sent something no rank of this version sends.
var ErrProtocol = errors.New("malformed message between ranks")

// message is what ranks exchange to agree.
type message struct {
	Err   string `json:"err,omitempty"`
	Code  int    `json:"code,omitempty"`
	Host  string `json:"host,omitempty"`
	Table string `json:"table,omitempty"` // see identity
	Root  string `json:"root,omitempty"`
}

// clock adds the time spent in collectives.
type clock struct{ d time.Duration }

func (c *clock) time(f func() error) error {
	t := time.Now()
	err := f()
	c.d += time.Since(t)
	return err
}

// exchange gathers every rank's message on every rank and returns them
// with the agreed error: the first failing rank's (nil when none failed).
// Every rank computes the same answer from the same messages.
func exchange(w *mpi.World, mine message, c *clock) ([]message, error) {
	mine.Host = w.Host()
	b, _ := json.Marshal(mine)
	var all [][]byte
	if err := c.time(func() (err error) { all, err = w.AllGather(b); return err }); err != nil {
		return nil, err
	}
	msgs := make([]message, len(all))
	for r, b := range all {
		if json.Unmarshal(b, &msgs[r]) != nil {
			return nil, fmt.Errorf("%w: rank %d of %d sent %d bytes", ErrProtocol, r, w.Size(), len(b))
		}
	}
	for r, m := range msgs {
		if m.Code != 0 {
			if m.Err == "" {
				m.Err = "failed"
			}
			return msgs, &Error{Rank: r, Size: w.Size(), Host: m.Host, Msg: m.Err, Code: m.Code}
		}
	}
	return msgs, nil
}

func messageOf(err error, code func(error) int) message {
	if err == nil {
		return message{}
	}
	m := message{Err: err.Error(), Code: exitcode.Negative}
	if code != nil {
		m.Code = code(err)
	}
	if m.Code == exitcode.OK {
		m.Code = exitcode.Negative
	}
	return m
}

// Agree makes every rank see the same error: nil when err is nil on every
// rank, else an *Error naming the first failing rank and carrying code(err)
// of that rank (1 when code is nil or says 0). An error of the collective
// itself is returned as it is.
func Agree(w *mpi.World, err error, code func(error) int) error {
	_, aerr := exchange(w, messageOf(err, code), &clock{})
	return aerr
}

// Session is one table opened on every rank of a world.
type Session struct {
	w *mpi.World
	// Store is this rank's view of the table.
	Store *commit.Store
	coll  clock
	last  rankStats // rank 0: every rank's statistics at the last batch
	// rank 0: every rank's collective time at the last batch, and the
	// cost of that batch's collectives (RoundCollectives).
	prev  []float64
	round time.Duration
}

// identity names the table st opened, so that ranks can check they all
// opened the same one: its header and the modification time of the TABLE
// file, which is written once and never changes, and which every client
// of a shared filesystem sees alike.
func identity(st *commit.Store) string {
	hdr, _ := leasefmt.EncodeTable(st.Table())
	id := string(bytes.TrimSpace(hdr))
	if fi, err := st.FS().Lstat(layout.TableFile); err == nil {
		id += fmt.Sprintf(" mtime=%d", fi.ModTime().UnixNano())
	}
	return id
}

// Open opens the table on every rank: rank 0 first (its open may be the
// only one to create anything), then the others, so that a rank whose view
// of the root is missing fails instead of making a table of its own. Every
// rank must have opened the same table as rank 0: another one is an
// *Error naming that rank, with code(ErrOtherTable) (2 when code is nil).
// On failure every rank's store is closed and every rank gets the same
// error.
func Open(w *mpi.World, open func() (*commit.Store, error), code func(error) int) (*Session, error) {
	s := &Session{w: w}
	var st *commit.Store
	var err error
	if w.Rank() == 0 {
		st, err = open()
	}
	if _, aerr := exchange(w, messageOf(err, code), &s.coll); aerr != nil {
		closeStore(st)
		return nil, aerr
	}
	var mine message
	if w.Rank() != 0 {
		st, err = open()
		mine = messageOf(err, code)
	}
	if st != nil {
		mine.Root, mine.Table = st.Root(), identity(st)
	}
	msgs, aerr := exchange(w, mine, &s.coll)
	if aerr != nil {
		closeStore(st)
		return nil, aerr
	}
	for r := 1; r < len(msgs); r++ {
		if msgs[r].Table != msgs[0].Table {
			closeStore(st)
			msg := fmt.Sprintf("opened another table than rank 0 (host %s): %s holds %s, %s holds %s; every rank must see the same table",
				leasefmt.Quote(msgs[0].Host), msgs[r].Root, msgs[r].Table, msgs[0].Root, msgs[0].Table)
			c := exitcode.Usage
			if code != nil {
				c = code(ErrOtherTable)
			}
			return nil, &Error{Rank: r, Size: w.Size(), Host: msgs[r].Host, Msg: leasefmt.Bound(msg), Code: c}
		}
	}
	s.Store = st
	return s, nil
}

// ErrOtherTable is the cause of the error of Open when a rank opened
// another table than rank 0.
var ErrOtherTable = errors.New("another table than rank 0's")

func closeStore(st *commit.Store) {
	if st == nil {
		return
	}
	st.Close()
}

// World is the session's world.
func (s *Session) World() *mpi.World { return s.w }

// Collectives is the time this rank spent in the session's collectives.
func (s *Session) Collectives() time.Duration { return s.coll.d }

// Max returns, on every rank, the largest v of any rank: how the ranks
// agree to stop, and on the signal that stopped them.
func (s *Session) Max(v int) (int, error) {
	var n int
	err := s.coll.time(func() (err error) { n, err = s.w.AllMaxInt(v); return err })
	return n, err
}

// Exit returns rank 0's code on every rank: every rank exits with the
// status rank 0 reported.
func (s *Session) Exit(code int) (int, error) {
	b, _ := json.Marshal(code)
	if err := s.coll.time(func() (err error) { b, err = s.w.Bcast(0, b); return err }); err != nil {
		return 0, err
	}
	if json.Unmarshal(b, &code) != nil {
		return 0, fmt.Errorf("%w: exit status of %d bytes", ErrProtocol, len(b))
	}
	return code, nil
}
