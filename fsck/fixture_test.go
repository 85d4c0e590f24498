package fsck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/fsck"
	"github.com/leasetool/lease/internal/damaged"
	"github.com/leasetool/lease/leasefmt"
)

var update = flag.Bool("update", false, "rewrite the golden reports in fixtures/damaged/golden")

const goldenDir = "../fixtures/damaged/golden"

// entry is one name of a snapshot: its mode (type and permissions) and its
// bytes or link target.
type entry struct {
	Mode fs.FileMode
	Data string
	Link string
}

// snapshot records every name below root, without following links.
func snapshot(t testing.TB, root string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{Mode: fi.Mode()}
		switch {
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.Data = string(data)
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Link, _ = os.Readlink(p)
		}
		out[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffSnapshots(a, b map[string]entry) []string {
	var d []string
	for k, v := range a {
		w, ok := b[k]
		switch {
		case !ok:
			d = append(d, "gone: "+k)
		case v != w:
			d = append(d, fmt.Sprintf("changed: %s: %v %q %q -> %v %q %q", k, v.Mode, v.Data, v.Link, w.Mode, w.Data, w.Link))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, "new: "+k)
		}
	}
	sort.Strings(d)
	return d
}

// run runs the checker through the real filesystem (optionally hooked).
func run(t testing.TB, root string, repair bool, hook seam.Hook) (*fsck.Summary, []*fsck.Finding) {
	t.Helper()
	osfs, err := seam.OS(root)
	if err != nil {
		t.Fatal(err)
	}
	defer osfs.Close()
	var f seam.FS = osfs
	if hook != nil {
		f = seam.WithHook(osfs, hook)
	}
	var found []*fsck.Finding
	sum, err := fsck.Check(context.Background(), root, f, fsck.Options{Repair: repair, Now: damaged.Now}, func(f *fsck.Finding) { found = append(found, f) })
	if err != nil {
		t.Fatalf("fsck: %v", err)
	}
	return sum, found
}

func build(t testing.TB, s damaged.Scenario) (string, *damaged.Expect) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "table")
	exp, err := damaged.Build(root, s)
	if err != nil {
		t.Fatal(err)
	}
	return root, exp
}

func describe(found []*fsck.Finding) string {
	var b strings.Builder
	for _, f := range found {
		fmt.Fprintf(&b, "  %s repaired=%v err=%v done=%q\n", f.Error(), f.Repaired, f.RepairErr, f.Done)
	}
	return b.String()
}

// isRecordHome reports whether rel is the home path of a record ID.json.
func isRecordHome(rel string) (leasefmt.Kind, leasefmt.ID, bool) {
	parts := strings.Split(rel, "/")
	if len(parts) != 3 {
		return 0, "", false
	}
	var k leasefmt.Kind
	switch parts[0] {
	case "work":
		k = leasefmt.Work
	case "targets":
		k = leasefmt.Target
	case "groups":
		k = leasefmt.Group
	default:
		return 0, "", false
	}
	id, err := leasefmt.ParseID(strings.TrimSuffix(parts[2], ".json"))
	if err != nil || !strings.HasSuffix(parts[2], ".json") || damaged.Home(k, id) != rel {
		return 0, "", false
	}
	return k, id, true
}

// TestDamage builds every scenario and checks the fsck(8) contract on it:
// a read-only run reports and changes no byte, name or mode; a repair run
// exits as the scenario says; a second run is clean; valid records are
// unchanged; everything that left its place is in lost+found/ with its
// bytes and a note, or at its home.
func TestDamage(t *testing.T) {
	for _, s := range damaged.Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			root, exp := build(t, s)
			before := snapshot(t, root)

			sum, found := run(t, root, false, nil)
			if got := sum.Exit(); got != s.Check {
				t.Fatalf("read-only exit %d, want %d; findings:\n%s", got, s.Check, describe(found))
			}
			if d := diffSnapshots(before, snapshot(t, root)); len(d) > 0 {
				t.Fatalf("a read-only run changed the table:\n%s", strings.Join(d, "\n"))
			}
			if s.Check == 4 && sum.Errors() == 0 {
				t.Fatal("exit 4 without an error finding")
			}

			sum, found = run(t, root, true, nil)
			if got := sum.Exit(); got != s.Repair {
				t.Fatalf("repair exit %d, want %d; findings:\n%s", got, s.Repair, describe(found))
			}
			after := snapshot(t, root)

			sum, found = run(t, root, false, nil)
			if got := sum.Exit(); got != 0 || sum.Errors() != 0 {
				t.Fatalf("second run exit %d with %d errors, want a clean table; findings:\n%s", got, sum.Errors(), describe(found))
			}
			checkExpect(t, root, exp, before, after)
		})
	}
}

// checkExpect checks the repaired table against the scenario's Expect and
// against the generic rules (valid records untouched, nothing lost).
func checkExpect(t *testing.T, root string, exp *damaged.Expect, before, after map[string]entry) {
	t.Helper()
	for rel, data := range exp.Kept {
		if e, ok := after[rel]; !ok || !e.Mode.IsRegular() || e.Data != string(data) {
			t.Errorf("kept file %s changed or gone: %+v", rel, e)
		}
	}
	for _, d := range append(append([]string{}, exp.KeptDirs...), exp.Created...) {
		if e, ok := after[d]; !ok || !e.Mode.IsDir() {
			t.Errorf("%s is not a directory after the repair", d)
		}
	}
	for from, mv := range exp.Moved {
		if _, ok := after[from]; ok {
			t.Errorf("misplaced %s still there", from)
		}
		if e := after[mv.To]; e.Data != string(mv.Data) {
			t.Errorf("misplaced %s not at %s with its bytes: %q", from, mv.To, e.Data)
		}
	}
	for _, rel := range exp.Removed {
		if _, ok := after[rel]; ok {
			t.Errorf("%s not removed", rel)
		}
	}
	for rel, check := range exp.Changed {
		e, ok := after[rel]
		if !ok || !e.Mode.IsRegular() {
			t.Errorf("%s missing after the repair", rel)
			continue
		}
		if rel == "TABLE" {
			tb, err := leasefmt.DecodeTable([]byte(e.Data))
			if err != nil || tb.WorkShards != damaged.WorkShards || tb.TargetShards != damaged.TargetShards {
				t.Errorf("TABLE after repair: %v %+v", err, tb)
			}
			continue
		}
		k, id, _ := isRecordHome(rel)
		r, err := leasefmt.Decode([]byte(e.Data), k, id)
		if err != nil {
			t.Errorf("%s does not validate after the repair: %v", rel, err)
			continue
		}
		if check != nil {
			if err := check(r); err != nil {
				t.Errorf("%s: %v", rel, err)
			}
		}
	}
	for _, o := range exp.Quarantined {
		if _, ok := after[o.From]; ok && o.Type != fs.ModeDir {
			if e := after[o.From]; e.Mode.Type() == o.Type && e.Data == string(o.Data) && e.Link == o.Link {
				t.Errorf("%s was not moved", o.From)
			}
		}
		if !inLostFound(after, o.From, o.Type, string(o.Data), o.Link) {
			t.Errorf("%s is not in lost+found/ with its original bytes and a note", o.From)
		}
	}
	// Generic: every record that validated at its home is unchanged unless
	// the scenario says fsck rewrites it; every name that vanished (but the
	// removed temp files and leftovers, and moved records) is in lost+found/.
	removed := map[string]bool{}
	for _, r := range exp.Removed {
		removed[r] = true
	}
	for rel, e := range before {
		if k, id, ok := isRecordHome(rel); ok && e.Mode.IsRegular() {
			if _, err := leasefmt.Decode([]byte(e.Data), k, id); err == nil {
				if _, changed := exp.Changed[rel]; !changed && after[rel] != e {
					t.Errorf("valid record %s changed: %q -> %q", rel, e.Data, after[rel].Data)
				}
			}
		}
		if _, ok := after[rel]; ok || removed[rel] || strings.Contains(rel, "/") && removedBelow(exp, before, rel) {
			continue
		}
		if mv, ok := exp.Moved[rel]; ok && after[mv.To].Data == e.Data {
			continue
		}
		if !inLostFound(after, rel, e.Mode.Type(), e.Data, e.Link) {
			t.Errorf("%s vanished and is not in lost+found/", rel)
		}
	}
	for rel := range after {
		if strings.Contains(path.Base(rel), ".tmp.") && !strings.HasPrefix(rel, "lost+found/") {
			t.Errorf("temp file %s left", rel)
		}
	}
}

// removedBelow reports whether rel vanished with a parent that was moved
// to lost+found/ as a whole (a directory where a record belongs).
func removedBelow(exp *damaged.Expect, before map[string]entry, rel string) bool {
	for _, o := range exp.Quarantined {
		if o.Type == fs.ModeDir && strings.HasPrefix(rel, o.From+"/") {
			return true
		}
	}
	return false
}

// inLostFound finds the quarantined copy of from: named for it, same type
// and bytes or link target, with a note naming it.
func inLostFound(after map[string]entry, from string, typ fs.FileMode, data, link string) bool {
	dir, base := path.Split(from)
	prefix := strings.ReplaceAll(strings.Trim(dir, "/"), "/", "-")
	if prefix == "" {
		prefix = "root"
	}
	prefix = "lost+found/" + prefix + "-" + base + "."
	for rel, e := range after {
		if !strings.HasPrefix(rel, prefix) || strings.HasSuffix(rel, ".why") || strings.Contains(rel[len(prefix):], "/") {
			continue
		}
		if e.Mode.Type() != typ || e.Data != data || e.Link != link {
			continue
		}
		note, ok := after[rel+".why"]
		if !ok {
			return false
		}
		var n struct{ Kind, Path, Found string }
		if json.Unmarshal([]byte(note.Data), &n) != nil || n.Path != from || n.Kind == "" || n.Found == "" {
			return false
		}
		return true
	}
	return false
}

// TestReadOnlyWritesNothing runs a read-only check of the scenario with
// everything through a filesystem that fails every call that could change
// a byte: the check must not make one, and must find the same.
func TestReadOnlyWritesNothing(t *testing.T) {
	s, _ := damaged.Lookup("all")
	root, _ := build(t, s)
	var calls []string
	hook := func(op seam.Op, name string) error {
		switch op {
		case seam.OpRead, seam.OpReadDir, seam.OpLstat, seam.OpLock:
			return nil
		}
		calls = append(calls, string(op)+" "+name)
		return errors.New("read-only run wrote")
	}
	sum, found := run(t, root, false, hook)
	if len(calls) > 0 {
		t.Fatalf("a read-only run tried to change the table: %v", calls)
	}
	want, _ := run(t, root, false, nil)
	if sum.Exit() != 4 || sum.Errors() != want.Errors() || len(found) == 0 {
		t.Fatalf("hooked run: exit %d, %d errors; plain run: %d errors", sum.Exit(), sum.Errors(), want.Errors())
	}
}

// TestRepairFaults fails the fsync of lost+found/ (and then of a shard
// directory) during a repair: the finding must not be reported as repaired
// (exit 4, not 1), and a later run without faults must finish the job
// with every byte still somewhere.
func TestRepairFaults(t *testing.T) {
	for _, tc := range []struct{ scenario, dir string }{
		{"invalid-empty", "lost+found"},
		{"temp", "work/"},
		{"unfinished-publish", "work/"},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			s, _ := damaged.Lookup(tc.scenario)
			root, exp := build(t, s)
			before := snapshot(t, root)
			failed := 0
			hook := func(op seam.Op, name string) error {
				if op == seam.OpSyncDir && strings.HasPrefix(name, tc.dir) {
					failed++
					return errors.New("injected fsync failure")
				}
				return nil
			}
			sum, found := run(t, root, true, hook)
			if failed == 0 {
				t.Fatal("no directory fsync was made where the fault was injected")
			}
			if sum.Exit()&4 == 0 || sum.Exit()&1 != 0 && fsck.Count(sum.Left) == 0 {
				t.Fatalf("exit %d after failed fsyncs; findings:\n%s", sum.Exit(), describe(found))
			}
			for _, f := range found {
				if f.Repaired && (strings.HasPrefix(f.Path, tc.dir) || strings.HasPrefix(f.MovedTo, tc.dir)) {
					t.Errorf("reported repaired although its directory fsync failed: %s", f.Error())
				}
			}
			if sum, found := run(t, root, true, nil); sum.Exit()&^1 != 0 {
				t.Fatalf("repair without faults: exit %d\n%s", sum.Exit(), describe(found))
			}
			if sum, found := run(t, root, false, nil); sum.Exit() != 0 {
				t.Fatalf("third run: exit %d\n%s", sum.Exit(), describe(found))
			}
			checkExpect(t, root, exp, before, snapshot(t, root))
		})
	}
}

var nanos = regexp.MustCompile(`\.\d{19}\b`)

// normalize makes a report stable: paths root-relative, quarantine stamps
// replaced.
func normalize(out, root string) string {
	out = strings.ReplaceAll(out, root+"/", "")
	out = strings.ReplaceAll(out, root, ".")
	return nanos.ReplaceAllString(out, ".NANOS")
}

func lease(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := commands.Run(append([]string{"lease"}, args...), strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// TestGolden compares the reports of `lease fsck` on every scenario (read
// only, --repair, again, and --json) with the golden files; -update
// rewrites them.
func TestGolden(t *testing.T) {
	for _, s := range damaged.Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			root, _ := build(t, s)
			now := strconv.FormatFloat(damaged.Now, 'f', -1, 64)
			var text strings.Builder
			fmt.Fprintf(&text, "# %s: %s\n", s.Name, s.Doc)
			jsonOut, _, _ := lease(t, "fsck", "--root", root, "--now", now, "--json")
			for _, args := range [][]string{
				{"fsck", "--root", root, "--now", now},
				{"fsck", "--repair", "--root", root, "--now", now},
				{"fsck", "--root", root, "--now", now},
			} {
				out, errs, code := lease(t, args...)
				fmt.Fprintf(&text, "$ lease %s\n%s", strings.Join(args, " "), out)
				if errs != "" {
					fmt.Fprintf(&text, "[stderr]\n%s", errs)
				}
				fmt.Fprintf(&text, "[exit %d]\n", code)
			}
			got := map[string]string{
				s.Name + ".txt":   normalize(text.String(), root),
				s.Name + ".jsonl": normalize(jsonOut, root),
			}
			for name, g := range got {
				file := filepath.Join(goldenDir, name)
				if *update {
					if err := os.WriteFile(file, []byte(g), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("%v (go test ./fsck -run TestGolden -update writes it)", err)
				}
				if g != string(want) {
					t.Errorf("%s differs from the golden report (go test ./fsck -run TestGolden -update rewrites it):\n--- got\n%s\n--- want\n%s", file, g, want)
				}
			}
		})
	}
}
