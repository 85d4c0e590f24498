package damaged

// Builder's writing helpers: files, links and records at their homes, the
// IDs of each scenario, the healthy base table every scenario starts from,
// and what each one expects a repair to keep, move or change.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/leasetool/lease/leasefmt"
)

func (b *Builder) fail(err error) {
	if b.err == nil && err != nil {
		b.err = err
	}
}

func (b *Builder) abs(rel string) string { return filepath.Join(b.Root, filepath.FromSlash(rel)) }

func (b *Builder) mkdir(rel string) { b.fail(os.MkdirAll(b.abs(rel), 0o755)) }

// write writes a regular file, creating its directory.
func (b *Builder) write(rel string, data []byte) {
	b.mkdir(path.Dir(rel))
	b.fail(os.WriteFile(b.abs(rel), data, 0o644))
}

func (b *Builder) keep(rel string, data []byte) {
	b.write(rel, data)
	b.Expect.Kept[rel] = data
}

func (b *Builder) remove(rel string) { b.fail(os.RemoveAll(b.abs(rel))) }

func (b *Builder) symlink(target, rel string) {
	b.mkdir(path.Dir(rel))
	b.fail(os.Symlink(target, b.abs(rel)))
}

func (b *Builder) quarantined(o Original) { b.Expect.Quarantined = append(b.Expect.Quarantined, o) }

// ID returns the fixture ID named tag in the current scenario: the SHA-256
// of "scope/tag", or of "scope/tag/n" for the first n that puts a target or
// group ID outside the reserved shard.
func (b *Builder) ID(k leasefmt.Kind, tag string) leasefmt.ID {
	for n := 0; ; n++ {
		s := b.scope + "/" + tag
		if n > 0 {
			s += fmt.Sprintf("/%d", n)
		}
		sum := sha256.Sum256([]byte(s))
		id := leasefmt.ID(hex.EncodeToString(sum[:]))
		if k == leasefmt.Work || id.Shard(TargetShards) != reservedShard {
			return id
		}
	}
}

// baseID is the ID named tag in the base every scenario starts from.
func (b *Builder) baseID(k leasefmt.Kind, tag string) leasefmt.ID {
	scope := b.scope
	b.scope = "base"
	defer func() { b.scope = scope }()
	return b.ID(k, tag)
}

// Encode is leasefmt.Encode for records the fixture knows are valid.
func (b *Builder) encode(r *leasefmt.Record) []byte {
	data, err := leasefmt.Encode(r)
	b.fail(err)
	return data
}

// lease returns a record of kind k: leased by owner with token, claimed an
// hour before Now, expiring at expires.
func lease(k leasefmt.Kind, id leasefmt.ID, owner string, token int64, expires float64) *leasefmt.Record {
	return &leasefmt.Record{Kind: k, ID: id, Status: leasefmt.Leased, Owner: owner, Token: token,
		ClaimedAt: Now - 3600, RenewedAt: expires - 120, ExpiresAt: expires}
}

// put writes r at its home and keeps it.
func (b *Builder) put(r *leasefmt.Record) string {
	rel := Home(r.Kind, r.ID)
	b.keep(rel, b.encode(r))
	return rel
}

// putChanged writes r at its home; a repair rewrites it, and check says how.
func (b *Builder) putChanged(r *leasefmt.Record, check func(*leasefmt.Record) error) string {
	rel := Home(r.Kind, r.ID)
	b.write(rel, b.encode(r))
	b.Expect.Changed[rel] = check
	return rel
}

// group writes a consistent group: the manifest and every target carrying
// its lease.
func (b *Builder) group(tag string, token int64, expires float64, targets ...string) (*leasefmt.Record, []*leasefmt.Record) {
	gid := b.ID(leasefmt.Group, tag)
	m := lease(leasefmt.Group, gid, "host-g/"+tag, token, expires)
	var ts []*leasefmt.Record
	for _, t := range targets {
		tr := lease(leasefmt.Target, b.ID(leasefmt.Target, t), m.Owner, token, expires)
		tr.Group = gid
		ts = append(ts, tr)
		m.Targets = append(m.Targets, tr.ID)
	}
	sort.Slice(m.Targets, func(i, j int) bool { return m.Targets[i] < m.Targets[j] })
	return m, ts
}

// base is the healthy table every scenario starts from.
func (b *Builder) base() {
	b.mkdir("")
	hdr, err := leasefmt.EncodeTable(&leasefmt.Table{WorkShards: WorkShards, TargetShards: TargetShards, CreatedAt: Now - 86400})
	b.fail(err)
	b.write("TABLE", hdr)
	for _, k := range []leasefmt.Kind{leasefmt.Work, leasefmt.Target, leasefmt.Group} {
		n := WorkShards
		if k != leasefmt.Work {
			n = TargetShards
		}
		for s := 0; s < n; s++ {
			b.write(path.Join(k.Dir(), leasefmt.ShardDirName(s, n), ".lock"), nil)
		}
	}
	for _, d := range []string{"stage", "public", "lost+found"} {
		b.mkdir(d)
	}
	b.put(lease(leasefmt.Work, b.ID(leasefmt.Work, "live"), "host-a/fuzz-1", 7, Now+100))
	rel := lease(leasefmt.Work, b.ID(leasefmt.Work, "released"), "host-a/fuzz-2", 3, Now-50)
	rel.Status = leasefmt.Released
	b.put(rel)
	done := lease(leasefmt.Work, b.ID(leasefmt.Work, "done"), "host-b/fuzz-1", 2, Now-70)
	done.Status = leasefmt.Done
	b.put(done)
	b.put(lease(leasefmt.Work, b.ID(leasefmt.Work, "expired"), "host-b/fuzz-2", 4, Now-10))
	m, ts := b.group("group-ok", 9, Now+200, "t1", "t2")
	b.put(m)
	for _, t := range ts {
		b.put(t)
	}
}

// validRecord is a valid work record of id, for damage to start from.
func (b *Builder) validRecord(id leasefmt.ID) []byte {
	return b.encode(lease(leasefmt.Work, id, "host-c/fuzz-1", 5, Now+100))
}

// badRecord writes data as the record of tag and expects it quarantined,
// with a released record in its place whose token is at least min (the
// token the bytes show, or a fresh one when they show none).
func (b *Builder) badRecord(tag string, min int64, data func(id leasefmt.ID) []byte) {
	id := b.ID(leasefmt.Work, tag)
	rel := Home(leasefmt.Work, id)
	d := data(id)
	b.write(rel, d)
	b.quarantined(Original{From: rel, Data: d})
	b.Expect.Changed[rel] = isPlaceholder(min)
}

// fresh is the least token fsck leaves for a record whose bytes show none:
// one no earlier claim can have had (microseconds since the epoch at Now).
const fresh = int64(Now * 1e6)

// stagePath is the staging directory of token of id (docs/design.md#staging).
func stagePath(id leasefmt.ID, token int64) string {
	return fmt.Sprintf("stage/%s.%d", id, token)
}

func replace(data []byte, old, new string) []byte {
	return []byte(strings.Replace(string(data), old, new, 1))
}
