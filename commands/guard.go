package commands

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/qualify"
)

// The filesystem guard of the commands (qualify.Inspect): lease init
// refuses to create a table on a filesystem lease knows is unsafe unless
// --force, which TABLE then records; every command that opens a table
// there warns once on stderr; and where the filesystem's client deadlocks
// under too many lock requests in flight, batches keep their writers
// below that unless --writers or LEASE_WRITERS (or the file) sets them.

// UnsafeKey is the TABLE key that records a table created by lease init
// --force on a filesystem lease knows is unsafe (lease-format(5)).
const UnsafeKey = "unsafe_filesystem"

// unsafeRecord is the value of UnsafeKey.
type unsafeRecord struct {
	FSType     string   `json:"fstype"`
	Options    []string `json:"options"`
	AcceptedBy string   `json:"accepted_by"`
	AcceptedAt float64  `json:"accepted_at"`
}

// initGuard is lease init's check, before anything is made: on a
// filesystem known unsafe it refuses (exit 2) unless force, and with force
// returns the TABLE field that records it. An existing table is not
// checked here (init changes nothing there; opening it warns).
func (e *env) initGuard(force bool) ([]leasefmt.Field, error) {
	root := e.root()
	if _, err := os.Lstat(filepath.Join(root, layout.TableFile)); err == nil {
		return nil, nil
	}
	g := qualify.Inspect(root)
	unsafe := g.Unsafe()
	if len(unsafe) == 0 {
		return nil, nil
	}
	if !force {
		return nil, usageErr("refusing to create a table at %s on a filesystem lease knows is unsafe (--force creates it anyway, recorded in TABLE): %s",
			root, unsafe[0].What)
	}
	rec := unsafeRecord{FSType: g.Mount.FSType, AcceptedBy: "lease init --force", AcceptedAt: e.now}
	for _, h := range unsafe {
		rec.Options = append(rec.Options, h.Options...)
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	return []leasefmt.Field{{Key: UnsafeKey, Value: v}}, nil
}

// guard runs the filesystem guard on the table at root before it is
// opened: it returns the writers its batches get, bounded where the
// filesystem's client can deadlock unless they were set explicitly; the
// warning of a filesystem known unsafe is given once the table is open
// (warnUnsafe: TABLE may record that it was made there on purpose).
func (e *env) guard(root string) (qualify.Guard, int) {
	g := qualify.Inspect(root)
	n, why := g.MaxWriters()
	if n == 0 || e.set.Writers <= n || e.set.Explicit("writers") {
		return g, e.set.Writers
	}
	if e.verbose {
		fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease %s: writers capped at %d (--writers or LEASE_WRITERS sets them): %s",
			e.c.Command.Name, n, why)))
	}
	return g, n
}

// warnUnsafe prints, once per command, the warning of a table on a
// filesystem known unsafe; t is its header when it was read.
func (e *env) warnUnsafe(g qualify.Guard, t *leasefmt.Table) {
	unsafe := g.Unsafe()
	if len(unsafe) == 0 || e.warned {
		return
	}
	e.warned = true
	accepted := ""
	if t != nil {
		for _, f := range t.Extra {
			if f.Key == UnsafeKey {
				accepted = " (lease init --force accepted it)"
			}
		}
	}
	fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease %s: warning: the table at %s is on a filesystem lease knows is unsafe%s: %s",
		e.c.Command.Name, e.root(), accepted, unsafe[0].What)))
}
