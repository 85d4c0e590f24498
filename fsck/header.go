package fsck

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// header is what phase 1 learnt about TABLE.
type header struct {
	table    *leasefmt.Table // the valid header, nil when missing or bad
	inferred *leasefmt.Table // shard counts from the directories, when table is nil
	missing  bool
	found    string
	cause    error
	why      string // why the counts could not be inferred
}

func (h *header) tableOrInferred() *leasefmt.Table {
	if h.table != nil {
		return h.table
	}
	return h.inferred
}

// readHeader reads TABLE without changing anything.
func (c *checker) readHeader() (*header, error) {
	h := &header{}
	data, err := c.fs.ReadFile(layout.TableFile, leasefmt.MaxRecordSize)
	switch {
	case err == nil:
		t, derr := leasefmt.DecodeTable(data)
		if derr == nil {
			h.table = t
			return h, nil
		}
		h.found, h.cause = "does not validate: "+derr.Error(), derr
	case errors.Is(err, fs.ErrNotExist):
		h.missing, h.found = true, "missing"
	case errors.Is(err, seam.ErrNotRegular):
		fi, lerr := c.fs.Lstat(layout.TableFile)
		h.found, h.cause = "not a regular file", err
		if lerr == nil {
			h.found = userfile.TypeName(fi.Mode()) + ", not a regular file (never followed)"
			if fi.Mode()&fs.ModeSymlink != 0 {
				h.found = c.readLink(layout.TableFile) + ", not a regular file (never followed)"
			}
		}
	default:
		return nil, fmt.Errorf("table header %s: %w", c.disk.Abs(layout.TableFile), err)
	}
	if h.missing {
		any := false
		var ioErrs []*Finding
		for _, k := range kinds {
			fi, err := c.fs.Lstat(k.Dir())
			switch {
			case err == nil && fi.IsDir():
				any = true
			case err != nil && !errors.Is(err, fs.ErrNotExist):
				ioErrs = append(ioErrs, c.ioFinding(k.Dir(), "cannot stat", err))
			}
		}
		if !any {
			if len(ioErrs) > 0 {
				return nil, fmt.Errorf("no TABLE, and %s: %w", c.disk.Abs(ioErrs[0].Path), ioErrs[0].Err)
			}
			return nil, fmt.Errorf("%w: no TABLE and no work/, targets/ or groups/ directory in %s", ErrNoTable, c.disk.Abs(""))
		}
		for _, f := range ioErrs {
			c.emit(f)
		}
	}
	h.inferred, h.why = c.inferTable()
	return h, nil
}

// inferTable reads the shard counts from the shard directories, which
// `lease init` creates, all of them, before it writes TABLE: the names of
// work/ must be exactly the shard directories 0..N-1 of some N, and those
// of targets/ and groups/ of one M. Explicit counts win.
func (c *checker) inferTable() (*leasefmt.Table, string) {
	t := &leasefmt.Table{WorkShards: c.opt.WorkShards, TargetShards: c.opt.TargetShards, CreatedAt: c.opt.Now}
	if t.WorkShards == 0 {
		n, why := c.countShards(leasefmt.Work.Dir())
		if n == 0 {
			return nil, why + " (give --shards)"
		}
		t.WorkShards = n
	}
	if t.TargetShards == 0 {
		nt, whyT := c.countShards(leasefmt.Target.Dir())
		ng, whyG := c.countShards(leasefmt.Group.Dir())
		switch {
		case nt != 0 && ng != 0 && nt != ng:
			return nil, fmt.Sprintf("targets/ has %d shard directories but groups/ has %d (give --target-shards)", nt, ng)
		case nt != 0:
			t.TargetShards = nt
		case ng != 0:
			t.TargetShards = ng
		default:
			return nil, whyT + "; " + whyG + " (give --target-shards)"
		}
	}
	return t, ""
}

// countShards returns N when the hexadecimal directory names in dir are
// exactly the shard directories of a table of N shards, else 0 and why.
func (c *checker) countShards(dir string) (int, string) {
	ents, err := c.fs.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.emit(c.ioFinding(dir, "cannot list to infer the shard counts", err))
		}
		return 0, fmt.Sprintf("cannot list %s/: %v", dir, err)
	}
	names := map[string]bool{}
	for _, e := range ents {
		// A link in a shard's place still marks the shard (it is
		// quarantined and the directory recreated).
		if (e.IsDir() || e.Type()&fs.ModeSymlink != 0) && isHex(e.Name()) {
			names[e.Name()] = true
		}
	}
	n := len(names)
	if n == 0 {
		return 0, fmt.Sprintf("%s/ has no shard directories", dir)
	}
	if n > leasefmt.MaxShards {
		return 0, fmt.Sprintf("%s/ has %d shard directories, more than %d", dir, n, leasefmt.MaxShards)
	}
	for i := 0; i < n; i++ {
		if !names[leasefmt.ShardDirName(i, n)] {
			return 0, fmt.Sprintf("the %d hexadecimal directories of %s/ are not the shards 0..%d", n, dir, n-1)
		}
	}
	return n, ""
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f') {
			return false
		}
	}
	return true
}

// fixHeader returns the finding about a missing or bad TABLE, repaired on a
// repair run: a bad header is quarantined, then a header with the inferred
// counts is written to a temp file, fsynced, moved in without replacing
// (a concurrent `lease init` wins) and the root is fsynced.
func (c *checker) fixHeader(h *header) *Finding {
	if h.table != nil {
		return nil
	}
	f := &Finding{Kind: KindTable, Path: layout.TableFile, Found: h.found, Expected: "a lease.table/v1 header", Err: h.cause}
	t := h.inferred
	if t == nil {
		f.Repair = "none possible: the shard counts are unknown: " + h.why
		if c.opt.Repair {
			failed(f, errors.New("shard counts unknown: "+h.why))
		}
		return f
	}
	f.Repair = fmt.Sprintf("write TABLE with work_shards %d and target_shards %d", t.WorkShards, t.TargetShards)
	if !h.missing {
		f.Repair = "move it to lost+found/, then " + f.Repair
	}
	if !c.opt.Repair {
		return f
	}
	done := ""
	if !h.missing {
		moved, err := c.quarantine(layout.TableFile, f, "the table header does not validate")
		if err != nil {
			failed(f, err)
			return f
		}
		f.MovedTo = moved
		done = "moved to " + moved + "; "
	}
	data, err := leasefmt.EncodeTable(t)
	if err != nil {
		failed(f, err)
		return f
	}
	tmp := durable.TempName(layout.TableFile)
	if err := c.writeNew(tmp, data); err != nil {
		failed(f, err)
		return f
	}
	if err := c.fs.RenameNoReplace(tmp, layout.TableFile); err != nil {
		c.fs.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			fixed(f, done+"another process wrote TABLE meanwhile; kept it")
			return f
		}
		failed(f, err)
		return f
	}
	if err := c.fs.SyncDir(""); err != nil {
		failed(f, err)
		return f
	}
	fixed(f, fmt.Sprintf("%swrote TABLE with work_shards %d and target_shards %d", done, t.WorkShards, t.TargetShards))
	return f
}
