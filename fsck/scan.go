package fsck

// The scan of the shard directories (phase 3 of Check) by a pool of
// workers, and the checks of the entries that are not records (the
// shard's .lock, temp files, links); records are checked in record.go.

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// shardResult is what the scan of one directory found.
type shardResult struct {
	findings      []*Finding
	records       int
	live, expired int
	manifests     manifestCache
}

func (r *shardResult) add(f *Finding) {
	if f != nil && !f.gone {
		r.findings = append(r.findings, f)
	}
}

// scanRecords scans the directories of tasks with a pool of workers, kind
// by kind (targets are settled before the group manifests that name them
// are checked), and emits each directory's findings in task order. Workers
// run at most a window of directories ahead of the one being reported, so
// memory stays bounded by the findings of that window.
func (c *checker) scanRecords(tasks []task) {
	total, done := len(tasks), 0
	c.sum.Dirs = total
	for len(tasks) > 0 {
		n := 1
		for n < len(tasks) && tasks[n].kind == tasks[0].kind {
			n++
		}
		wave := tasks[:n]
		tasks = tasks[n:]
		results := make([]chan *shardResult, len(wave))
		for i := range results {
			results[i] = make(chan *shardResult, 1)
		}
		window := make(chan struct{}, 4*c.opt.Workers)
		for i := 0; i < cap(window); i++ {
			window <- struct{}{}
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < c.opt.Workers && w < len(wave); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					<-window
					i := int(next.Add(1) - 1)
					if i >= len(wave) {
						window <- struct{}{}
						return
					}
					results[i] <- c.scanDir(wave[i])
				}
			}()
		}
		for i := range wave {
			r := <-results[i]
			window <- struct{}{}
			for _, f := range r.findings {
				c.emit(f)
			}
			c.sum.Records[wave[i].kind.Dir()] += r.records
			c.sum.Live += r.live
			c.sum.Expired += r.expired
			done++
			if c.opt.Progress != nil {
				c.opt.Progress(done, total, int(c.records.Load()))
			}
		}
		wg.Wait()
	}
}

// tempID returns the ID of a temp file name .ID.json.tmp.*.
func tempID(name string) (leasefmt.ID, bool) {
	if !strings.HasPrefix(name, ".") {
		return "", false
	}
	i := strings.Index(name, ".json.tmp.")
	if i < 1 {
		return "", false
	}
	id, err := leasefmt.ParseID(name[1:i])
	return id, err == nil
}

// recordID returns the ID of a record file name ID.json.
func recordID(name string) (leasefmt.ID, bool) {
	s, ok := strings.CutSuffix(name, ".json")
	if !ok {
		return "", false
	}
	id, err := leasefmt.ParseID(s)
	return id, err == nil
}

// scanDir checks one directory of records.
func (c *checker) scanDir(t task) *shardResult {
	r := &shardResult{}
	ents, err := c.readDirSorted(t.dir)
	if err != nil {
		r.add(c.listFailed(t.dir, "cannot list the shard directory", err))
		return r
	}
	n := c.st.Table().Shards(t.kind)
	// home reports whether id's records live in this directory: only then do
	// commands lock them here.
	home := func(id leasefmt.ID) bool { return t.shard >= 0 && id.Shard(n) == t.shard }
	if t.shard >= 0 {
		for _, e := range ents {
			if e.Name() == layout.LockFile {
				r.add(c.checkLockFile(t, e.Type()))
			}
		}
	}
	for _, e := range ents {
		name, typ := e.Name(), e.Type()
		rel := path.Join(t.dir, name)
		if name == layout.LockFile && t.shard >= 0 {
			continue
		}
		if id, ok := recordID(name); ok {
			if typ&fs.ModeSymlink != 0 {
				r.add(c.recordSymlink(t, rel, id, home(id)))
				continue
			}
			c.checkRecord(t, r, rel, id, typ, home(id))
			continue
		}
		if id, ok := tempID(name); ok && typ&fs.ModeSymlink == 0 {
			r.add(c.checkTemp(t, rel, id, home(id)))
			continue
		}
		if id, st, n, ok := layout.ParseMarkerName(name); ok && t.kind == leasefmt.Work && typ.IsRegular() {
			r.add(c.checkMarker(t, rel, id, st, n, home(id)))
			continue
		}
		if typ&fs.ModeSymlink != 0 {
			r.add(c.symlink(rel, "", noUnlock))
			continue
		}
		f := &Finding{Kind: KindUnknown, Path: rel, Found: userfile.TypeName(typ) + " that is not a record, a temp file or .lock",
			Expected: "only ID.json records, their temp files, status markers and .lock"}
		r.add(f)
		if typ.IsDir() {
			// Links below are reported after the scan, in order, by the
			// main goroutine: a worker emits nothing itself.
			r.findings = append(r.findings, c.collectLinks(rel)...)
		}
	}
	return r
}

// collectLinks is walkLinks for a worker: it returns the findings.
func (c *checker) collectLinks(dir string) []*Finding {
	sub := &checker{ctx: c.ctx, fs: c.fs, disk: c.disk, st: c.st, opt: c.opt, sum: newSummary(c.opt.Repair), silly: c.silly}
	var out []*Finding
	sub.report = func(f *Finding) { out = append(out, f) }
	sub.walkLinks(dir, 0)
	return out
}

// lockHome takes id's lock in t's directory, on a repair run, when the
// directory is id's home.
func (c *checker) lockHome(t task, id leasefmt.ID, home bool) func() {
	if !home || !c.opt.Repair {
		return noUnlock
	}
	unlock, err := c.lockAt(t.dir, id)
	if err != nil {
		return noUnlock // the repair below re-checks and reports what fails
	}
	return unlock
}

// recordSymlink is the finding about a symbolic link where a record
// belongs: a repair moves the link away under the record's lock and, in
// the record's home, leaves a released record with a fresh token in its
// place (the token of whatever the link replaced is unknown).
func (c *checker) recordSymlink(t task, rel string, id leasefmt.ID, home bool) *Finding {
	unlock := c.lockHome(t, id, home)
	defer unlock()
	f := c.symlink(rel, id, noUnlock)
	if f != nil && c.opt.Repair && home {
		c.placeholderIfGone(f, t.kind, id, rel)
	}
	return f
}

// checkLockFile checks a shard's .lock: it must be a regular file (read
// locks held on it: checkReadLocks).
func (c *checker) checkLockFile(t task, typ fs.FileMode) *Finding {
	if typ.IsRegular() {
		return nil
	}
	rel := path.Join(t.dir, layout.LockFile)
	if typ&fs.ModeSymlink != 0 {
		return c.symlink(rel, "", noUnlock)
	}
	f := &Finding{Kind: KindLock, Path: rel, Found: userfile.TypeName(typ), Expected: "a regular lock file",
		Repair: "move it to lost+found/ (the next lock creates a fresh one)"}
	if c.opt.Repair {
		c.quarantineInto(rel, f, "the lock file of a shard must be a regular file")
	}
	return f
}

// checkTemp checks a temp file .ID.json.tmp.*: under the record's lock no
// writer can be active, so a temp file still there is stray.
func (c *checker) checkTemp(t task, rel string, id leasefmt.ID, home bool) *Finding {
	f := &Finding{Kind: KindTemp, Path: rel, ID: id, Found: "a temp file left by a writer that did not finish",
		Expected: "no temp file while no writer holds the record's lock", Repair: "remove it under the record's lock", Debris: home}
	unlock := noUnlock
	if home {
		u, err := c.lockAt(t.dir, id)
		if err != nil {
			if c.opt.Repair {
				failed(f, fmt.Errorf("record lock: %w", err))
			}
			return f
		}
		unlock = u
	}
	defer unlock()
	fi, err := c.fs.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // a live writer's temp file, renamed meanwhile
	case err != nil:
		return c.ioFinding(rel, "cannot stat", err)
	case !fi.Mode().IsRegular():
		f.Debris = false // no writer leaves this
		f.Found = userfile.TypeName(fi.Mode()) + " named like a temp file"
		f.Repair = "move it to lost+found/"
		if c.opt.Repair {
			c.quarantineInto(rel, f, "not a regular file")
		}
		return f
	}
	if !c.opt.Repair {
		return f
	}
	if err := c.removeDurably(rel); err != nil {
		failed(f, err)
		return f
	}
	fixed(f, "removed")
	return f
}
