package fsck

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/leasefmt"
)

// shardedArea is a top-level directory of the table that holds one
// directory per work shard (queue/, input/: docs/design.md#layout).
type shardedArea struct {
	top      string                                           // queue/, input/
	kind     Kind                                             // of the findings about what does not belong
	what     string                                           // "queue", "input", in messages
	shardDir func(sh int) string                              // the directory of work shard sh
	entry    func(dir string, sh int, e fs.DirEntry) *Finding // checks one entry of a shard
}

// checkSharded checks area a when it exists: every shard directory
// without SHARD arguments, else those of the work shards selected. A
// name in a.top that is not a shard directory is moved to lost+found/ by
// a repair; a directory that vanished meanwhile (a live table) is none.
func (c *checker) checkSharded(a shardedArea, tasks []task) {
	fi, err := c.fs.Lstat(a.top)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return
	case err != nil:
		c.emit(c.ioFinding(a.top, "cannot stat", err))
		return
	case !fi.IsDir():
		return // checkTop reports it
	}
	if len(c.opt.Shards) > 0 {
		for _, t := range tasks {
			if t.kind == leasefmt.Work && t.shard >= 0 {
				c.checkShardDir(a, a.shardDir(t.shard), t.shard)
			}
		}
		return
	}
	ents, err := c.readDirSorted(a.top)
	if err != nil {
		c.emit(c.listFailed(a.top, "cannot list", err))
		return
	}
	n := c.st.Table().WorkShards
	for _, e := range ents {
		rel := path.Join(a.top, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			c.emit(c.symlink(rel, "", noUnlock))
			continue
		}
		sh, ok := leasefmt.ParseShardDirName(e.Name(), n)
		if !ok || !e.IsDir() {
			f := &Finding{Kind: a.kind, Path: rel, Found: fmt.Sprintf("%s that is not a %s shard directory", userfile.TypeName(e.Type()), a.what),
				Expected: fmt.Sprintf("only the %s shard directories %s/SS of the %d work shards", a.what, a.top, n), Repair: "move it to lost+found/"}
			if c.opt.Repair {
				c.quarantineInto(rel, f, fmt.Sprintf("%s/ holds only the %s shard directories", a.top, a.what))
			}
			c.emit(f)
			continue
		}
		c.checkShardDir(a, rel, sh)
	}
}

// checkShardDir checks the entries of one shard directory of a.
func (c *checker) checkShardDir(a shardedArea, dir string, sh int) {
	ents, err := c.readDirSorted(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		c.emit(c.ioFinding(dir, "cannot list", err))
		return
	}
	for _, e := range ents {
		c.emit(a.entry(dir, sh, e))
	}
}
