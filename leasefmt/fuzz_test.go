package leasefmt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// fixtureDir is the seed corpus of FuzzDecode: valid/ and invalid/ record
// files; see its README.md.
const fixtureDir = "../fixtures/records"

// otherID is the file name ID of *-misnamed* fixtures.
var otherID = ID(strings.Repeat("0", 64))

var idField = regexp.MustCompile(`"id"\s*:\s*"([0-9a-f]{64})"`)

// fileID is the ID of the file data is read from: the ID its "id" field
// names when misnamed is false, so that a fuzzed record can be accepted.
func fileID(data []byte, misnamed bool) ID {
	if !misnamed {
		if m := idField.FindSubmatch(data); m != nil {
			return ID(m[1])
		}
	}
	return otherID
}

func kindOfFixture(name string) Kind {
	switch {
	case strings.HasPrefix(name, "target-"):
		return Target
	case strings.HasPrefix(name, "group-"):
		return Group
	}
	return Work
}

type fixture struct {
	path     string
	data     []byte
	kind     Kind
	misnamed bool
	valid    bool
}

func loadFixtures(tb testing.TB) []fixture {
	var out []fixture
	for _, sub := range []string{"valid", "invalid"} {
		paths, err := filepath.Glob(filepath.Join(fixtureDir, sub, "*.json"))
		if err != nil {
			tb.Fatal(err)
		}
		if len(paths) == 0 {
			tb.Fatalf("no fixtures in %s", filepath.Join(fixtureDir, sub))
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				tb.Fatal(err)
			}
			base := filepath.Base(p)
			out = append(out, fixture{p, data, kindOfFixture(base), strings.Contains(base, "-misnamed"), sub == "valid"})
		}
	}
	return out
}

// TestRecordFixtures pins the verdict on every fixture: valid/ accepted,
// invalid/ refused with an ErrCorrupt.
func TestRecordFixtures(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		r, err := Decode(fx.data, fx.kind, fileID(fx.data, fx.misnamed))
		switch {
		case fx.valid && err != nil:
			t.Errorf("%s: refused: %v", fx.path, err)
		case !fx.valid && err == nil:
			t.Errorf("%s: accepted: %+v", fx.path, r)
		case !fx.valid && !errors.Is(err, ErrCorrupt):
			t.Errorf("%s: error %v does not wrap ErrCorrupt", fx.path, err)
		}
	}
}

// FuzzDecode: Decode never panics; what it accepts, Encode writes, and
// decoding that gives back the same record, whose encoding is a fixed point.
func FuzzDecode(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		for k := Work; k <= Group; k++ {
			f.Add(fx.data, uint8(k), fx.misnamed)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, kind uint8, misnamed bool) {
		k := Kind(kind % 3)
		name := fileID(data, misnamed)
		r, err := Decode(data, k, name)
		if err != nil {
			if r != nil {
				t.Fatalf("Decode returned a record and an error %v", err)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if r.Kind != k || r.ID != name {
			t.Fatalf("Decode = kind %v id %s, want %v %s", r.Kind, r.ID, k, name)
		}
		enc, err := Encode(r)
		if err != nil {
			t.Fatalf("Decode accepted %q but Encode refused it: %v", data, err)
		}
		back, err := Decode(enc, k, name)
		if err != nil {
			t.Fatalf("Decode(Encode(r)) refused %q: %v (input %q)", enc, err, data)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("Decode(Encode(r)) != r:\n got %+v\nwant %+v\ninput %q\nencoded %q", back, r, data, enc)
		}
		again, err := Encode(back)
		if err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("Encode is not a fixed point: %q then %q, %v", enc, again, err)
		}
	})
}

// FuzzParseObject: the fast splitter of parseObject gives exactly what the
// decoder-based parseObjectSlow gives: the same keys in order, byte-equal
// raw values, the same error.
func FuzzParseObject(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(fx.data)
	}
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1,"a":2}`, `{"a\u0062":1,"ab":2}`, `{"a":{"b":[1,"}",{"c":"\""}]},"d":"\\"}`,
		`[1]`, `"x"`, `{"a":1}x`, `{"a":1} {"b":2}`, "{\"a\":\t1 ,\n\"b\" : [ ] }\n", `{"a":NaN}`,
		`{"a":"\ud800"}`, `{"":""}`, `{"a":-0.5e+3,"b":true,"c":null,"d":false}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ferr := parseObject(data)
		slow, serr := parseObjectSlow(data)
		if (ferr == nil) != (serr == nil) || ferr != nil && ferr.Error() != serr.Error() {
			t.Fatalf("parseObject(%q) error %v, parseObjectSlow %v", data, ferr, serr)
		}
		if ferr != nil {
			return
		}
		if !reflect.DeepEqual(fast.keys, slow.keys) && !(len(fast.keys) == 0 && len(slow.keys) == 0) {
			t.Fatalf("parseObject(%q) keys %q, parseObjectSlow %q", data, fast.keys, slow.keys)
		}
		for _, k := range slow.keys {
			if !bytes.Equal(fast.vals[k], slow.vals[k]) {
				t.Fatalf("parseObject(%q)[%q] = %q, parseObjectSlow %q", data, k, fast.vals[k], slow.vals[k])
			}
		}
	})
}
