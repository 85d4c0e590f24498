package fsck

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// Repairs use the primitives and locks of the normal commands: records are
// rewritten with Store.WriteOne under Store.Lock, files are moved with
// durable.Disk.Move (no-replace rename, destination directory fsynced, then
// the source directory), and every directory a removal or mkdir changed is
// fsynced before the finding is reported as repaired. Nothing a record held
// is ever deleted: it is moved into lost+found/ beside a note saying why.

// unixNanos is the clock of quarantine names; a test seam.
var unixNanos = func() int64 { return time.Now().UnixNano() }

// note is the content of the NAME.why file beside a quarantined NAME.
type note struct {
	Kind          Kind   `json:"kind"`
	Path          string `json:"path"`
	ID            string `json:"id,omitempty"`
	Found         string `json:"found"`
	Expected      string `json:"expected,omitempty"`
	Why           string `json:"why"`
	QuarantinedAt string `json:"quarantined_at"`
	By            string `json:"by"`
}

// quarantineName is the lost+found/ name of rel: the directory path and base
// name flattened with '-' and a nanosecond stamp, e.g.
// work-03-<id>.json.1764450000123456789. The stamp ends in a digit, so no
// quarantined name ever ends in ".why".
func quarantineName(rel string, stamp int64) string {
	dir, base := path.Split(rel)
	prefix := strings.ReplaceAll(strings.Trim(dir, "/"), "/", "-")
	if prefix == "" {
		prefix = "root"
	}
	if len(base) > 160 {
		base = base[:160]
	}
	return prefix + "-" + base + "." + strconv.FormatInt(stamp, 10)
}

// quarantine moves rel (a file, a link, a FIFO or a directory: the name, not
// what a link points to) into lost+found/ and writes the note of f beside it.
// The note is written and fsynced first, so a crash never leaves a moved file
// without its reason; the move never replaces a name and fsyncs lost+found/
// and then rel's directory. It returns the table-relative new name.
func (c *checker) quarantine(rel string, f *Finding, why string) (string, error) {
	n := note{Kind: f.Kind, Path: rel, ID: string(f.ID), Found: f.Found, Expected: f.Expected, Why: why, By: "lease fsck --repair"}
	for try := 0; try < 100; try++ {
		stamp := unixNanos() + int64(try)
		n.QuarantinedAt = time.Unix(0, stamp).UTC().Format(time.RFC3339Nano)
		name := path.Join(layout.LostFound, quarantineName(rel, stamp))
		data, _ := json.Marshal(n)
		err := c.writeNew(name+".why", append(data, '\n'))
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("note %s: %w", name+".why", err)
		}
		err = c.disk.Move(rel, name)
		if err == nil {
			return name, nil
		}
		if _, lerr := c.fs.Lstat(name); lerr == nil {
			// Moved, but a directory fsync failed: the note stays with it,
			// and the repair is not reported as done.
			return "", fmt.Errorf("moved to %s, but not durably: %w", name, err)
		}
		c.fs.Remove(name + ".why")
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("quarantine %s: no free name in %s", rel, layout.LostFound)
}

// quarantineCopy is quarantine for a record file whose bytes are data and
// that is about to be replaced in place: the bytes are copied into
// lost+found/ (fsynced, with the note, lost+found/ fsynced) and the record
// stays where it is until the caller renames its replacement over it, so
// that no crash ever leaves the ID without a record (docs/design.md#records: a claim of a
// missing record would start its tokens over).
func (c *checker) quarantineCopy(rel string, f *Finding, why string, data []byte) (string, error) {
	n := note{Kind: f.Kind, Path: rel, ID: string(f.ID), Found: f.Found, Expected: f.Expected, Why: why, By: "lease fsck --repair"}
	for try := 0; try < 100; try++ {
		stamp := unixNanos() + int64(try)
		n.QuarantinedAt = time.Unix(0, stamp).UTC().Format(time.RFC3339Nano)
		name := path.Join(layout.LostFound, quarantineName(rel, stamp))
		nd, _ := json.Marshal(n)
		err := c.writeNew(name+".why", append(nd, '\n'))
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("note %s: %w", name+".why", err)
		}
		if err := c.writeNew(name, data); err != nil {
			c.fs.Remove(name + ".why")
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return "", fmt.Errorf("copy into %s: %w", name, err)
		}
		if err := c.fs.SyncDir(layout.LostFound); err != nil {
			return "", fmt.Errorf("copied to %s, but not durably: %w", name, err)
		}
		return name, nil
	}
	return "", fmt.Errorf("quarantine %s: no free name in %s", rel, layout.LostFound)
}

// writeNew creates name, which must not exist, with data, and fsyncs it.
// The caller fsyncs its directory.
func (c *checker) writeNew(name string, data []byte) error {
	w, err := c.fs.CreateExcl(name)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	if err == nil {
		err = w.Sync()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		c.fs.Remove(name)
	}
	return err
}

// vanished reports whether rel is gone now.
func (c *checker) vanished(rel string) bool {
	_, err := c.fs.Lstat(rel)
	return errors.Is(err, fs.ErrNotExist)
}

// removeDurably removes name and fsyncs its directory.
func (c *checker) removeDurably(name string) error {
	if err := c.fs.Remove(name); err != nil {
		return err
	}
	return c.fs.SyncDir(path.Dir(name))
}

// mkdirDurably creates directory name and fsyncs its parent.
func (c *checker) mkdirDurably(name string) error {
	if err := c.fs.Mkdir(name); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return c.fs.SyncDir(path.Dir(name))
}

// lockAt takes the lock of record id in directory dir, the lock every
// command takes for it. A read-only run never creates a lock file: where
// there is none, no writer can hold a lock, and it returns a no-op.
func (c *checker) lockAt(dir string, id leasefmt.ID) (func(), error) {
	lf := path.Join(dir, layout.LockFile)
	if !c.opt.Repair {
		if fi, err := c.fs.Lstat(lf); err != nil || !fi.Mode().IsRegular() {
			return func() {}, nil
		}
	}
	return c.fs.Lock(c.ctx, lf, id.LockOffset(), c.opt.LockTimeout)
}

func noUnlock() {}

// fixed marks f repaired with done; failed marks it not repaired.
func fixed(f *Finding, done string) { f.Repaired, f.Done = true, done }

func failed(f *Finding, err error) {
	f.Repaired = false
	f.RepairErr = err
}

// readLink describes where a link points, for messages only.
func (c *checker) readLink(rel string) string {
	t, err := os.Readlink(c.disk.Abs(rel))
	if err != nil {
		return "a symbolic link"
	}
	return "a symbolic link to " + leasefmt.Quote(t)
}
