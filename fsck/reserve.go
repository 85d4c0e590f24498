package fsck

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/internal/userfile"
)

// checkReserve checks the reserve of spares, reserve/
// (docs/design.md#durability). A table without one has none: nothing to
// check, and a repair does not make one (lease init makes it). In it:
//
//   - spare.N regular files are the spares, .lock is their lock file;
//     anything else under those names (a directory, a FIFO) is damage,
//     moved to lost+found/, and a symbolic link is quarantined as
//     everywhere. A spare's content does not matter: a spare written by a
//     writer that died before its exchange is still a spare;
//   - .spare.tmp.* (a spare being made, by a lease init, a repair or a
//     batch that died) is debris: a repair removes it, which is safe while
//     writers run (one making it then just makes another);
//   - other names are not part of a table (a notice).
//
// A repair then tops the reserve up to Options.Spares when space allows.
// The number of spares is not a finding: a reserve used up by a full disk
// is not damage.
func (c *checker) checkReserve() {
	fi, err := c.fs.Lstat(durable.ReserveDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return
	case err != nil:
		c.emit(c.ioFinding(durable.ReserveDir, "cannot stat", err))
		return
	case !fi.IsDir():
		return // checkTop's: not a directory where one belongs
	}
	ents, err := c.readDirSorted(durable.ReserveDir)
	if err != nil {
		if f := c.listFailed(durable.ReserveDir, "cannot list the reserve", err); f != nil {
			c.emit(f)
		}
		return
	}
	for _, e := range ents {
		name, typ := e.Name(), e.Type()
		rel := path.Join(durable.ReserveDir, name)
		_, spare := durable.SpareNumber(name)
		switch {
		case typ&fs.ModeSymlink != 0:
			c.emit(c.unknownOrLink(rel, typ, ""))
		case spare && typ.IsRegular():
			c.sum.Spares++
		case rel == durable.ReserveLock && typ.IsRegular():
		case spare, rel == durable.ReserveLock:
			f := &Finding{Kind: KindReserve, Path: rel, Found: userfile.TypeName(typ), Expected: "a regular file (a spare of the reserve, or its lock file)",
				Repair: "move it to lost+found/"}
			if c.opt.Repair {
				c.quarantineInto(rel, f, "it was where a file of the reserve belongs")
			}
			c.emit(f)
		case strings.HasPrefix(name, durable.SpareTempPrefix) && typ.IsRegular():
			f := &Finding{Kind: KindReserve, Path: rel, Debris: true,
				Found:    "a spare being made by a process that died (or is at work now)",
				Expected: "only spares", Repair: "remove it"}
			if c.opt.Repair {
				if err := c.fs.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
					failed(f, err)
				} else {
					fixed(f, "removed")
				}
			}
			c.emit(f)
		default:
			c.emit(c.unknownOrLink(rel, typ, "only spares (spare.N) and their lock file"))
		}
	}
	want := c.opt.Spares
	if want == 0 {
		want = durable.DefaultSpares
	}
	if !c.opt.Repair || want < 0 || c.sum.Spares >= want {
		return
	}
	made, err := c.disk.TopUp(want)
	c.sum.SparesMade = made
	c.sum.Spares += made
	if err != nil {
		c.emit(c.ioFinding(durable.ReserveDir, fmt.Sprintf("cannot top up the reserve (%d spares made)", made), err))
	}
}
