package durable

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasetool/lease/commit/seam"
	"golang.org/x/sys/unix"
)

// The reserve of a table (docs/design.md#durability): ROOT/reserve/ holds
// spare files spare.N, each with SpareSize bytes written and fsynced, and
// the lock file reserve/.lock, byte N of which is spare N's lock, so that
// a holder whose lease is live can still renew and complete it while the
// filesystem is full (ENOSPC) or its quota is used up (EDQUOT). A write
// that cannot create or fill its temp file for want of space takes a spare
// instead: it locks one, overwrites it in place within its allocated
// blocks, swaps it with the record in one step (renameat2
// RENAME_EXCHANGE: the record's name now holds the new content, the
// spare's name the replaced record's file, which is the next spare), and
// fsyncs both directories before it unlocks the spare. None of it
// allocates: no block, no inode, no directory entry, so the reserve lasts
// as long as the full disk does.
//
// Other programs ignore reserve/; a table without it (made by another
// program, or before the reserve existed) has no spares, and a write on a
// full filesystem fails there as it always did.
const (
	// ReserveDir is the reserve's directory, below the table root.
	ReserveDir = "reserve"
	// SparePrefix starts the name of a spare: spare.N, N in decimal.
	SparePrefix = "spare."
	// SpareTempPrefix starts the name of a spare being made.
	SpareTempPrefix = ".spare.tmp."
	// SpareSize is the size of a new spare: a record's largest size
	// (docs/lease-format.md), so any record fits in any new spare.
	SpareSize = 4096
	// DefaultSpares is the number of spares lease init makes and lease
	// fsck --repair tops the reserve up to: four times the default writers
	// of a batch, since each writer holds one spare at a time and several
	// processes share a reserve (1 MiB and 256 inodes).
	DefaultSpares = 256
)

// ReserveLock is the reserve's lock file.
var ReserveLock = path.Join(ReserveDir, ".lock")

// reserve is the Disk's view of the reserve: the spares it listed last.
type reserve struct {
	mu     sync.Mutex
	nums   []int
	listed time.Time
	noSwap bool // the filesystem cannot exchange: the reserve is of no use
}

// Full reports whether err is the filesystem's lack of space: ENOSPC, or
// EDQUOT, the quota's.
func Full(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

// SpareNumber is N of a spare's name spare.N; false for any other name.
func SpareNumber(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, SparePrefix)
	if !ok || s == "" || len(s) > 6 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}

// SpareName is the reserve's name of spare n.
func SpareName(n int) string { return path.Join(ReserveDir, SparePrefix+strconv.Itoa(n)) }

// listSpares lists the numbers of the reserve's spares, in order.
func (d *Disk) listSpares() ([]int, error) {
	dr, err := seam.OpenDir(d.fs, ReserveDir)
	if err != nil {
		return nil, err
	}
	defer dr.Close()
	var out []int
	for {
		names, err := dr.ReadNames(256)
		for _, n := range names {
			if i, ok := SpareNumber(n); ok {
				out = append(out, i)
			}
		}
		if errors.Is(err, io.EOF) {
			sort.Ints(out)
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// CountSpares is the number of spares in the reserve; 0 without one.
func (d *Disk) CountSpares() (int, error) {
	nums, err := d.listSpares()
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return len(nums), err
}

// TopUp makes spares until the reserve holds want of them (AddSpares): it
// returns how many it made; a full filesystem stops it without an error.
func (d *Disk) TopUp(want int) (int, error) {
	have, err := d.CountSpares()
	if err != nil || have >= want {
		return 0, err
	}
	return d.AddSpares(want - have)
}

// AddSpares makes n new spares, with the lowest numbers not in use, making
// reserve/ and its lock file first if needed: each is written whole and
// fsynced under a temp name and then moved to its name without replacing
// (a spare is never visible before its blocks are allocated, and one that
// another process made meanwhile is kept), and the directory is fsynced
// once at the end. It returns how many it made; on a full filesystem it
// stops at the first ENOSPC without an error (the spares made so far
// stay), since a reserve is topped up when space allows. Without
// seam.Overwriter spares are of no use and none are made.
func (d *Disk) AddSpares(n int) (int, error) {
	if _, ok := seam.As[seam.Overwriter](d.fs); !ok || n <= 0 {
		return 0, nil
	}
	if err := d.EnsureDir(ReserveDir); err != nil {
		if Full(err) {
			return 0, nil
		}
		return 0, err
	}
	unlock, err := d.fs.Lock(context.Background(), ReserveLock, 0, 0)
	switch {
	case err == nil:
		unlock()
	case errors.Is(err, seam.ErrLockTimeout):
	case Full(err):
		return 0, nil
	default:
		return 0, err
	}
	nums, err := d.listSpares()
	if err != nil {
		return 0, err
	}
	have := map[int]bool{}
	for _, i := range nums {
		have[i] = true
	}
	zeros := make([]byte, SpareSize)
	made := 0
	for i := 0; made < n; i++ {
		if have[i] {
			continue
		}
		tmp, err := d.writeSpare(zeros)
		if err != nil {
			if Full(err) {
				break
			}
			return made, err
		}
		if err := d.fs.RenameNoReplace(tmp, SpareName(i)); err != nil {
			d.fs.Remove(tmp)
			switch {
			case errors.Is(err, fs.ErrExist), errors.Is(err, fs.ErrNotExist):
				continue // another process made it, or a repair removed the temp file
			case Full(err):
			default:
				return made, err
			}
			break
		}
		made++
	}
	if made > 0 {
		if err := d.fs.SyncDir(ReserveDir); err != nil {
			return made, err
		}
		d.counts.DirectorySyncs.Add(1)
	}
	return made, nil
}

// writeSpare writes a new spare under a temp name of the reserve.
func (d *Disk) writeSpare(zeros []byte) (string, error) {
	tmp := path.Join(ReserveDir, TempName("spare")) // .spare.tmp.<random>
	f, err := d.fs.CreateExcl(tmp)
	if err != nil {
		return "", err
	}
	_, err = f.Write(zeros)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		d.fs.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// spares returns the spare numbers to try, from a listing at most a
// second old, starting at a random one so that writers seldom try the
// same spare first.
func (d *Disk) spares(fresh bool) ([]int, error) {
	r := &d.pool
	r.mu.Lock()
	defer r.mu.Unlock()
	if fresh || r.nums == nil || time.Since(r.listed) > time.Second {
		nums, err := d.listSpares()
		if errors.Is(err, fs.ErrNotExist) {
			nums, err = []int{}, nil // no reserve: a table made without one
		}
		if err != nil {
			return nil, err
		}
		r.nums, r.listed = nums, time.Now()
	}
	n := len(r.nums)
	out := make([]int, n)
	if n > 0 {
		k := mrand.IntN(n)
		copy(out, r.nums[k:])
		copy(out[n-k:], r.nums[:k])
	}
	return out, nil
}

// putSpare writes data over the existing record final through a spare of
// the reserve, in batch b, after writing a temp file failed with full (a
// full filesystem); see the reserve's comment above. The content is
// durable (Overwrite's fdatasync) before the exchange puts it under the
// record's name (G1), the exchange is the record's one switch (G2), and
// both directories are fsynced before the spare is unlocked: the replaced
// record's file may be overwritten as a spare only once no crash can bring
// it back under the record's name.
func (d *Disk) putSpare(b *SyncBatch, final string, data []byte, full error) error {
	ow, ok := seam.As[seam.Overwriter](d.fs)
	if !ok {
		return full
	}
	d.pool.mu.Lock()
	noSwap := d.pool.noSwap
	d.pool.mu.Unlock()
	if noSwap {
		return full
	}
	deadline := time.Now().Add(time.Second)
	for try := 0; ; try++ {
		nums, err := d.spares(try > 0)
		if err != nil {
			return &OpError{Op: "the filesystem is full, and listing the table's reserve failed", Path: d.Abs(ReserveDir), Err: err}
		}
		if len(nums) == 0 {
			return &OpError{Op: "cannot write the new record: the filesystem is full and the table has no reserve (reserve/) or no spare left in it", Err: Bare(unwrapOp(full))}
		}
		for _, n := range nums {
			done, err := d.trySpare(ow, b, n, final, data)
			if done || err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return &OpError{Op: fmt.Sprintf("cannot write the new record: the filesystem is full and all %d spares of the table's reserve are in use", len(nums)), Err: Bare(unwrapOp(full))}
		}
		time.Sleep(20 * time.Millisecond) // spares in use come back within a write and two fsyncs
	}
}

// trySpare writes data over final through spare n if its lock is free:
// done when it did, an error when the record could not be written.
func (d *Disk) trySpare(ow seam.Overwriter, b *SyncBatch, n int, final string, data []byte) (bool, error) {
	unlock, err := d.fs.Lock(context.Background(), ReserveLock, int64(n), 0)
	if errors.Is(err, seam.ErrLockTimeout) {
		return false, nil // another writer has it
	}
	if err != nil {
		return false, &OpError{Op: "the filesystem is full, and locking a spare of the table's reserve failed", Path: d.Abs(ReserveLock), Err: Bare(err)}
	}
	defer unlock()
	spare := SpareName(n)
	if err := ow.Overwrite(spare, data); err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return false, nil // removed by lease fsck --repair
		case errors.Is(err, seam.ErrUnfit):
			// Dropping its name is safe: a record that shares the file
			// keeps its own, and a spare too small frees its blocks.
			d.counts.SparesUnfit.Add(1)
			d.fs.Remove(spare)
			return false, nil
		}
		return false, &OpError{Op: "the filesystem is full, and writing the new record into a spare of the reserve failed", Path: d.Abs(spare), Err: Bare(err)}
	}
	d.counts.FileSyncs.Add(1)
	if err := ow.Exchange(spare, final); err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			d.pool.mu.Lock()
			d.pool.noSwap = true
			d.pool.mu.Unlock()
		}
		return false, &OpError{Op: "the filesystem is full, and swapping a spare of the reserve with the record failed (the record is unchanged)", Err: Bare(err)}
	}
	d.counts.SparesUsed.Add(1)
	// Both directories are fsynced before the spare is unlocked (SyncNow,
	// not SyncDir, which may return while another writer's fsync is still
	// under way); a failure fails the batch (b.Err, G6).
	if err := b.SyncNow(path.Dir(final)); err != nil {
		return true, nil
	}
	if err := b.SyncNow(ReserveDir); err != nil {
		return true, nil
	}
	d.counts.SparesRecycled.Add(1)
	return true, nil
}

// unwrapOp is the cause of an OpError, or err.
func unwrapOp(err error) error {
	var oe *OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}

// PutHeld is Put over an existing record, for a write by the holder of its
// lease (a renewal, a release, a complete): when the filesystem is full,
// the record is written through a spare of the reserve (putSpare) instead
// of failing. On the normal path it costs nothing more than Put.
func (d *Disk) PutHeld(b *SyncBatch, final string, data []byte) error {
	err := d.Put(b, final, data, false)
	if err == nil || !Full(err) {
		return err
	}
	return d.putSpare(b, final, data, err)
}

// WriteHeld is WriteFile for a write by the holder of the record's lease:
// through the reserve when the filesystem is full (PutHeld).
func (d *Disk) WriteHeld(final string, data []byte) error {
	b := d.Batch()
	if err := d.PutHeld(b, final, data); err != nil {
		b.Flush()
		return err
	}
	return b.Flush()
}
