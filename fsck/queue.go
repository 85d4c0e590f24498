package fsck

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// The queue phase (docs/design.md#queue): queue/SS/ID is an empty regular file per
// queued work item that is not done, in the ID's work shard. fsck reports
// and repairs:
//   - names in queue/ that are not shard directories of the table, and
//     entries that are not empty regular files named by an ID (something
//     another program left: moved to lost+found/, never deleted);
//   - entries in the wrong shard (moved to their shard, or removed when
//     the right one is there too);
//   - entries of done items (a complete killed between done and the
//     removal; removed), and of failed items (a release that failed the
//     item killed before the removal, or a retry killed between its entry
//     and its record; removed under the record's lock, where lease retry
//     makes its entry, once the record is read there as still failed).
// The queue is optional: a table without queue/ is fine.

// checkQueue checks queue/ when it exists: every queue shard without SHARD
// arguments, else the queue shards of the work shards selected.
func (c *checker) checkQueue(tasks []task) {
	c.checkSharded(shardedArea{top: layout.QueueDir, kind: KindQueue, what: "queue",
		shardDir: c.st.QueueShardDir, entry: c.checkQueueEntry}, tasks)
}

func (c *checker) checkQueueEntry(dir string, sh int, e fs.DirEntry) *Finding {
	rel := path.Join(dir, e.Name())
	typ := e.Type()
	if typ&fs.ModeSymlink != 0 {
		return c.symlink(rel, "", noUnlock)
	}
	id, idErr := leasefmt.ParseID(e.Name())
	if f, ok := c.emptyEntry(rel, typ, idErr == nil, emptyEntryRule{kind: KindQueue, id: id, name: "an ID",
		expected: "an empty regular file named by the ID of a queued item", rule: "a queue entry is an empty file named by an ID"}); !ok {
		return f // not such a file (f), or removed since the listing (a complete)
	}
	// Done is final: a done record read without its lock stays done.
	rec, err := c.st.Read(c.ctx, leasefmt.Work, id)
	if err != nil && !errors.Is(err, leasefmt.ErrCorrupt) {
		return c.ioFinding(rel, "cannot read the record of the queue entry", err)
	}
	if rec != nil && rec.Status == leasefmt.Done {
		f := &Finding{Kind: KindQueue, Path: rel, ID: id, Found: fmt.Sprintf("the entry of a done item (token %d)", rec.Token),
			Expected: "entries of items that are not done (a complete killed between done and removing the entry)", Repair: "remove it"}
		if c.opt.Repair {
			switch err := c.fs.Remove(rel); {
			case errors.Is(err, fs.ErrNotExist):
				return nil // removed meanwhile (the complete that made it done)
			case err != nil:
				failed(f, err)
			default:
				fixed(f, "removed")
			}
		}
		return f
	}
	if rec != nil && rec.Status == leasefmt.Failed {
		return c.failedEntry(rel, id, rec)
	}
	if home := id.Shard(c.st.Table().WorkShards); home != sh {
		want := c.st.QueuePath(id)
		f := &Finding{Kind: KindQueue, Path: rel, ID: id, Found: "an entry in the wrong shard directory",
			Expected: "the entry at " + want, Repair: "move it to " + want}
		if c.opt.Repair {
			c.moveQueueEntry(f, rel, want)
		}
		return f
	}
	return nil
}

// moveQueueEntry makes the entry at want durable, then removes the one at
// rel, so that the item stays queued throughout.
func (c *checker) moveQueueEntry(f *Finding, rel, want string) {
	if err := c.disk.EnsureDir(path.Dir(want)); err != nil {
		failed(f, err)
		return
	}
	file, err := c.fs.CreateExcl(want)
	switch {
	case errors.Is(err, fs.ErrExist):
	case err != nil:
		failed(f, err)
		return
	default:
		if err := file.Close(); err != nil {
			failed(f, err)
			return
		}
		if err := c.fs.SyncDir(path.Dir(want)); err != nil {
			failed(f, err)
			return
		}
	}
	if err := c.removeDurably(rel); err != nil {
		failed(f, fmt.Errorf("%s is queued, but the misplaced entry stays: %w", want, err))
		return
	}
	fixed(f, "moved to "+want)
}

// failedEntry is the finding about the queue entry of a failed item; a
// repair removes it under the record's lock, after reading the record
// there as still failed (lease retry makes the entry under that lock
// before it writes the record released).
func (c *checker) failedEntry(rel string, id leasefmt.ID, rec *leasefmt.Record) *Finding {
	f := &Finding{Kind: KindQueue, Path: rel, ID: id, Found: fmt.Sprintf("the entry of a failed item (token %d, %d attempts)", rec.Token, rec.Attempts),
		Expected: "entries of items that are not done or failed (a release killed before it removed the entry)", Repair: "remove it (lease retry queues the item again)"}
	if !c.opt.Repair {
		return f
	}
	unlock, err := c.lockAt(c.st.ShardDir(leasefmt.Work, id.Shard(c.st.Table().WorkShards)), id)
	if err != nil {
		failed(f, fmt.Errorf("record lock: %w", err))
		return f
	}
	defer unlock()
	cur, err := c.st.Read(c.ctx, leasefmt.Work, id)
	switch {
	case err != nil && !errors.Is(err, leasefmt.ErrCorrupt):
		failed(f, err)
		return f
	case cur == nil || cur.Status != leasefmt.Failed:
		return nil // retried meanwhile: the entry is the item's again
	}
	if err := c.fs.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		failed(f, err)
	} else {
		fixed(f, "removed")
	}
	return f
}

// emptyEntryRule is what an entry that must be an empty regular file is
// (a queue entry, a held/ name), for emptyEntry's finding.
type emptyEntryRule struct {
	kind           Kind
	id             leasefmt.ID
	name           string // what its name must be
	expected, rule string
}

// emptyEntry checks rel, an entry listed with type typ whose name parsed
// (named) or not, which must be an empty regular file: ok when it is one.
// Any other name, type or size is an error that --repair moves to
// lost+found/ (never deleted), returned with ok false; an entry gone since
// the listing is no finding (nil, false).
func (c *checker) emptyEntry(rel string, typ fs.FileMode, named bool, r emptyEntryRule) (*Finding, bool) {
	what := ""
	switch {
	case !named:
		what = userfile.TypeName(typ) + " whose name is not " + r.name
	case !typ.IsRegular():
		what = userfile.TypeName(typ)
	default:
		fi, err := c.fs.Lstat(rel)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false
		}
		if err != nil {
			return c.ioFinding(rel, "cannot stat", err), false
		}
		if fi.Size() != 0 {
			what = fmt.Sprintf("a regular file of %d bytes", fi.Size())
		}
	}
	if what == "" {
		return nil, true
	}
	f := &Finding{Kind: r.kind, Path: rel, ID: r.id, Found: what, Expected: r.expected, Repair: "move it to lost+found/ (never deleted)"}
	if c.opt.Repair {
		c.quarantineInto(rel, f, r.rule)
	}
	return f, false
}
