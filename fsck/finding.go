package fsck

import (
	"fmt"
	"sort"
	"strings"

	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
)

// Kind is the type of a finding. The names are stable: they appear in the
// text report, in --json output and in the notes fsck leaves in lost+found/.
type Kind string

// The kinds of findings, in the order the report lists them.
const (
	// KindTable: the TABLE header is missing or does not validate. Repair
	// quarantines a bad header and writes one with the shard counts read
	// from the shard directories (or given by --shards/--target-shards).
	KindTable Kind = "table"
	// KindLayout: a top-level directory of the layout is missing or is not
	// a directory. Repair quarantines what is in its place and creates it.
	KindLayout Kind = "layout"
	// KindTemp: a stray temp file .ID.json.tmp.* of a writer that died
	// (debris: a killed worker leaves them), or .TABLE.tmp.* of a lease
	// init that died. Repair removes it under the record's lock, where no
	// writer can be active.
	KindTemp Kind = "temp"
	// KindInvalid: a record file that does not parse or validate (torn,
	// truncated, empty, NaN, wrong schema, ID different from the file name,
	// bad token, not a regular file). Repair quarantines it.
	KindInvalid Kind = "invalid"
	// KindMisplaced: a valid record in a directory that is not its shard's.
	// Repair moves it to its shard when no record is there, else
	// quarantines it.
	KindMisplaced Kind = "misplaced"
	// KindSymlink: a symbolic link anywhere in the table; never followed.
	// Repair quarantines the link itself (its target is not touched).
	KindSymlink Kind = "symlink"
	// KindLock: a shard's .lock that is not a regular file, so no record of
	// the shard can be locked. Repair quarantines it; the next lock
	// creates a fresh one.
	KindLock Kind = "lock"
	// KindUnfinishedPublish: a committing record whose staged result is
	// already in public/. Repair rolls it forward to done.
	KindUnfinishedPublish Kind = "unfinished-publish"
	// KindPublishLeftover: a staged result whose publication finished (the
	// same file, one inode, is in public/: a link left by a crash
	// mid-move). Repair removes the stage/ name; the bytes stay in public/.
	// A staged file that only holds the same bytes as a published one is
	// another file: it goes to lost+found/ with its staging directory.
	KindPublishLeftover Kind = "publish-leftover"
	// KindAbandonedPublish: an expired committing record whose result never
	// reached public/ (its publisher died before the move). Repair rolls it
	// back to released, as the next claim would; the staged file stays.
	KindAbandonedPublish Kind = "abandoned-publish"
	// KindStaleStage: something in stage/ that is not the staging
	// directory ID.TOKEN of a current lease: a staging directory of a
	// token that is no longer current is debris (a killed worker, a result
	// that could not be published, leave them); anything else is damage.
	// Repair removes an empty directory and moves anything else to
	// lost+found/ (never deletes it).
	KindStaleStage Kind = "stale-stage"
	// KindOrphanResult: a result in public/ that no done or committing work
	// record names. Repair moves it to lost+found/.
	KindOrphanResult Kind = "orphan-result"
	// KindQueue: something wrong in queue/ (docs/design.md#queue): a name that is not
	// a queue shard directory, an entry that is not an empty regular file
	// named by an ID (moved to lost+found/), an entry of a done item
	// (removed), an entry in the wrong shard (moved to its shard).
	KindQueue Kind = "queue"
	// KindHeld: something in held/ (docs/design.md#queue, abandoned first)
	// that is not the name ID.EXPIRY.TOKEN of a lease held: the name of an
	// item no longer held under that token is debris (a finisher killed
	// before removing it; removed by repair under the record's lock);
	// anything else (another name, a file not empty and regular, a
	// directory) is an error, moved to lost+found/.
	KindHeld Kind = "held"
	// KindInput: something wrong in the input store input/: a name that
	// is not an input shard directory, a file not named by an ID or not
	// regular, a file whose content does not hash to its name (all moved
	// to lost+found/), a file in the wrong shard (moved to its shard).
	KindInput Kind = "input"
	// KindGroup: a group manifest whose targets disagree with it (group,
	// token, owner, expiry, status). Repair releases the group and its
	// targets that still carry its token, so the group can be claimed
	// again; the old holder is fenced out by the token.
	KindGroup Kind = "group"
	// KindPermission: in a table shared by a group (lease init --shared),
	// a directory that is not setgid or not usable by the group, or a
	// shard lock file the group cannot write, or either in another group
	// than the root's: members of the group cannot lock or write there.
	// Repair sets the mode and group (as the owner or root).
	KindPermission Kind = "permission"
	// KindReserve: something wrong in the reserve of spares, reserve/
	// (docs/design.md#durability): a spare or its lock file that is not a
	// regular file (moved to lost+found/), or a spare being made by a
	// process that died (debris: removed).
	KindReserve Kind = "reserve"
	// KindNFSSillyRename: a file named .nfs and hex digits: what the Linux
	// NFS client leaves of a file removed or renamed over while one of its
	// processes had it open (a record read while another process of the
	// client replaced it); the client removes it when the file is closed.
	// Not a record, not damage: a notice, never moved or removed (it may
	// be open).
	KindNFSSillyRename Kind = "nfs-silly-rename"
	// KindUnknown: a file that is not part of a lease table. Reported, left
	// alone; a notice, not an error.
	KindUnknown Kind = "unknown"
	// KindMarker: a status marker ID.STATUS.ATTEMPTS (docs/design.md#statistics)
	// that is not a second name of its record as the record is now: the
	// record was rewritten since (by a retry that died before removing it,
	// by another program), removed, or says another status. Debris: no
	// summary trusts it. Repair removes it under the record's lock.
	KindMarker Kind = "marker"
	// KindTally: the tally (docs/design.md#statistics) disagrees with the
	// records: a finished record without its link, a link of no finished
	// record, an unfinished record neither queued nor flagged. An error
	// while the tally is trusted (the summary counts from it), debris
	// otherwise. Repair links, flags or removes under the record's lock.
	KindTally Kind = "tally"
	// KindIO: the check itself failed (a directory could not be read). An
	// operational error: exit 8.
	KindIO Kind = "io"
)

var kindOrder = []Kind{KindTable, KindLayout, KindTemp, KindInvalid, KindMisplaced, KindSymlink, KindLock,
	KindUnfinishedPublish, KindAbandonedPublish, KindPublishLeftover, KindStaleStage, KindOrphanResult, KindQueue, KindHeld, KindInput, KindGroup, KindPermission, KindMarker, KindTally, KindReserve, KindNFSSillyRename, KindUnknown, KindIO}

// Severity says how a finding counts towards the exit status.
type Severity int

// The severities.
const (
	// Error: damage; exit 4 while left, 1 once repaired.
	Error Severity = iota
	// Notice: reported, never changed, no effect on the exit status.
	Notice
	// Operational: fsck could not do its job here; exit 8.
	Operational
)

// String is the severity word of fsck's report lines.
func (s Severity) String() string {
	switch s {
	case Notice:
		return "notice"
	case Operational:
		return "operational"
	}
	return "error"
}

// Severity is the severity of findings of kind k.
func (k Kind) Severity() Severity {
	switch k {
	case KindUnknown, KindNFSSillyRename:
		return Notice
	case KindIO:
		return Operational
	}
	return Error
}

// Finding is one thing fsck found: what and where, what was expected, and,
// on a repair run, what was done about it.
type Finding struct {
	Kind Kind
	// Path is the table-relative, slash-separated name of the file.
	Path string
	// ID is the record the finding is about, "" when there is none.
	ID leasefmt.ID
	// Found says what is there; Expected what should be.
	Found, Expected string
	// Err is the underlying cause, when there is one.
	Err error
	// Debris: not damage but the normal leftovers of a worker that was
	// killed (a temp file of its writes, the staging directory of a token
	// that is no longer current). It is reported as a notice and never
	// changes the exit status; a repair run sweeps it (an empty directory
	// or a temp file removed, anything staged moved to lost+found/).
	Debris bool
	// Repair says what --repair does about it ("" for notices).
	Repair string

	// Repaired is set when a repair run fixed it; Done then says how.
	Repaired bool
	Done     string
	// RepairErr is why a repair run could not fix it.
	RepairErr error
	// MovedTo is the table-relative name in lost+found/ (or the shard) the
	// file was moved to.
	MovedTo string

	// gone is set when the name vanished before the repair could move it
	// (a worker renamed or removed it meanwhile): then it is no finding.
	gone bool
}

// Severity is the severity of f's kind; Notice for debris.
func (f *Finding) Severity() Severity {
	if f.Debris {
		return Notice
	}
	return f.Kind.Severity()
}

// Error renders f on one line, table-relative.
func (f *Finding) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", f.Kind, f.Path)
	if f.ID != "" {
		fmt.Fprintf(&b, " id %s", f.ID)
	}
	fmt.Fprintf(&b, ": %s", f.Found)
	if f.Expected != "" {
		fmt.Fprintf(&b, "; want %s", f.Expected)
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (f *Finding) Unwrap() error { return f.Err }

// Left reports whether f is an error a repair did not fix, or debris a
// repair run failed to sweep (the failure is the error).
func (f *Finding) Left() bool {
	return !f.Repaired && (f.Severity() == Error || f.Debris && f.RepairErr != nil)
}

// Summary counts what a check found and did.
type Summary struct {
	// Table is the header used for the check (read, or inferred when the
	// header was missing or bad); nil when the shard counts were unknown.
	Table *leasefmt.Table
	// Repair is whether this was a repair run.
	Repair bool
	// Dirs is the number of shard directories scanned.
	Dirs int
	// Records counts the valid records checked, by kind directory.
	Records map[string]int
	// Live and Expired count leased or committing records by whether
	// now < expires_at. Expiry is normal; expired leases are not touched.
	Live, Expired int
	// Found counts the findings by kind (debris included); Repaired the
	// errors a repair fixed; Left the errors still there.
	Found, Repaired, Left map[Kind]int
	// Debris counts the findings that are debris, by kind, and Swept the
	// ones a repair run swept; neither changes the exit status.
	Debris, Swept map[Kind]int
	// Trusted: the tally is trusted after the check (it was, or this
	// repair run built and checked it); Tallied counts the links and flags
	// a repair run made in a tally nothing trusted yet.
	Trusted bool
	Tallied int
	// Marked counts the status markers a repair run made for done or
	// failed records that had none (docs/design.md#statistics).
	Marked int
	// Spares is the number of spares in the reserve (after a repair's
	// top-up); SparesMade how many the repair made. A table without a
	// reserve has none.
	Spares, SparesMade int
}

func newSummary(repair bool) *Summary {
	return &Summary{Repair: repair, Records: map[string]int{}, Found: map[Kind]int{}, Repaired: map[Kind]int{}, Left: map[Kind]int{},
		Debris: map[Kind]int{}, Swept: map[Kind]int{}}
}

func (s *Summary) add(f *Finding) {
	s.Found[f.Kind]++
	if f.Debris {
		s.Debris[f.Kind]++
		switch {
		case f.Repaired:
			s.Swept[f.Kind]++
		case f.RepairErr != nil:
			s.Left[f.Kind]++
		}
		return
	}
	switch {
	case f.Repaired:
		s.Repaired[f.Kind]++
	case f.Severity() == Error:
		s.Left[f.Kind]++
	}
}

// Count sums m.
func Count(m map[Kind]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// Errors counts the error findings (repaired or not; debris is none).
func (s *Summary) Errors() int {
	n := 0
	for k, v := range s.Found {
		if k.Severity() == Error {
			n += v - s.Debris[k]
		}
	}
	return n
}

// Exit is the fsck(8) exit status, a sum of bits: 1 errors corrected,
// 4 errors left uncorrected, 8 operational error; 0 when clean.
func (s *Summary) Exit() int {
	code := exitcode.FsckClean
	if Count(s.Repaired) > 0 {
		code |= exitcode.FsckCorrected
	}
	if Count(s.Left) > 0 {
		code |= exitcode.FsckLeft
	}
	if s.Found[KindIO] > 0 {
		code |= exitcode.FsckOperational
	}
	return code
}

// Kinds returns the kinds present in m in report order.
func Kinds(m map[Kind]int) []Kind {
	var out []Kind
	for _, k := range kindOrder {
		if m[k] > 0 {
			out = append(out, k)
		}
	}
	var extra []Kind
	for k, v := range m {
		if v > 0 && !known(k) {
			extra = append(extra, k)
		}
	}
	sort.Slice(extra, func(a, b int) bool { return extra[a] < extra[b] })
	return append(out, extra...)
}

func known(k Kind) bool {
	for _, o := range kindOrder {
		if o == k {
			return true
		}
	}
	return false
}
