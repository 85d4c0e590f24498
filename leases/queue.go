package leases

// The table's queue (docs/lease-format.md): Add and AddContent enqueue
// items, ClaimNext claims the next free one without a candidate list, and
// the ID helpers make the IDs the command line makes (lease id).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/internal/worker"
	"github.com/leasetool/lease/leasefmt"
)

// The answers of ClaimNext that are not a lease (errors.Is).
var (
	// ErrEmpty: nothing left to do: every queued item is done (or failed).
	ErrEmpty = errors.New("queue empty: every queued item is done")
	// ErrBusy: items remain, but each is held by another lease.
	ErrBusy = errors.New("queue busy: every item left is held")
	// ErrQueued: Add of an item already queued (not added again).
	ErrQueued = commit.ErrQueued
)

// IDOf is the ID of an item whose content is content: its SHA-256 in
// lowercase hex, as lease id --content computes it.
func IDOf(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// IDOfFile is the ID of the content of the regular file at path (at most
// the 1 GiB an item's input may hold).
func IDOfFile(path string) (string, error) {
	f, fi, err := userfile.Open(path)
	if err != nil {
		return "", fmt.Errorf("id of %s: %w", path, err)
	}
	defer f.Close()
	if fi.Size() > commit.MaxInput {
		return "", fmt.Errorf("id of %s: %d bytes, more than the %d an item's input may hold", path, fi.Size(), int64(commit.MaxInput))
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("id of %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ParseID returns s if it is an ID (64 lowercase hex characters), else an
// error saying why not; no path is ever built from an ID it refuses.
func ParseID(s string) (string, error) {
	id, err := leasefmt.ParseID(s)
	return string(id), err
}

// Add enqueues ids as one group commit (each touched queue shard directory
// fsynced once). An ID already queued is ErrQueued and one whose work is
// done ErrDone (neither is added again); the results are in the order of
// ids. Adding is idempotent.
func (t *Table) Add(ctx context.Context, ids ...string) ([]Result, error) {
	its, err := items(ids, nil)
	if err != nil {
		return nil, err
	}
	return t.call(ctx, func() []commit.Result { return t.st.Enqueue(ctx, its) })
}

// AddContent stores each content in the table's input store, durably and
// content-addressed (input/SS/ID, ID = IDOf(content)), then enqueues its
// ID, as lease add --content does: a worker finds it at Item.Input (and a
// command run by lease run or lease work at LEASE_INPUT). The results are
// in the order of contents, each with the ID of its content; a content
// given twice is stored and queued once, by its first: the later ones are
// ErrQueued, so that the results with no error count what was added.
func (t *Table) AddContent(ctx context.Context, contents ...[]byte) ([]Result, error) {
	cs := make([]commit.Content, len(contents))
	for i, c := range contents {
		if len(c) > commit.MaxInput {
			return nil, fmt.Errorf("content %d: %d bytes, more than the %d an item's input may hold", i+1, len(c), int64(commit.MaxInput))
		}
		data := c
		id := leasefmt.ID(IDOf(c))
		cs[i] = commit.Content{ID: id, Name: fmt.Sprintf("content %d", i+1), Open: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}}
	}
	return t.add(ctx, cs)
}

// AddFiles is AddContent of the contents of the files at paths (the
// files are hashed first, all of them: a missing one adds nothing).
func (t *Table) AddFiles(ctx context.Context, paths ...string) ([]Result, error) {
	cs := make([]commit.Content, len(paths))
	for i, p := range paths {
		id, err := IDOfFile(p)
		if err != nil {
			return nil, err
		}
		path := p
		cs[i] = commit.Content{ID: leasefmt.ID(id), Name: p, Open: func() (io.ReadCloser, error) { return userfile.OpenReader(path) }}
	}
	return t.add(ctx, cs)
}

// add stores cs (each once) and queues what was stored.
func (t *Table) add(ctx context.Context, cs []commit.Content) ([]Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	first := map[leasefmt.ID]int{}
	var uniq []commit.Content
	for i, c := range cs {
		if _, dup := first[c.ID]; !dup {
			first[c.ID] = i
			uniq = append(uniq, c)
		}
	}
	stored := t.st.StoreInputs(ctx, uniq)
	res := make([]commit.Result, len(uniq))
	var queue []commit.Item
	var at []int
	for i, r := range stored {
		res[i] = r
		if r.Outcome == commit.OK {
			queue, at = append(queue, r.Item), append(at, i)
		}
	}
	if len(queue) > 0 {
		for j, r := range t.st.Enqueue(ctx, queue) {
			res[at[j]] = r
		}
	}
	byID := map[leasefmt.ID]commit.Result{}
	for _, r := range res {
		byID[r.ID] = r
	}
	out := make([]commit.Result, len(cs))
	for i, c := range cs {
		out[i] = byID[c.ID]
		out[i].Item = commit.Item{ID: c.ID}
		if i != first[c.ID] && out[i].Outcome == commit.OK {
			// Added once, by its first: the later ones of the same call
			// find it queued, as a later call would.
			out[i] = commit.Result{Item: out[i].Item, Path: out[i].Path, Outcome: commit.Queued, Detail: "given earlier in the same call"}
		}
	}
	return results(out), nil
}

// ClaimNext claims the next free item of the queue for ttl (0: the
// table's WithTTL), as lease claim --next 1 does: its cost does not grow
// with the items done. It returns ErrEmpty when every queued item is done
// (or failed) and ErrBusy when the items left are all held (try again
// later: Table.Work waits); an error wrapping ErrCorrupt or ErrIO when
// only items that cannot be claimed for their record's sake are left.
func (t *Table) ClaimNext(ctx context.Context, ttl time.Duration) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	if ttl == 0 {
		ttl = t.ttl
	}
	cl := worker.ClaimNext(ctx, t.st, worker.NewRand(), 1, t.owner, ttl.Seconds(), false, time.Time{}, nil)
	return nextLease(cl)
}

// nextLease is the lease a claim of the queue got, or why it got none.
func nextLease(cl worker.Claimed) (Lease, error) {
	var bad error
	for _, r := range cl.Results {
		if r.Outcome == commit.OK {
			return results([]commit.Result{r})[0].Lease, nil
		}
		if bad == nil {
			bad = r.Err()
		}
	}
	switch cl.Answer {
	case commit.Empty:
		return Lease{}, ErrEmpty
	case commit.Busy:
		return Lease{}, fmt.Errorf("%w (%d held)", ErrBusy, cl.Held)
	}
	if bad == nil {
		bad = ErrIO
	}
	return Lease{}, fmt.Errorf("no queued item can be claimed: %w", bad)
}
