package commit

// The input store (docs/lease-format.md): ROOT/input/SS/ID holds the
// content of work item ID, whose ID is the SHA-256 of that content (as
// lease id --content computes it), SS the ID's work shard. A content is
// stored durably before its ID is queued: written to a temp file
// .ID.tmp.<random> in its shard directory, checked against its ID while
// it is written, fsynced, moved to its name without ever replacing one,
// and each touched directory fsynced once per batch (group commit).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sync"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// MaxInput bounds the content of one work item.
const MaxInput = 1 << 30

// InputShardDir is the directory of input shard sh: input/SS.
func (s *Store) InputShardDir(sh int) string {
	return layout.InputDir + "/" + leasefmt.ShardDirName(sh, s.hdr.WorkShards)
}

// InputPath is where the content of id is stored: input/SS/ID.
func (s *Store) InputPath(id leasefmt.ID) string {
	return s.InputShardDir(id.Shard(s.hdr.WorkShards)) + "/" + string(id)
}

// HasInput reports whether the content of id is in the store.
func (s *Store) HasInput(id leasefmt.ID) (bool, error) {
	fi, err := s.fs.Lstat(s.InputPath(id))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	return fi.Mode().IsRegular(), nil
}

// Content is the content of one work item, to store.
type Content struct {
	// ID is the SHA-256 of the content.
	ID leasefmt.ID
	// Name says where it comes from, for messages.
	Name string
	// Open opens the content for reading.
	Open func() (io.ReadCloser, error)
}

// errContentChanged: a content did not hash to its ID when it was stored
// (its file changed after it was hashed).
var errContentChanged = errors.New("content does not hash to its ID")

// StoreInputs stores each content at its InputPath and returns the
// results in input order: OK once it is durable, also when it was stored
// already (the name is the content's hash); IOError when it could not be
// stored, or did not hash to its ID (errContentChanged: nothing is left of
// it). The writes run on the writer pool; each touched shard directory is
// fsynced once, after its last rename, before anything is reported
// stored (G3, G4). A failure stops the batch: nothing more is started,
// the directories renamed into are still fsynced (G5), and nothing is
// reported stored (G6).
func (s *Store) StoreInputs(ctx context.Context, cs []Content) []Result {
	s.stats.Batches.Add(1)
	res := make([]Result, len(cs))
	var (
		mu     sync.Mutex
		failed error
	)
	fail := func(err error) {
		mu.Lock()
		if failed == nil {
			failed = err
		}
		mu.Unlock()
	}
	shards := map[int]bool{}
	for _, c := range cs {
		shards[c.ID.Shard(s.hdr.WorkShards)] = true
	}
	for sh := range shards {
		if err := s.disk.EnsureDir(s.InputShardDir(sh)); err != nil {
			fail(&durable.OpError{Op: "make the input shard directory", Path: s.Abs(s.InputShardDir(sh)), Err: err})
		}
	}
	batch := s.disk.Batch()
	order := make([]int, len(cs))
	for i := range order {
		order[i] = i
	}
	s.parallel(order, func(i int) {
		c, r := cs[i], &res[i]
		r.Item, r.Path = Item{ID: c.ID}, s.Abs(s.InputPath(c.ID))
		defer s.stats.Attempted.Add(1)
		mu.Lock()
		stop := failed
		mu.Unlock()
		if stop != nil {
			r.Outcome, r.Cause = IOError, fmt.Errorf("%w: %w", ErrNotAttempted, stop)
			return
		}
		if err := s.storeInput(ctx, c, batch, r); err != nil {
			r.Outcome, r.Cause = IOError, err
			fail(err)
			return
		}
		r.Outcome = OK
	})
	if err := batch.Flush(); err != nil {
		fail(&durable.OpError{Op: "fsync the input shard directories", Err: err})
	}
	for i := range res {
		r := &res[i]
		if r.Outcome == OK && failed != nil {
			r.Outcome, r.Cause = IOError, fmt.Errorf("%w: %w", ErrBatchFailed, failed)
		}
		if r.Outcome == IOError {
			r.Detail = durable.Describe(r.Cause)
			s.stats.Failures.Add(1)
		} else {
			s.stats.Renewals.Add(1)
		}
	}
	return res
}

// storeInput writes one content to its temp file, checks and fsyncs it,
// and moves it to its name in batch b.
func (s *Store) storeInput(ctx context.Context, c Content, b *durable.SyncBatch, r *Result) error {
	final := s.InputPath(c.ID)
	if ok, err := s.HasInput(c.ID); err != nil {
		return &durable.OpError{Op: "look up the stored input", Path: s.Abs(final), Err: err}
	} else if ok {
		r.Detail = "stored already"
		return nil
	}
	in, err := c.Open()
	if err != nil {
		return &durable.OpError{Op: "read the content", Path: c.Name, Err: err}
	}
	defer in.Close()
	dir := path.Dir(final)
	tmp := path.Join(dir, durable.TempName(string(c.ID)))
	f, err := s.fs.CreateExcl(tmp)
	if err != nil {
		return &durable.OpError{Op: "create the input's temp file", Path: s.Abs(tmp), Err: durable.Bare(err)}
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(in, MaxInput+1))
	switch {
	case err != nil:
		err = &durable.OpError{Op: "copy the content of " + leasefmt.Quote(c.Name) + " into", Path: s.Abs(tmp), Err: err}
	case n > MaxInput:
		err = fmt.Errorf("%w: %s is more than %d bytes", errContentChanged, leasefmt.Quote(c.Name), int64(MaxInput))
	case hex.EncodeToString(h.Sum(nil)) != string(c.ID):
		err = fmt.Errorf("%w: %s changed after it was hashed (its content is no longer %s)", errContentChanged, leasefmt.Quote(c.Name), c.ID)
	default:
		if err = f.Sync(); err == nil {
			s.stats.FileSyncs.Add(1)
		} else {
			err = &durable.OpError{Op: "fsync the input's temp file", Path: s.Abs(tmp), Err: durable.Bare(err)}
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = &durable.OpError{Op: "close the input's temp file", Path: s.Abs(tmp), Err: durable.Bare(cerr)}
	}
	if err != nil {
		s.fs.Remove(tmp)
		return err
	}
	err = b.Create(tmp, final)
	if errors.Is(err, fs.ErrExist) {
		s.fs.Remove(tmp) // stored by another adder meanwhile: the same bytes
		r.Detail = "stored already"
		return nil
	}
	if err != nil {
		s.fs.Remove(tmp)
		return &durable.OpError{Op: "move the input into place", Path: s.Abs(final), Err: durable.Bare(err)}
	}
	return nil
}

// HashFile is the SHA-256 (as an ID) of the regular file name of f, read
// as a stream where f can (seam.FileOpener), else at once.
func HashFile(f seam.FS, name string) (leasefmt.ID, error) {
	h := sha256.New()
	if o, ok := seam.As[seam.FileOpener](f); ok {
		r, err := o.OpenRead(name)
		if err != nil {
			return "", err
		}
		defer r.Close()
		if _, err := io.Copy(h, r); err != nil {
			return "", err
		}
		return leasefmt.ID(hex.EncodeToString(h.Sum(nil))), nil
	}
	fi, err := f.Lstat(name)
	if err != nil {
		return "", err
	}
	if fi.Size() > MaxInput {
		return "", fmt.Errorf("%s: %d bytes, more than %d", name, fi.Size(), int64(MaxInput))
	}
	data, err := f.ReadFile(name, int(fi.Size()))
	if err != nil {
		return "", err
	}
	h.Write(data)
	return leasefmt.ID(hex.EncodeToString(h.Sum(nil))), nil
}
