package fsck

import (
	"bytes"
	"strconv"

	"github.com/leasetool/lease/leasefmt"
)

// decodeRecord is leasefmt.Decode with a fast path for records in the
// canonical form the lease commands write (leasefmt.Encode): the fields are
// read by position and the record is accepted only when Encode of what was
// read reproduces the file byte for byte. Encode validates every field, and
// Decode accepts exactly what Encode writes, so the fast path accepts
// nothing Decode would refuse and returns the record Decode would return.
// Anything else (another key order, white space, escapes, unknown keys, or
// damage) goes through leasefmt.Decode. The scan of a large table spends
// most of its time here: the fast path is several times cheaper.
func decodeRecord(data []byte, k leasefmt.Kind, id leasefmt.ID) (*leasefmt.Record, error) {
	if r := parseCanonical(data, k, id); r != nil {
		return r, nil
	}
	return leasefmt.Decode(data, k, id)
}

// canon reads a canonical record from left to right.
type canon struct {
	b  []byte
	ok bool
}

func (p *canon) lit(s string) {
	if p.ok && len(p.b) >= len(s) && string(p.b[:len(s)]) == s {
		p.b = p.b[len(s):]
		return
	}
	p.ok = false
}

// str reads a string body up to its closing quote; one with an escape is
// left to the slow path.
func (p *canon) str() string {
	if !p.ok {
		return ""
	}
	for i, c := range p.b {
		switch c {
		case '"':
			s := string(p.b[:i])
			p.b = p.b[i+1:]
			return s
		case '\\':
			p.ok = false
			return ""
		}
	}
	p.ok = false
	return ""
}

// num reads a number up to the next ',' or '}'.
func (p *canon) num() string {
	if !p.ok {
		return ""
	}
	i := bytes.IndexAny(p.b, ",}")
	if i <= 0 {
		p.ok = false
		return ""
	}
	s := string(p.b[:i])
	p.b = p.b[i:]
	return s
}

func (p *canon) time() float64 {
	s := p.num()
	if !p.ok {
		return 0
	}
	t, err := strconv.ParseFloat(s, 64)
	if err != nil {
		p.ok = false
	}
	return t
}

func parseCanonical(data []byte, k leasefmt.Kind, id leasefmt.ID) *leasefmt.Record {
	p := &canon{b: data, ok: true}
	r := &leasefmt.Record{Kind: k}
	p.lit(`{"schema":"`)
	p.lit(k.Schema())
	p.lit(`","id":"`)
	r.ID = leasefmt.ID(p.str())
	p.lit(`,"status":"`)
	r.Status = leasefmt.Status(p.str())
	p.lit(`,"owner":"`)
	r.Owner = p.str()
	p.lit(`,"token":`)
	tok := p.num()
	p.lit(`,"claimed_at":`)
	r.ClaimedAt = p.time()
	p.lit(`,"renewed_at":`)
	r.RenewedAt = p.time()
	p.lit(`,"expires_at":`)
	r.ExpiresAt = p.time()
	if !p.ok || r.ID != id {
		return nil
	}
	var err error
	if r.Token, err = leasefmt.ParseToken(tok); err != nil {
		return nil
	}
	switch k {
	case leasefmt.Work:
		if len(p.b) > 0 && p.b[0] == ',' {
			p.lit(`,"publish":"`)
			r.Publish = p.str()
		}
	case leasefmt.Target:
		p.lit(`,"group":"`)
		r.Group = leasefmt.ID(p.str())
	case leasefmt.Group:
		p.lit(`,"targets":[`)
		for p.ok {
			p.lit(`"`)
			r.Targets = append(r.Targets, leasefmt.ID(p.str()))
			if len(p.b) > 0 && p.b[0] == ',' {
				p.b = p.b[1:]
				continue
			}
			p.lit(`]`)
			break
		}
	}
	p.lit("}\n")
	if !p.ok || len(p.b) != 0 {
		return nil
	}
	enc, err := leasefmt.Encode(r)
	if err != nil || !bytes.Equal(enc, data) {
		return nil
	}
	return r
}
