package commands_test

// In-process tests of the work-lease commands through commands.Run: the
// filter contract, exit statuses (docs/design.md#cli), configuration origins (§6), and
// that every refused input leaves the table byte-identical. This file holds
// their helpers (the core* functions); the tests are in one file per
// command or topic: init_test.go, claim_test.go, lifecycle_test.go,
// complete_test.go, status_test.go, config_test.go, app_test.go and
// refused_test.go.

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/leasefmt"
)

// coreResult is what one run of lease did.
type coreResult struct {
	code        int
	out, errOut string
}

func (r coreResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%sstderr:\n%s", r.code, r.out, r.errOut)
}

// coreLease runs lease in-process with stdin and returns what it did.
func coreLease(t *testing.T, stdin string, args ...string) coreResult {
	t.Helper()
	var out, errb bytes.Buffer
	code := commands.Run(append([]string{"lease"}, args...), strings.NewReader(stdin), &out, &errb)
	return coreResult{code, out.String(), errb.String()}
}

// coreMust runs lease and fails the test unless it exits with want.
func coreMust(t *testing.T, want int, stdin string, args ...string) coreResult {
	t.Helper()
	r := coreLease(t, stdin, args...)
	if r.code != want {
		t.Fatalf("lease %s: %s\nwant exit %d", strings.Join(args, " "), r, want)
	}
	return r
}

// coreID and coreIDs are realistic IDs (testenv.ID: the SHA-256 of a name).
var coreID, coreIDs = testenv.ID, testenv.IDs

// coreBareRoot is a fresh table root (not yet created) in a temp dir.
func coreBareRoot(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "table")
}

// coreRoot is a fresh table (16 work shards) made by lease init: only init
// creates a table (docs/design.md#layout).
func coreRoot(t *testing.T) string {
	t.Helper()
	root := coreBareRoot(t)
	coreMust(t, 0, "", "init", "--root", root)
	return root
}

// corePath is the path of the work record of id in a table of 16 shards,
// computed from docs/design.md#layout alone.
func corePath(root string, id leasefmt.ID) string {
	var shard uint64
	fmt.Sscanf(string(id[:8]), "%x", &shard)
	return filepath.Join(root, "work", fmt.Sprintf("%02x", shard%16), string(id)+".json")
}

func coreRecord(t *testing.T, root string, id leasefmt.ID) *leasefmt.Record {
	t.Helper()
	data, err := os.ReadFile(corePath(root, id))
	if err != nil {
		t.Fatal(err)
	}
	r, err := leasefmt.Decode(data, leasefmt.Work, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// coreLines parses `ID TOKEN` lines.
func coreLines(t *testing.T, s string) map[leasefmt.ID]string {
	t.Helper()
	out := map[leasefmt.ID]string{}
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if l == "" {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 2 || l != f[0]+" "+f[1] {
			t.Fatalf("not an `ID TOKEN` line: %q", l)
		}
		out[leasefmt.ID(f[0])] = f[1]
	}
	return out
}

func coreJoin(ids []leasefmt.ID, suffix string) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(string(id) + suffix + "\n")
	}
	return b.String()
}

// coreSnapshot is every name under root with its type and bytes.
func coreSnapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == root {
				return filepath.SkipAll
			}
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			out[rel] = "symlink " + l
			return err
		case d.IsDir():
			out[rel] = "dir"
		default:
			data, err := os.ReadFile(p)
			out[rel] = "file " + string(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func coreSame(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			diffs = append(diffs, "removed "+k)
		} else if v != w {
			diffs = append(diffs, fmt.Sprintf("changed %s:\n  %q\n  %q", k, v, w))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, "added "+k)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("%s: the table changed:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// stderrLine matches `REASON ID TOKEN detail`.
var stderrLine = regexp.MustCompile(`^([a-z-]+) ([0-9a-f]{64}) (0|[1-9][0-9]*)( .*)?$`)

// coreReasons maps each ID on stderr to its reason word, checking the format.
func coreReasons(t *testing.T, errOut string) map[leasefmt.ID]string {
	t.Helper()
	out := map[leasefmt.ID]string{}
	for _, l := range strings.Split(strings.TrimSuffix(errOut, "\n"), "\n") {
		if l == "" {
			continue
		}
		m := stderrLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("stderr line is not `REASON ID TOKEN detail`: %q", l)
			continue
		}
		if len(l) > leasefmt.MaxErrorText {
			t.Errorf("stderr line of %d bytes", len(l))
		}
		out[leasefmt.ID(m[2])] = m[1]
	}
	return out
}

// coreHoldLock takes the lock of id from this process (an OFD lock on its
// own descriptor conflicts with the command's) until the test ends.
func coreHoldLock(t *testing.T, root string, id leasefmt.ID) {
	t.Helper()
	st, err := commit.Open(root, commit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := st.Lock(context.Background(), leasefmt.Work, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unlock(); st.Close() })
}

// coreInShard returns an ID named name that falls in work shard sh of 16.
func coreInShard(name string, sh int) leasefmt.ID {
	return leasefmt.ID(fmt.Sprintf("%08x", sh) + string(coreID(name))[8:])
}
