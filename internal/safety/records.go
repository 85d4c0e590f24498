package safety

import (
	"fmt"
	"strings"

	"github.com/leasetool/lease/leasefmt"
)

// decode decodes the record file p holding data, remembering the answer:
// the same few versions recur in thousands of crash states.
func (c *checker) decode(p string, k leasefmt.Kind, id leasefmt.ID, data []byte) *leasefmt.Record {
	key := p + "\x00" + string(data)
	c.cacheMu.Lock()
	r, ok := c.cache[key]
	c.cacheMu.Unlock()
	if ok {
		return r
	}
	r, err := leasefmt.Decode(data, k, id)
	if err != nil {
		r = nil
	}
	c.cacheMu.Lock()
	c.cache[key] = r
	c.cacheMu.Unlock()
	return r
}

type recKey struct {
	kind leasefmt.Kind
	id   leasefmt.ID
}

func (k recKey) String() string { return k.kind.Dir() + "/" + string(k.id) }

type versionInfo struct {
	data []byte
	rec  *leasefmt.Record
}

// decodeAny decodes data as a record of whichever kind its schema names.
func decodeAny(data []byte) (recKey, *leasefmt.Record) {
	for _, k := range []leasefmt.Kind{leasefmt.Work, leasefmt.Target, leasefmt.Group} {
		if !strings.Contains(string(data), `"schema":"`+k.Schema()+`"`) {
			continue
		}
		i := strings.Index(string(data), `"id":"`)
		if i < 0 || i+6+leasefmt.IDLen > len(data) {
			return recKey{}, nil
		}
		id, err := leasefmt.ParseID(string(data[i+6 : i+6+leasefmt.IDLen]))
		if err != nil {
			return recKey{}, nil
		}
		r, err := leasefmt.Decode(data, k, id)
		if err != nil {
			return recKey{}, nil
		}
		return recKey{k, id}, r
	}
	return recKey{}, nil
}

// isRecordPath reports whether p is KIND/SS/ID.json for a record of kind k.
func isRecordPath(p string, k leasefmt.Kind) bool {
	parts := strings.Split(p, "/")
	return len(parts) == 3 && parts[0] == k.Dir() && strings.HasSuffix(parts[2], ".json") && !strings.HasPrefix(parts[2], ".")
}

// records lists the record files of a tree: KIND/SS/ID.json, valid or not.
func records(t *Tree) map[string][]byte {
	out := map[string][]byte{}
	t.Walk(func(p string, dir bool, data []byte) {
		if dir {
			return
		}
		for _, k := range []leasefmt.Kind{leasefmt.Work, leasefmt.Target, leasefmt.Group} {
			if isRecordPath(p, k) {
				out[p] = data
			}
		}
	})
	return out
}

func kindOf(p string) leasefmt.Kind {
	switch {
	case strings.HasPrefix(p, "targets/"):
		return leasefmt.Target
	case strings.HasPrefix(p, "groups/"):
		return leasefmt.Group
	}
	return leasefmt.Work
}

// validRecords decodes the record files of t that validate, by key, and
// reports any that validates with bytes no writer ever wrote in full (a
// torn or half-written record taken as valid).
func (c *checker) validRecords(t *Tree, extra [][]byte, where string, dups bool) (map[recKey]*leasefmt.Record, map[recKey]string, []string) {
	var bad []string
	out := map[recKey]*leasefmt.Record{}
	paths := map[recKey]string{}
	ok := func(d []byte) bool {
		if c.allowed[string(d)] {
			return true
		}
		for _, e := range extra {
			if string(e) == string(d) {
				return true
			}
		}
		return false
	}
	for p, data := range records(t) {
		k := kindOf(p)
		id, err := leasefmt.ParseID(strings.TrimSuffix(p[strings.LastIndexByte(p, '/')+1:], ".json"))
		if err != nil {
			continue
		}
		r := c.decode(p, k, id, data)
		if r == nil {
			continue
		}
		if !ok(data) {
			bad = append(bad, fmt.Sprintf("%s: %s validates but was never written in full: %q", where, p, trunc(data, 200)))
		}
		key := recKey{k, id}
		if prev, dup := paths[key]; dup && dups {
			bad = append(bad, fmt.Sprintf("%s: %s has two valid records: %s and %s", where, key, prev, p))
		}
		out[key] = r
		paths[key] = p
	}
	return out, paths, bad
}

func sameRecord(a, b *leasefmt.Record) bool {
	ea, err1 := leasefmt.Encode(a)
	eb, err2 := leasefmt.Encode(b)
	return err1 == nil && err2 == nil && string(ea) == string(eb)
}

// rolledForward: got is fsck's roll-forward of a committing record r to
// done under the same token.
func rolledForward(r, got *leasefmt.Record) bool {
	return r.Status == leasefmt.Committing && got.Status == leasefmt.Done && got.Token == r.Token &&
		got.Owner == r.Owner && got.Publish == r.Publish && got.Kind == r.Kind
}

// rolledBack: got is the roll-back of an abandoned publish r (a committing
// record that names a result) to released under the same token, by a claim
// or by fsck (docs/design.md#records).
func rolledBack(r, got *leasefmt.Record) bool {
	return r.Kind == leasefmt.Work && r.Status == leasefmt.Committing && r.Publish != "" &&
		got.Status == leasefmt.Released && got.Token == r.Token && got.Owner == r.Owner && got.Publish == ""
}

// placeholderByRepair: got is the released record fsck leaves in place of
// a record it quarantined, keeping its token (docs/design.md#records); that its token is
// high enough is checked by the claims after recovery.
func placeholderByRepair(got *leasefmt.Record) bool {
	return got.Status == leasefmt.Released && got.Owner == "lease-fsck" &&
		got.ClaimedAt == got.RenewedAt && got.RenewedAt == got.ExpiresAt
}

// releasedByRepair: got is fsck's release of r (a group it found torn)
// under the same token.
func releasedByRepair(r, got *leasefmt.Record) bool {
	return got.Status == leasefmt.Released && got.Token == r.Token && got.Owner == r.Owner && got.Kind == r.Kind &&
		r.Kind != leasefmt.Work
}
