package fsck

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/leasetool/lease/commit"
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
	if f != nil {
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
		r.add(c.ioFinding(t.dir, "cannot list the shard directory", err))
		return r
	}
	n := c.st.Table.Shards(t.kind)
	// home reports whether id's records live in this directory: only then do
	// commands lock them here.
	home := func(id leasefmt.ID) bool { return t.shard >= 0 && id.Shard(n) == t.shard }
	if t.shard >= 0 {
		for _, e := range ents {
			if e.Name() == commit.LockFile {
				r.add(c.checkLockFile(t, e.Type()))
			}
		}
	}
	for _, e := range ents {
		name, typ := e.Name(), e.Type()
		rel := path.Join(t.dir, name)
		if name == commit.LockFile && t.shard >= 0 {
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
		if typ&fs.ModeSymlink != 0 {
			r.add(c.symlink(rel, "", noUnlock))
			continue
		}
		f := &Finding{Kind: KindUnknown, Path: rel, Found: typeName(typ) + " that is not a record, a temp file or .lock",
			Expected: "only ID.json records, their temp files and .lock"}
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
	sub := &checker{fs: c.fs, st: c.st, opt: c.opt, sum: newSummary(c.opt.Repair)}
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

// checkLockFile checks a shard's .lock: it must be a regular file.
func (c *checker) checkLockFile(t task, typ fs.FileMode) *Finding {
	if typ.IsRegular() {
		return nil
	}
	rel := path.Join(t.dir, commit.LockFile)
	if typ&fs.ModeSymlink != 0 {
		return c.symlink(rel, "", noUnlock)
	}
	f := &Finding{Kind: KindLock, Path: rel, Found: typeName(typ), Expected: "a regular lock file",
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
		Expected: "no temp file while no writer holds the record's lock", Repair: "remove it under the record's lock"}
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
		f.Found = typeName(fi.Mode()) + " named like a temp file"
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

// checkRecord checks one record file.
func (c *checker) checkRecord(t task, r *shardResult, rel string, id leasefmt.ID, typ fs.FileMode, home bool) {
	var (
		rec  *leasefmt.Record
		bad  string
		berr error
	)
	if !typ.IsRegular() {
		bad = typeName(typ) + ", not a regular file"
	} else {
		data, err := c.readRecord(rel)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return // removed meanwhile
		case errors.Is(err, commit.ErrNotRegular):
			bad, berr = "not a regular file", err
		case err != nil:
			r.add(c.ioFinding(rel, "cannot read", err))
			return
		default:
			rec, berr = decodeRecord(data, t.kind, id)
			if berr != nil {
				bad = "does not validate: " + berr.Error()
			}
		}
	}
	c.records.Add(1)
	if bad != "" {
		r.add(c.invalid(t, rel, id, home, bad, berr))
		return
	}
	if !home {
		r.add(c.misplaced(t, rel, id))
		return
	}
	r.records++
	switch {
	case rec.Live(c.opt.Now):
		r.live++
	case rec.Status == leasefmt.Leased || rec.Status == leasefmt.Committing:
		r.expired++
	}
	if t.kind == leasefmt.Work && rec.Status == leasefmt.Committing && rec.Publish != "" {
		c.mu.Lock()
		c.committing = append(c.committing, committingRec{id: id, token: rec.Token, publish: rec.Publish, expires: rec.ExpiresAt})
		c.mu.Unlock()
	}
	if t.kind == leasefmt.Work {
		c.namePublished(rec)
	}
	switch {
	case t.kind == leasefmt.Group:
		r.add(c.checkGroup(rel, rec))
	case t.kind == leasefmt.Target && rec.Live(c.opt.Now):
		if r.manifests == nil {
			r.manifests = manifestCache{}
		}
		r.add(c.checkTargetGroup(rel, rec, r.manifests))
	}
}

// smallRecord is the read size tried first: records the commands write are
// a few hundred bytes, and FS.ReadFile allocates max+1 bytes for each read.
const smallRecord = 1023

// readRecord reads a record file, at most leasefmt.MaxRecordSize bytes
// plus one (so an oversize file is seen), trying a small buffer first.
func (c *checker) readRecord(rel string) ([]byte, error) {
	data, err := c.fs.ReadFile(rel, smallRecord)
	if err == nil && len(data) > smallRecord {
		data, err = c.fs.ReadFile(rel, leasefmt.MaxRecordSize)
	}
	return data, err
}

// invalid is the finding about a record that does not validate; a repair
// re-reads it under its lock and quarantines it.
func (c *checker) invalid(t task, rel string, id leasefmt.ID, home bool, bad string, cause error) *Finding {
	f := &Finding{Kind: KindInvalid, Path: rel, ID: id, Found: bad, Err: cause,
		Expected: "a valid " + t.kind.Schema() + " record", Repair: "move it to lost+found/"}
	if !c.opt.Repair {
		return f
	}
	unlock := noUnlock
	if home {
		u, err := c.lockAt(t.dir, id)
		if err != nil {
			failed(f, fmt.Errorf("record lock: %w", err))
			return f
		}
		unlock = u
	}
	defer unlock()
	fi, err := c.fs.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var data []byte
	if err == nil && fi.Mode().IsRegular() {
		data, err = c.fs.ReadFile(rel, leasefmt.MaxRecordSize)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			// Its bytes are needed: they hold the token to keep.
			failed(f, fmt.Errorf("cannot read it under its lock: %w", err))
			return f
		}
		if _, derr := leasefmt.Decode(data, t.kind, id); derr == nil {
			return nil // valid now: the next run checks it
		}
	} else if err != nil {
		failed(f, fmt.Errorf("cannot stat it under its lock: %w", err))
		return f
	}
	const why = "the record does not validate"
	if home && fi.Mode().IsRegular() && data != nil && (t.kind == leasefmt.Work || t.kind == leasefmt.Target) {
		// Copied aside, then replaced in place: the ID never has no record.
		moved, err := c.quarantineCopy(rel, f, why, data)
		if err != nil {
			failed(f, err)
			return f
		}
		f.MovedTo = moved
		fixed(f, "copied to "+moved)
		c.placeholder(f, t.kind, id, data)
		return f
	}
	c.quarantineInto(rel, f, why)
	if home {
		c.placeholderIfGone(f, t.kind, id, rel)
	}
	return f
}

// placeholderIfGone writes the placeholder once the thing at a record's
// name was moved away, also when the move was not durable (the finding
// stays failed then): a later run would find no record and could not know
// the token to keep.
func (c *checker) placeholderIfGone(f *Finding, k leasefmt.Kind, id leasefmt.ID, rel string) {
	if _, err := c.fs.Lstat(rel); errors.Is(err, fs.ErrNotExist) {
		c.placeholder(f, k, id, nil)
	}
}

// tokenField finds the values of "token" keys in bytes that do not parse.
var tokenField = regexp.MustCompile(`"token"\s*:\s*"?([0-9]{1,16})`)

// groupField finds the value of a "group" key.
var groupField = regexp.MustCompile(`"group"\s*:\s*"([0-9a-f]{64})"`)

// highWater is the highest token that can be read from the bytes of a
// record that does not validate; ok is false when none can.
func highWater(data []byte) (int64, bool) {
	best := int64(0)
	for _, m := range tokenField.FindAllSubmatch(data, -1) {
		if t, err := strconv.ParseInt(string(m[1]), 10, 64); err == nil && t <= leasefmt.MaxToken && t > best {
			best = t
		}
	}
	return best, best > 0
}

// FreshToken is a token that no claim before now can have been given: the
// time in microseconds, ahead of the clock by twice the clock skew and a
// second. Tokens start at 1 and grow by one per claim, and no two claims of
// an ID are a microsecond apart (each is a durable write), so a token that
// started at 1 stays below the microseconds elapsed since, and one that
// started from an earlier FreshToken stays below the microseconds since
// that one.
func FreshToken(now, skew float64) int64 {
	t := int64((now + 2*skew + 1) * 1e6)
	return min(max(t, 1), leasefmt.MaxToken-1)
}

// placeholder leaves, in place of a quarantined work or target record, a
// released record whose token is at least the highest token the
// quarantined bytes show, or a fresh one when they show none, so that the
// next claim of the ID gets a token larger than any earlier claim of it
// (SPEC §3: tokens never repeat, also across repair). The caller holds the
// record's lock.
func (c *checker) placeholder(f *Finding, k leasefmt.Kind, id leasefmt.ID, data []byte) {
	if k != leasefmt.Work && k != leasefmt.Target {
		return // a group's token is above its targets' tokens, which stay
	}
	token, ok := highWater(data)
	how := "the highest token the quarantined bytes show"
	if !ok {
		token, how = FreshToken(c.opt.Now, c.opt.ClockSkew), "a token no earlier claim can have had (none was readable)"
	}
	now := c.opt.Now
	rec := &leasefmt.Record{Kind: k, ID: id, Status: leasefmt.Released, Owner: "lease-fsck", Token: token,
		ClaimedAt: now, RenewedAt: now, ExpiresAt: now}
	if k == leasefmt.Target {
		rec.Group = id
		if m := groupField.FindSubmatch(data); m != nil {
			rec.Group = leasefmt.ID(m[1])
		}
	}
	if err := c.st.WriteOne(rec); err != nil {
		failed(f, fmt.Errorf("%s, but the released record that keeps its token could not be written: %w", f.Done, err))
		return
	}
	f.Done += fmt.Sprintf("; left a released record with token %d in its place (%s), so the next claim gets a larger one", token, how)
}

// misplaced is the finding about a valid record outside its shard
// directory; a repair moves it home under the home lock when no record is
// there, else quarantines it.
func (c *checker) misplaced(t task, rel string, id leasefmt.ID) *Finding {
	dest := c.st.RecordPath(t.kind, id)
	f := &Finding{Kind: KindMisplaced, Path: rel, ID: id,
		Found:    fmt.Sprintf("a valid record of shard %s in %s/", path.Base(path.Dir(dest)), t.dir),
		Expected: "in " + path.Dir(dest) + "/", Repair: "move it to " + path.Dir(dest) + "/, or to lost+found/ when a record is there"}
	if !c.opt.Repair {
		return f
	}
	unlock, err := c.st.Lock(t.kind, id)
	if err != nil {
		failed(f, fmt.Errorf("record lock: %w", err))
		return f
	}
	defer unlock()
	if _, err := c.fs.Lstat(rel); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	_, err = c.fs.Lstat(dest)
	switch {
	case err == nil:
		if c.quarantineInto(rel, f, "a record of this ID is already at "+dest) {
			f.Done = "a record is already in " + path.Dir(dest) + "/; moved to " + f.MovedTo
		}
		return f
	case !errors.Is(err, fs.ErrNotExist):
		failed(f, err)
		return f
	}
	err = c.st.DurableMove(rel, dest)
	if errors.Is(err, fs.ErrExist) {
		if c.quarantineInto(rel, f, "a record of this ID is already at "+dest) {
			f.Done = "a record is already in " + path.Dir(dest) + "/; moved to " + f.MovedTo
		}
		return f
	}
	if err != nil {
		failed(f, err)
		return f
	}
	f.MovedTo = dest
	fixed(f, "moved to "+dest)
	return f
}
