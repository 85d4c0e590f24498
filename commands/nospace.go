package commands

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/qualify"
)

// A batch that runs out of space (ENOSPC: no free inode or no free block)
// fails every record after the first that met it the same way, for the
// same reason: `lease add` of 10^5 IDs on a filesystem out of inodes
// printed 10^5 identical lines. The report says it once, with the count of
// what was not done and whether inodes or bytes ran out; a single record
// that failed so keeps its own line (its path and what was left) beside
// it. --json keeps every result.

// outOfSpace reports whether r failed because the filesystem was full.
func outOfSpace(r commit.Result) bool {
	return r.Outcome == commit.IOError && errors.Is(r.Cause, unix.ENOSPC)
}

// spaceLine is the one line that says n of total IDs were not done for
// want of space, naming the first and what the filesystem ran out of.
func (e *env) spaceLine(cmd string, n, total int, first commit.Result) string {
	verb := "done"
	if d := descriptors[cmd]; d != nil && d.NotDone != "" {
		verb = d.NotDone
	}
	what := fmt.Sprintf("%d of %d IDs not %s (the first: %s %s)", n, total, verb, first.ID, shownToken(first.Item.Token, first.Token))
	return leasefmt.Bound(fmt.Sprintf("lease %s: %s: %s", cmd, spaceLeft(e.root()), what))
}

// spaceLeft says which of inodes and bytes the table's filesystem ran out
// of, as statfs tells now.
func spaceLeft(root string) string {
	n, err := qualify.InodesOf(root)
	free, serr := qualify.Space(root)
	switch {
	case err == nil && n.Known && n.Free == 0:
		s := fmt.Sprintf("out of inodes: the table's filesystem at %s has 0 of %d inodes free", root, n.Total)
		if serr == nil {
			s += fmt.Sprintf(" (bytes are not the limit: %s free)", bytesText(free))
		}
		return s + fmt.Sprintf("; each queued item takes %d inodes, its queue entry and its record: free some, or use a filesystem with more (mkfs.ext4 -N)", qualify.ItemInodes)
	case serr == nil && free == 0:
		s := fmt.Sprintf("out of space: the table's filesystem at %s has no byte free", root)
		if err == nil && n.Known {
			s += fmt.Sprintf(" (%d inodes free)", n.Free)
		}
		return s
	}
	s := fmt.Sprintf("no space left on the table's filesystem at %s", root)
	if err == nil && serr == nil && n.Known {
		s += fmt.Sprintf(" (now %s and %d inodes free: space freed since, or a quota)", bytesText(free), n.Free)
	}
	return s
}

// bytesText renders a byte count for messages.
func bytesText(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d bytes", b)
	}
	v, suffix := float64(b), "KMGTPE"
	i := -1
	for v >= unit && i < len(suffix)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, suffix[i])
}

// warnInodes is lease add's warning before it queues more items than the
// inodes left on the table's filesystem can hold (each takes two: its
// queue entry and, once claimed, its record). IDs already queued or done
// take none, so it counts an upper bound: the distinct IDs of the input.
func warnInodes(e *env, st *commit.Store, distinct int) {
	n, err := qualify.InodesOf(st.Root())
	if err != nil || !n.Known {
		return
	}
	if want := uint64(distinct) * qualify.ItemInodes; want > n.Free {
		fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease add: warning: %d IDs to add need up to %d inodes (%d each: a queue entry and a record), "+
			"but the table's filesystem at %s has %d of %d free: room for about %d more items; the rest will fail, out of inodes",
			distinct, want, qualify.ItemInodes, st.Root(), n.Free, n.Total, n.Room())))
	}
}
