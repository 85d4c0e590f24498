package fsck

// Tokens across repair (docs/design.md#records): the released record a repair leaves in
// place of a quarantined one, with a token no earlier claim can have had.

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"

	"github.com/leasetool/lease/leasefmt"
)

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
// (docs/design.md#records: tokens never repeat, also across repair). The caller holds the
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
	if k == leasefmt.Work {
		if err := c.flagIfUnqueued(id); err != nil {
			failed(f, fmt.Errorf("%s, but its flag in the tally could not be made: %w", f.Done, err))
		}
	}
}
