package commands

// The spool of a streamed batch (stream.go): the whole input is validated
// before anything is written, but a million IDs must not be held in
// memory for it. The first pass parses every line and writes each item,
// packed, to an unlinked temporary file; the second reads it back a chunk
// at a time. Duplicates (refused by the commands that take ID TOKEN lines,
// counted by lease add's inode warning) are found by sorting a 64-bit hash
// of each ID with its position, and confirmed against the spool.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
)

// spoolRecord is the size of one spooled item: the ID's 32 bytes, its
// token, the index of its input source and its line number.
const spoolRecord = 32 + 8 + 4 + 4

// spool holds the validated items of a batch on disk, in input order.
type spool struct {
	f    *os.File
	w    *bufio.Writer
	n    int
	srcs []string
	seed maphash.Seed
	// hashes are the hashes of the IDs of every item, for the duplicate
	// check; released once it is done.
	hashes []uint64
	// distinct is the number of distinct IDs (after finish).
	distinct int
}

// newSpool makes the spool in os.TempDir() and unlinks it at once, so
// that nothing is left behind whatever ends the process.
func newSpool() (*spool, error) {
	f, err := os.CreateTemp("", "lease-input-*")
	if err != nil {
		return nil, cli.Exit(leasefmt.Bound(fmt.Sprintf("input spool: %v", err)), exitcode.IO)
	}
	os.Remove(f.Name())
	return &spool{f: f, w: bufio.NewWriterSize(f, 1<<16), seed: maphash.MakeSeed()}, nil
}

// close releases the spool's file.
func (s *spool) close() { s.f.Close() }

// add appends an item read at line n of src.
func (s *spool) add(it commit.Item, src string, n int) error {
	var rec [spoolRecord]byte
	if _, err := hex.Decode(rec[:32], []byte(it.ID)); err != nil {
		return fmt.Errorf("input spool: id %s: %w", it.ID, err) // ParseID let it through: a bug
	}
	if len(s.srcs) == 0 || s.srcs[len(s.srcs)-1] != src {
		s.srcs = append(s.srcs, src)
	}
	binary.LittleEndian.PutUint64(rec[32:], uint64(it.Token))
	binary.LittleEndian.PutUint32(rec[40:], uint32(len(s.srcs)-1))
	binary.LittleEndian.PutUint32(rec[44:], uint32(n))
	if _, err := s.w.Write(rec[:]); err != nil {
		return cli.Exit(leasefmt.Bound(fmt.Sprintf("input spool: %v", err)), exitcode.IO)
	}
	s.hashes = append(s.hashes, maphash.String(s.seed, string(it.ID)))
	s.n++
	return nil
}

// finish ends the first pass: the spool is flushed, the distinct IDs are
// counted and, with unique, an ID that appears twice is refused as
// parseItems refuses it (the first line, in input order, whose ID came
// earlier).
func (s *spool) finish(unique bool) error {
	if err := s.w.Flush(); err != nil {
		return cli.Exit(leasefmt.Bound(fmt.Sprintf("input spool: %v", err)), exitcode.IO)
	}
	hs := s.hashes
	s.hashes = nil
	slices.Sort(hs)
	repeated := false
	for i := range hs {
		if i == 0 || hs[i] != hs[i-1] {
			s.distinct++
		} else {
			repeated = true
		}
	}
	if !unique || !repeated {
		return nil
	}
	// A hash that occurs twice is almost always one ID repeated: read the
	// spool in order for the first line whose ID came earlier.
	twice := func(h uint64) bool {
		i, _ := slices.BinarySearch(hs, h)
		return i+1 < len(hs) && hs[i+1] == h
	}
	first := map[uint64][]int{}
	for pos := 0; pos < s.n; pos++ {
		it, src, n, err := s.at(pos)
		if err != nil {
			return err
		}
		h := maphash.String(s.seed, string(it.ID))
		if !twice(h) {
			continue
		}
		for _, p := range first[h] {
			if prev, psrc, pn, err := s.at(p); err != nil {
				return err
			} else if prev.ID == it.ID {
				return usageErr("%s:%d: duplicate id %s (first at %s:%d)", src, n, it.ID, psrc, pn)
			}
		}
		first[h] = append(first[h], pos)
	}
	return nil
}

// at reads the item at position pos with where it was read.
func (s *spool) at(pos int) (commit.Item, string, int, error) {
	var rec [spoolRecord]byte
	if _, err := s.f.ReadAt(rec[:], int64(pos)*spoolRecord); err != nil {
		return commit.Item{}, "", 0, cli.Exit(leasefmt.Bound(fmt.Sprintf("input spool: %v", err)), exitcode.IO)
	}
	it, src, n := s.decode(rec[:])
	return it, src, n, nil
}

func (s *spool) decode(rec []byte) (commit.Item, string, int) {
	it := commit.Item{ID: leasefmt.ID(hex.EncodeToString(rec[:32])), Token: int64(binary.LittleEndian.Uint64(rec[32:]))}
	return it, s.srcs[binary.LittleEndian.Uint32(rec[40:])], int(binary.LittleEndian.Uint32(rec[44:]))
}

// chunks calls do with the items in input order, at most size at a time,
// until do returns false or the spool ends.
func (s *spool) chunks(size int, do func(items []commit.Item) bool) error {
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, int64(s.n)*spoolRecord), 1<<16)
	items := make([]commit.Item, 0, size)
	var rec [spoolRecord]byte
	for left := s.n; left > 0; {
		items = items[:0]
		for len(items) < size && left > 0 {
			if _, err := io.ReadFull(r, rec[:]); err != nil {
				return cli.Exit(leasefmt.Bound(fmt.Sprintf("input spool: %v", err)), exitcode.IO)
			}
			it, _, _ := s.decode(rec[:])
			items = append(items, it)
			left--
		}
		if !do(items) {
			return nil
		}
	}
	return nil
}

// inputForm is the line format a streamed command reads.
type inputForm int

const (
	// formQueue: `ID` or `ID TOKEN` (lease add: the token is checked and
	// ignored).
	formQueue inputForm = iota
	// formIDs: `ID` (claim of a candidate list).
	formIDs
	// formTokens: `ID TOKEN` (renew-batch, complete).
	formTokens
)

// spoolInput reads the FILE arguments (or stdin) line by line, validating
// each, into sp: the same checks and messages as readInput and
// parseItems, without holding the lines.
func spoolInput(c *cli.Context, args []string, form inputForm, sp *spool) error {
	return eachInput(c, args, func(r io.Reader, src string) error {
		return scanItems(r, src, form, func(it commit.Item, n int) error { return sp.add(it, src, n) })
	})
}

// scanItems reads the lines of r (named src in messages) in form, blank
// lines and # comments skipped, and calls add with the item of each and its
// line number; the first bad line, or add's first error, ends it.
func scanItems(r io.Reader, src string, form inputForm, add func(it commit.Item, n int) error) error {
	return eachLine(r, src, func(n int, f [][]byte) error {
		it, err := parseFields(src, n, form, f)
		if err != nil {
			return err
		}
		return add(it, n)
	})
}

// parseFields validates the fields f of line n of src.
func parseFields(src string, n int, form inputForm, f [][]byte) (commit.Item, error) {
	all := func() string { return leasefmt.Quote(string(bytes.Join(f, []byte(" ")))) }
	switch form {
	case formQueue:
		if len(f) > 2 {
			return commit.Item{}, usageErr("%s:%d: malformed line %s: want \"ID\" or \"ID TOKEN\"", src, n, all())
		}
		id, err := leasefmt.ParseID(string(f[0]))
		if err != nil {
			return commit.Item{}, usageErr("%s:%d: %v", src, n, err)
		}
		if len(f) == 2 {
			if _, err := leasefmt.ParseToken(string(f[1])); err != nil {
				return commit.Item{}, usageErr("%s:%d: %s: %v", src, n, id, err)
			}
		}
		return commit.Item{ID: id}, nil
	case formIDs, formTokens:
		want, shape := 2, "ID TOKEN"
		if form == formIDs {
			want, shape = 1, "ID"
		}
		if len(f) != want {
			return commit.Item{}, usageErr("%s:%d: malformed line %s: want %q", src, n, all(), shape)
		}
		id, err := leasefmt.ParseID(string(f[0]))
		if err != nil {
			return commit.Item{}, usageErr("%s:%d: %v", src, n, err)
		}
		it := commit.Item{ID: id}
		if form == formTokens {
			if it.Token, err = leasefmt.ParseToken(string(f[1])); err != nil {
				return commit.Item{}, usageErr("%s:%d: %s: %v", src, n, id, err)
			}
		}
		return it, nil
	}
	panic("unknown input form")
}
