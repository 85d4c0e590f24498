package commands

// Fuzz targets of the command-line inputs (issue 7): the ID TOKEN line
// reader, the TOML configuration loader and group input. Seed corpora are
// the files of fixtures/fuzz/<target>/ (one input per file); go test runs
// the seeds, scripts/fuzz.sh fuzzes each target for a while.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/leasefmt"
)

const fuzzSeeds = "../fixtures/fuzz"

// addSeeds adds every file of fixtures/fuzz/<name>/ to f's corpus through
// add, and fails when there is none.
func addSeeds(f *testing.F, name string, add func(data []byte)) {
	paths, err := filepath.Glob(filepath.Join(fuzzSeeds, name, "*"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seeds in %s: %v", filepath.Join(fuzzSeeds, name), err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		add(data)
	}
}

// FuzzScanLines: the batch input reader and validator never panic, refuse
// every line over 4 KiB, and accept only lines of a valid ID and token
// with no duplicate; what they accept prints back as the same items.
func FuzzScanLines(f *testing.F) {
	addSeeds(f, "FuzzScanLines", func(data []byte) { f.Add(data) })
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := scanLines(bytes.NewReader(data), "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz") {
				t.Fatalf("error does not name the input: %v", err)
			}
			return
		}
		for _, l := range lines {
			if len(l.fields) == 0 {
				t.Fatalf("line %d: empty line kept", l.n)
			}
			for _, fld := range l.fields {
				if strings.ContainsAny(fld, " \t\n#") {
					t.Fatalf("line %d: field %q holds a separator or a comment", l.n, fld)
				}
			}
		}
		for _, withToken := range []bool{true, false} {
			items, err := parseItems(lines, withToken)
			if err != nil {
				if len(err.Error()) > 2*leasefmt.MaxErrorText {
					t.Fatalf("unbounded error text: %d bytes", len(err.Error()))
				}
				continue
			}
			if len(items) != len(lines) {
				t.Fatalf("%d items from %d lines", len(items), len(lines))
			}
			seen := map[leasefmt.ID]bool{}
			var out bytes.Buffer
			for _, it := range items {
				if _, err := leasefmt.ParseID(string(it.ID)); err != nil {
					t.Fatalf("accepted a bad id %q", it.ID)
				}
				if seen[it.ID] {
					t.Fatalf("accepted a duplicate id %s", it.ID)
				}
				seen[it.ID] = true
				if withToken && (it.Token < 1 || it.Token > leasefmt.MaxToken) {
					t.Fatalf("accepted token %d", it.Token)
				}
				if withToken {
					fmt.Fprintf(&out, "%s %d\n", it.ID, it.Token)
				} else {
					fmt.Fprintf(&out, "%s\n", it.ID)
				}
			}
			// The stdout of a filter is its next stage's input.
			again, err := scanLines(&out, "again")
			if err != nil {
				t.Fatalf("re-reading the accepted lines: %v", err)
			}
			items2, err := parseItems(again, withToken)
			if err != nil || !slices.Equal(items, items2) {
				t.Fatalf("accepted lines do not read back: %v", err)
			}
		}
	})
}

// FuzzGroupInput: the targets of group-claim, read as its stdin is, with
// an owner, a clock and a TTL. Never a panic; input accepted by
// groups.CheckInput gives a manifest that still fits in a record with the
// largest token and any later renewal time, and the default GID does not
// depend on the order of the targets.
func FuzzGroupInput(f *testing.F) {
	addSeeds(f, "FuzzGroupInput", func(data []byte) {
		f.Add(data, "host-a/fuzz-3", 1764450000.5, 120.0)
		f.Add(data, strings.Repeat("o", 256), 0.0, 1e-6)
	})
	f.Fuzz(func(t *testing.T, data []byte, owner string, now, ttl float64) {
		if leasefmt.CheckTime("now", now) != nil {
			return // no clock lease runs with (--now refuses it too)
		}
		lines, err := scanLines(bytes.NewReader(data), "stdin")
		if err != nil {
			return
		}
		items, err := parseItems(lines, false)
		if err != nil {
			return
		}
		targets := make([]leasefmt.ID, len(items))
		for i, it := range items {
			targets[i] = it.ID
		}
		gid := groups.ID(targets)
		rev := slices.Clone(targets)
		slices.Reverse(rev)
		if groups.ID(rev) != gid {
			t.Fatalf("groups.ID depends on the order of the targets")
		}
		err = groups.CheckInput(gid, targets, owner, ttl)
		if err != nil {
			if !errors.Is(err, groups.ErrInput) {
				t.Fatalf("a refusal that does not wrap groups.ErrInput: %v", err)
			}
			return
		}
		if len(targets) == 0 {
			t.Fatalf("accepted a group of no targets")
		}
		sorted := slices.Clone(targets)
		slices.Sort(sorted)
		for _, at := range []float64{now + ttl, 99999999999.999999, math.Max(now+ttl, 1e10)} {
			m := &leasefmt.Record{Kind: leasefmt.Group, ID: gid, Status: leasefmt.Released, Owner: owner,
				Token: leasefmt.MaxToken, ClaimedAt: at, RenewedAt: at, ExpiresAt: at, Targets: sorted}
			if _, err := leasefmt.Encode(m); err != nil {
				t.Fatalf("groups.CheckInput accepted %d targets, owner of %d bytes, but the manifest at %v does not encode: %v",
					len(targets), len(owner), at, err)
			}
		}
	})
}
