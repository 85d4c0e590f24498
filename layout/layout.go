// Package layout names the files and directories of a lease table
// (SPEC.md "Layout", docs/design.md#layout) and parses those names back:
// pure functions of IDs, tokens, statuses and times, no I/O. The write
// engine (package commit), the census, the queue, lease fsck and the
// safety harness all spell a table's names through it, so a name is
// written in one place.
package layout

import (
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/leasetool/lease/leasefmt"
)

// Top-level names of a table (docs/design.md#layout).
const (
	TableFile = "TABLE"
	StageDir  = "stage"
	PublicDir = "public"
	LostFound = "lost+found"
	LockFile  = ".lock"
)

// StagePath is the table-relative staging directory of the holder of
// token of id, stage/ID.TOKEN (docs/design.md#staging): results staged there can only
// be published while token is current.
func StagePath(id leasefmt.ID, token int64) string {
	return StageDir + "/" + string(id) + "." + strconv.FormatInt(token, 10)
}

// ParseStageName parses the name ID.TOKEN of a staging directory.
func ParseStageName(name string) (leasefmt.ID, int64, bool) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return "", 0, false
	}
	id, err := leasefmt.ParseID(name[:i])
	if err != nil {
		return "", 0, false
	}
	tok, err := leasefmt.ParseToken(name[i+1:])
	if err != nil {
		return "", 0, false
	}
	return id, tok, true
}

// QueueDir is the directory of the queue, below the root.
const QueueDir = "queue"

// InputDir is the directory of the input store, below the root.
const InputDir = "input"

// HeldDir is the directory of the names of leases in flight.
const HeldDir = "held"

// HeldName is the name in held/ of the lease of id with token that expires
// at expires: ID.E.TOKEN, E the expiry rounded up to the second.
func HeldName(id leasefmt.ID, expires float64, token int64) string {
	return string(id) + "." + strconv.FormatInt(heldSecond(expires), 10) + "." + strconv.FormatInt(token, 10)
}

// heldSecond is t rounded up to the second, bounded to what a name can say.
func heldSecond(t float64) int64 {
	switch {
	case math.IsNaN(t) || t < 0:
		return 0
	case t >= 1e17:
		return 1e17
	}
	return int64(math.Ceil(t))
}

// ParseHeldName reads a name of held/: the ID, E and TOKEN; false for any
// other name (numbers in canonical decimal, no sign, no leading zero).
func ParseHeldName(name string) (leasefmt.ID, int64, int64, bool) {
	if len(name) < 68 || name[64] != '.' {
		return "", 0, 0, false
	}
	id, err := leasefmt.ParseID(name[:64])
	if err != nil {
		return "", 0, 0, false
	}
	e, t, ok := strings.Cut(name[65:], ".")
	if !ok {
		return "", 0, 0, false
	}
	ev, ok1 := canonicalNumber(e)
	tv, ok2 := canonicalNumber(t)
	if !ok1 || !ok2 || tv < 1 || tv > leasefmt.MaxToken {
		return "", 0, 0, false
	}
	return id, ev, tv, true
}

func canonicalNumber(s string) (int64, bool) {
	if s == "" || len(s) > 18 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// Marked reports whether a work record with status gets a marker (and a
// link in the tally): done and failed.
func Marked(status leasefmt.Status) bool {
	return status == leasefmt.Done || status == leasefmt.Failed
}

// MarkerName is the name of the marker of a record of id with status and
// attempts: ID.STATUS.ATTEMPTS.
func MarkerName(id leasefmt.ID, status leasefmt.Status, attempts int64) string {
	return string(id) + "." + string(status) + "." + strconv.FormatInt(attempts, 10)
}

// ParseMarkerName returns the ID, status and attempts a marker name says;
// false for any other name.
func ParseMarkerName(name string) (leasefmt.ID, leasefmt.Status, int64, bool) {
	if len(name) < 66 || name[64] != '.' {
		return "", "", 0, false
	}
	id, err := leasefmt.ParseID(name[:64])
	if err != nil {
		return "", "", 0, false
	}
	st, n, ok := strings.Cut(name[65:], ".")
	if !ok || (st != string(leasefmt.Done) && st != string(leasefmt.Failed)) || n == "" || len(n) > 18 {
		return "", "", 0, false
	}
	if len(n) > 1 && n[0] == '0' {
		return "", "", 0, false
	}
	a, err := strconv.ParseInt(n, 10, 64)
	if err != nil || a < 0 {
		return "", "", 0, false
	}
	return id, leasefmt.Status(st), a, true
}

// The tally's names (what the tally is: commit/tally.go,
// docs/design.md#statistics).
const (
	// TallyDir is the tally's directory in the table.
	TallyDir = "tally"
	// TallyBucket is the span of one bucket in seconds.
	TallyBucket = 300
	// TrustedFile says the tally holds every finished record.
	TrustedFile = TallyDir + "/TRUSTED"
	// TrustPending is what lease fsck --repair makes before it checks the
	// tally and renames to TrustedFile when the check passed; a writer that
	// meets a failure meanwhile removes it, so the repair trusts nothing
	// that failed during its walk.
	TrustPending = TallyDir + "/TRUSTED.pending"
	// UnqueuedDir holds a flag per item whose record was made without a
	// queue entry.
	UnqueuedDir = TallyDir + "/unqueued"
	// CheckpointFile keeps the counts of cold buckets (a cache: it is
	// rebuilt when missing or unreadable).
	CheckpointFile = TallyDir + "/CHECKPOINT"
)

// TallyBucketOf is the bucket of a finished record: its renewed_at rounded
// down to TallyBucket seconds.
func TallyBucketOf(rec *leasefmt.Record) int64 {
	t := rec.RenewedAt
	if math.IsNaN(t) || t < 0 {
		t = 0
	}
	return int64(t/TallyBucket) * TallyBucket
}

// TallyBucketDir is the table-relative directory of bucket b.
func TallyBucketDir(b int64) string { return path.Join(TallyDir, strconv.FormatInt(b, 10)) }

// TallyPath is the table-relative path of rec's link in the tally.
func TallyPath(rec *leasefmt.Record) string {
	return path.Join(TallyBucketDir(TallyBucketOf(rec)), MarkerName(rec.ID, rec.Status, rec.Attempts))
}

// UnqueuedFlag is the flag of id, an item whose record was made while it
// had no queue entry.
func UnqueuedFlag(id leasefmt.ID) string { return path.Join(UnqueuedDir, string(id)) }

// ParseBucket reads a bucket directory's name; false for any other name.
func ParseBucket(name string) (int64, bool) {
	if name == "" || len(name) > 18 || (len(name) > 1 && name[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	b, err := strconv.ParseInt(name, 10, 64)
	return b, err == nil && b%TallyBucket == 0
}

// ResultPaths are the table-relative names of the result that the holder
// of token of id publishes as publish: where it is staged and its name in
// public/.
func ResultPaths(id leasefmt.ID, token int64, publish string) (staged, public string) {
	if publish == leasefmt.PublishStage {
		return StagePath(id, token), path.Join(PublicDir, string(id))
	}
	return path.Join(StagePath(id, token), publish), path.Join(PublicDir, publish)
}
