package config

// The fuzz target of the TOML configuration loader. Its seed corpus is
// fixtures/fuzz/FuzzParseConfig/ (one input per file); scripts/fuzz.sh
// fuzzes it for a while.

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// addSeeds adds every file of fixtures/fuzz/<name>/ to f's corpus, and
// fails when there is none.
func addSeeds(f *testing.F, name string) {
	dir := filepath.Join("..", "fixtures", "fuzz", name)
	paths, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seeds in %s: %v", dir, err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// FuzzParseConfig: the TOML loader never panics; an error names the file;
// what it accepts is only known keys with values the settings accept.
func FuzzParseConfig(f *testing.F) {
	addSeeds(f, "FuzzParseConfig")
	defs := map[string]Setting{}
	for _, d := range All {
		defs[d.Key] = d
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		vals, err := ParseFile("fuzz.toml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "config fuzz.toml") || !errors.Is(err, ErrUsage) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for k, v := range vals {
			d, ok := defs[k]
			if !ok {
				t.Fatalf("accepted unknown key %q", k)
			}
			if err := checkValue(d, v.Value); err != nil {
				t.Fatalf("accepted %s = %v: %v", k, v.Value, err)
			}
			if d.Kind == Float {
				if x := toFloat(v.Value); math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
					t.Fatalf("accepted %s = %v", k, x)
				}
			}
			if v.Line < 1 || v.Line > bytes.Count(data, []byte("\n"))+1 {
				t.Fatalf("%s: line %d of a %d-line file", k, v.Line, bytes.Count(data, []byte("\n"))+1)
			}
		}
	})
}
