package commands_test

// lease add --content: each item's content stored in the table,
// content-addressed (input/SS/ID, ID = lease id --content), before its ID
// is queued; files named as arguments or on stdin (lines, `ID PATH` lines,
// NUL-terminated); bad input changes nothing.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/leasefmt"
)

func TestAddContent(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	dir := t.TempDir()
	var files []string
	for _, s := range []string{"seed one\n", "seed two\n", "seed one\n"} { // the third is the first again
		f := filepath.Join(dir, "seed-"+string(rune('a'+len(files))))
		os.WriteFile(f, []byte(s), 0o644)
		files = append(files, f)
	}
	ids := strings.Fields(coreMust(t, 0, "", "id", "--content", files[0], files[1]).out)
	r := coreMust(t, 0, "", append([]string{"add", "--root", root, "--content"}, files...)...)
	if r.out != ids[0]+"\n"+ids[1]+"\n" {
		t.Fatalf("add --content printed %q, want each new ID once: %v", r.out, ids)
	}
	for i, id := range ids {
		got, err := os.ReadFile(filepath.Join(root, "input", queueShard(leasefmt.ID(id)), id))
		if err != nil || string(got) != []string{"seed one\n", "seed two\n"}[i] {
			t.Errorf("input of %s: %q, %v", id, got, err)
		}
		if _, ok := queueEntries(t, root)[leasefmt.ID(id)]; !ok {
			t.Errorf("%s not queued", id)
		}
	}
	// Again: idempotent, nothing printed; fsck finds the store clean.
	if r := coreMust(t, 0, "", "add", "--root", root, "--content", files[0]); r.out != "" {
		t.Errorf("second add printed %q", r.out)
	}
	coreMust(t, 0, "", "fsck", "--root", root)

	// From stdin: paths, and `ID PATH` lines as lease id --with-name and
	// sha256sum print them; NUL-terminated with --null.
	third := filepath.Join(dir, "name with spaces")
	os.WriteFile(third, []byte("seed three\n"), 0o644)
	named := coreMust(t, 0, "", "id", "--content", "--with-name", third).out
	r = coreMust(t, 0, named, "add", "--root", root, "--content", "-")
	if r.out != strings.Fields(named)[0]+"\n" {
		t.Errorf("add --content - of %q printed %q", named, r.out)
	}
	fourth := filepath.Join(dir, "four")
	os.WriteFile(fourth, []byte("seed four\n"), 0o644)
	r = coreMust(t, 0, fourth+"\x00"+third+"\x00", "add", "--root", root, "--content", "--null", "-")
	if strings.Count(r.out, "\n") != 1 {
		t.Errorf("add --content --null - printed %q, want the one new ID", r.out)
	}
}

func TestAddContentRefusals(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("good\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "subdir"), 0o755)
	before := coreSnapshot(t, root)
	wrong := strings.Repeat("a", 64) + "  " + good + "\n"
	for _, tc := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"--content"}},
		{"", []string{"--content", good, filepath.Join(dir, "missing")}},
		{"", []string{"--content", good, filepath.Join(dir, "subdir")}},
		{"", []string{"--content", good, ""}},
		{wrong, []string{"--content", "-"}},
		{"", []string{"--content", "--null", good}},
		{"", []string{"--null"}},
		{"", []string{"--content", good, "-"}},
	} {
		coreMust(t, 2, tc.stdin, append([]string{"add", "--root", root}, tc.args...)...)
	}
	coreSame(t, "refused add --content", before, coreSnapshot(t, root))
}

// TestFsckInput: fsck hashes every stored input; a file that does not
// hash to its name, junk and an old temp file are errors a repair moves
// to lost+found/ (or removes: the temp); a young temp file is a notice.
func TestFsckInput(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	dir := t.TempDir()
	var ids []leasefmt.ID
	for _, s := range []string{"alpha\n", "beta\n"} {
		f := filepath.Join(dir, strings.TrimSpace(s))
		os.WriteFile(f, []byte(s), 0o644)
		ids = append(ids, leasefmt.ID(strings.TrimSpace(coreMust(t, 0, "", "add", "--root", root, "--content", f).out)))
	}
	coreMust(t, 0, "", "fsck", "--root", root)
	in := func(id leasefmt.ID) string { return filepath.Join(root, "input", queueShard(id), string(id)) }
	os.WriteFile(in(ids[0]), []byte("bit rot\n"), 0o644)                                       // does not hash to its name
	os.WriteFile(filepath.Join(filepath.Dir(in(ids[1])), "junk"), []byte("x"), 0o644)          // not an ID
	oldTemp := filepath.Join(filepath.Dir(in(ids[1])), "."+string(ids[1])+".tmp.0123456789ab") // an add that died
	os.WriteFile(oldTemp, []byte("be"), 0o644)
	long := time.Now().Add(-2 * time.Hour)
	os.Chtimes(oldTemp, long, long)
	youngTemp := filepath.Join(filepath.Dir(in(ids[1])), "."+string(ids[0])+".tmp.ba9876543210") // an add at work
	os.WriteFile(youngTemp, []byte("al"), 0o644)
	before := coreSnapshot(t, root)
	r := coreMust(t, 4, "", "fsck", "--root", root)
	coreSame(t, "read-only fsck", before, coreSnapshot(t, root))
	if n := strings.Count(r.out, "error input "); n != 2 || !strings.Contains(r.out, "notice temp ") || !strings.Contains(r.out, "notice unknown") {
		t.Errorf("fsck of a damaged input store:\n%s", r.out)
	}
	coreMust(t, 1, "", "fsck", "--repair", "--root", root)
	coreMust(t, 0, "", "fsck", "--root", root)
	if _, err := os.Stat(in(ids[0])); !os.IsNotExist(err) {
		t.Errorf("the input that does not hash to its name is still there (%v)", err)
	}
	if got, err := os.ReadFile(in(ids[1])); err != nil || string(got) != "beta\n" {
		t.Errorf("the good input after repair: %q, %v", got, err)
	}
	if _, err := os.Stat(oldTemp); !os.IsNotExist(err) {
		t.Errorf("the old temp file is still there (%v)", err)
	}
	if _, err := os.Stat(youngTemp); err != nil {
		t.Errorf("the young temp file was touched: %v", err)
	}
	found, _ := filepath.Glob(filepath.Join(root, "lost+found", "input-*"))
	if len(found) != 4 { // two files, each with its .why note
		t.Errorf("lost+found holds %v, want the bad input and the junk with their notes", found)
	}
}
