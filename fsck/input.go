package fsck

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// The input phase (docs/lease-format.md): input/SS/ID holds the content of
// work item ID, ID the SHA-256 of that content, SS its work shard. Every
// file is read and hashed. fsck reports and repairs:
//   - names in input/ that are not input shard directories, and files
//     that are not regular or not named by an ID (moved to lost+found/);
//   - a file whose content does not hash to its name (moved to
//     lost+found/: the item's input is gone, never silently wrong);
//   - a file in the wrong shard (moved to its shard, or to lost+found/
//     when its shard has it already);
//   - temp files .ID.tmp.* of a lease add --content that died: removed
//     once older than tempAge (a younger one may be an add at work, and is
//     a notice).
// The store is optional: a table without input/ is fine.

// tempAge is the age from which a temp file in input/ is taken for one of
// an add that died.
const tempAge = 3600

// checkInput checks input/ when it exists, as checkQueue checks queue/.
func (c *checker) checkInput(tasks []task) {
	c.checkSharded(shardedArea{top: layout.InputDir, kind: KindInput, what: "input",
		shardDir: c.st.InputShardDir, entry: c.checkInputEntry}, tasks)
}

func (c *checker) checkInputEntry(dir string, sh int, e fs.DirEntry) *Finding {
	rel := path.Join(dir, e.Name())
	typ := e.Type()
	if typ&fs.ModeSymlink != 0 {
		return c.symlink(rel, "", noUnlock)
	}
	if base, ok := strings.CutPrefix(e.Name(), "."); ok && typ.IsRegular() {
		if i := strings.Index(base, ".tmp."); i > 0 {
			return c.inputTemp(rel)
		}
	}
	id, idErr := leasefmt.ParseID(e.Name())
	what := ""
	switch {
	case idErr != nil:
		what = userfile.TypeName(typ) + " whose name is not an ID"
	case !typ.IsRegular():
		what = userfile.TypeName(typ)
	}
	quarantine := func(f *Finding, why string) *Finding {
		if c.opt.Repair {
			c.quarantineInto(rel, f, why)
		}
		return f
	}
	if what != "" {
		return quarantine(&Finding{Kind: KindInput, Path: rel, ID: id, Found: what,
			Expected: "a regular file named by the SHA-256 of its content", Repair: "move it to lost+found/ (never deleted)"},
			"the input store holds regular files named by the SHA-256 of their content")
	}
	sum, err := commit.HashFile(c.fs, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return c.ioFinding(rel, "cannot read", err)
	}
	if sum != id {
		return quarantine(&Finding{Kind: KindInput, Path: rel, ID: id, Found: "a file whose content hashes to " + string(sum) + ", not to its name",
			Expected: "the content of item " + string(id), Repair: "move it to lost+found/ (the item has no input until it is added again)"},
			"its content does not hash to its name")
	}
	if home := id.Shard(c.st.Table().WorkShards); home != sh {
		want := c.st.InputPath(id)
		f := &Finding{Kind: KindInput, Path: rel, ID: id, Found: "an input in the wrong shard directory",
			Expected: "the input at " + want, Repair: "move it to " + want + ", or to lost+found/ when it is there already"}
		if !c.opt.Repair {
			return f
		}
		if err := c.st.Disk().EnsureDir(path.Dir(want)); err != nil {
			failed(f, err)
			return f
		}
		err := c.st.Disk().Move(rel, want)
		switch {
		case errors.Is(err, fs.ErrExist):
			c.quarantineInto(rel, f, "the input is in its shard already")
		case err != nil:
			failed(f, err)
		default:
			f.MovedTo = want
			fixed(f, "moved to "+want)
		}
		return f
	}
	return nil
}

// inputTemp is the finding about a temp file of lease add --content.
func (c *checker) inputTemp(rel string) *Finding {
	fi, err := c.fs.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return c.ioFinding(rel, "cannot stat", err)
	}
	age := c.opt.Now - float64(fi.ModTime().UnixNano())/1e9
	if age < tempAge {
		return &Finding{Kind: KindUnknown, Path: rel, Found: fmt.Sprintf("a temp file of lease add --content, %.0fs old", age),
			Expected: "none once the add finished (it may be at work now; removed once an hour old)"}
	}
	f := &Finding{Kind: KindTemp, Path: rel, Found: "a temp file of a lease add --content that did not finish",
		Expected: "no temp file once the add finished", Repair: "remove it", Debris: true}
	if c.opt.Repair {
		if err := c.removeDurably(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
			failed(f, err)
		} else {
			fixed(f, "removed")
		}
	}
	return f
}
