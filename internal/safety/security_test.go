package safety

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// The names a table may hold (docs/design.md#layout), as the FS seam sees them.
var tableName = regexp.MustCompile(`^(` +
	`|TABLE|\.TABLE\.tmp\.[0-9a-f]+` +
	`|(work|targets|groups)(/[0-9a-f]{2,4}(/(\.lock|[0-9a-f]{64}\.json|\.[0-9a-f]{64}\.json\.tmp\.[0-9a-f]+|[0-9a-f]{64}\.(done|failed)\.(0|[1-9][0-9]*)))?)?` + // markers: docs/design.md#statistics
	`|queue(/[0-9a-f]{2,4}(/[0-9a-f]{64})?)?` +
	`|held(/[0-9a-f]{64}\.(0|[1-9][0-9]{0,17})\.[1-9][0-9]{0,17})?` + // abandoned first: docs/design.md#queue
	`|input(/[0-9a-f]{2,4}(/([0-9a-f]{64}|\.[0-9a-f]{64}\.tmp\.[0-9a-f]+))?)?` +
	`|stage(/[0-9a-f]{64}\.[1-9][0-9]*(/[^/\x00]+)*|/[^/\x00]+)?` + // a directory result has any names below ID.TOKEN/
	`|public(/[^/\x00]+)*` +
	`|lost\+found(/[^/\x00]+)?` +
	`|reserve(/(\.lock|spare\.(0|[1-9][0-9]{0,5})|\.spare\.tmp\.[0-9a-f]+))?` +
	`|tally(/(TRUSTED|TRUSTED\.pending|CHECKPOINT|\.CHECKPOINT\.tmp\.[0-9a-f]+|unqueued(/[0-9a-f]{64})?|(0|[1-9][0-9]*)(/[0-9a-f]{64}\.(done|failed)\.(0|[1-9][0-9]*))?))?` + // docs/design.md#tally
	`)$`)

// TestNamesFromValidatedIDs: every name any explored operation (claims,
// renewals, groups, publish, init, fsck --repair of a damaged table) passes
// through the FS seam is one of the table's names, built from a validated
// ID: no other path is ever touched.
func TestNamesFromValidatedIDs(t *testing.T) {
	n := 0
	for _, sc := range append(allScenarios(), FullDiskScenarios()...) {
		run, _, err := Record(sc, nil)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		for _, c := range run.Rec.Calls() {
			n++
			if !tableName.MatchString(c.Name) {
				t.Errorf("%s: %s %q is not a name of the table", sc.Name, c.Op, c.Name)
			}
		}
	}
	t.Logf("%d calls checked", n)
}

// treeState is every name below dir with its type, mode, size, mtime and a
// hash of its content or link target: a change anywhere shows.
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			out[p] = "error " + err.Error()
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		desc := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			desc += " -> " + l
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out[p] = desc
		return nil
	})
	return out
}

func diffStates(a, b map[string]string) []string {
	var d []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			d = append(d, "removed "+k)
		} else if v != w {
			d = append(d, "changed "+k+": "+v+" -> "+w)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, "added "+k)
		}
	}
	sort.Strings(d)
	return d
}

type procResult struct {
	code   int
	out    string
	errOut string
	maxRSS int64 // KiB
}

// lease runs the binary with stdin and returns what it did.
func lease(t *testing.T, stdin io.Reader, args ...string) procResult {
	t.Helper()
	cmd := exec.Command(leaseBinary(t), args...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := procResult{out: out.String(), errOut: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("lease %v: %v", args, err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss
	}
	return r
}

// newTable makes a table in a fresh directory beside a canary directory
// that nothing may touch; it returns the root and the canary.
func newTable(t *testing.T) (root, canary string) {
	t.Helper()
	dir := t.TempDir()
	root, canary = filepath.Join(dir, "table"), filepath.Join(dir, "canary")
	if err := os.MkdirAll(canary, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(canary, "precious"), []byte("do not touch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := lease(t, nil, "init", "--root", root, "--shards", "4", "--target-shards", "4"); r.code != 0 {
		t.Fatalf("init: %d %s", r.code, r.errOut)
	}
	return root, canary
}

// TestHostileIDsTouchNothing: IDs that are not 64 lowercase hex digits,
// in arguments or on stdin, to every command that takes IDs, are refused
// with exit 2 before any file is touched, in the table or beside it.
func TestHostileIDsTouchNothing(t *testing.T) {
	t.Parallel()
	root, canary := newTable(t)
	good := string(TestID(1))
	bad := []string{
		"../../canary/precious", "../" + good[:61], good[:63], good + "0", strings.ToUpper(good),
		good[:32] + "/" + good[33:], good[:62] + "..", "." + good[1:], good[:63] + "\u00e9", good[:63] + "g",
		"-" + good[1:], good[:63] + " ", "*", "",
	}
	before := treeState(t, filepath.Dir(root))
	for _, id := range bad {
		lines := []string{id + " 1\n", good + " 1\n" + id + " 1\n"}
		cases := [][]string{
			{"claim", "--root", root, id},
			{"group-claim", "--root", root, good, id},
			{"group-claim", "--root", root, "--group", id, good},
		}
		for _, args := range cases {
			if id == "" && args[0] == "claim" {
				continue // an empty argument is refused too, but reads stdin first
			}
			if r := lease(t, strings.NewReader(""), args...); r.code != 2 {
				t.Errorf("lease %q: exit %d, want 2\n%s", args, r.code, r.errOut)
			}
		}
		for _, cmd := range []string{"renew-batch", "release", "complete", "verify", "group-renew", "group-release"} {
			for _, in := range lines {
				if r := lease(t, strings.NewReader(in), cmd, "--root", root); r.code != 2 {
					t.Errorf("lease %s < %q: exit %d, want 2\n%s", cmd, in, r.code, r.errOut)
				}
			}
		}
		if id == "" {
			continue // a blank line is skipped, as the filter contract says
		}
		if r := lease(t, strings.NewReader(id+"\n"), "claim", "--root", root, "-"); r.code != 2 {
			t.Errorf("lease claim - < %q: exit %d, want 2", id, r.code)
		}
	}
	if d := diffStates(before, treeState(t, filepath.Dir(root))); len(d) > 0 {
		t.Errorf("refused IDs changed files:\n%s", strings.Join(d, "\n"))
	}
	for _, name := range []string{"../canary/precious", "../../etc/passwd", "/etc/passwd", "..", filepath.Join(root, "stage", "..", "TABLE")} {
		tok := lease(t, nil, "claim", "--root", root, string(TestID(2)))
		before = treeState(t, filepath.Dir(root)) // the claim changed the table; what follows must not
		if r := lease(t, strings.NewReader(strings.TrimSpace(tok.out)+"\n"), "complete", "--root", root, "--publish", name); r.code != 2 {
			t.Errorf("complete --publish %q: exit %d, want 2\n%s", name, r.code, r.errOut)
		}
		if d := diffStates(before, treeState(t, filepath.Dir(root))); len(d) > 0 {
			t.Errorf("complete --publish %q changed files:\n%s", name, strings.Join(d, "\n"))
		}
		lease(t, strings.NewReader(strings.TrimSpace(tok.out)+"\n"), "release", "--root", root)
		before = treeState(t, filepath.Dir(root))
	}
	if d := diffStates(before, treeState(t, filepath.Dir(root))); len(d) > 0 {
		t.Errorf("refused input changed files:\n%s", strings.Join(d, "\n"))
	}
	if b, err := os.ReadFile(filepath.Join(canary, "precious")); err != nil || string(b) != "do not touch\n" {
		t.Errorf("the canary beside the table changed: %q %v", b, err)
	}
}

// TestPlantedSymlinksNeverFollowedForWriting plants symbolic links into a
// table, each pointing outside it, and runs every writing command (and
// fsck --repair) over it: nothing outside may change, whatever the exit.
func TestPlantedSymlinksNeverFollowedForWriting(t *testing.T) {
	t.Parallel()
	id := TestID(7)
	gts := []leasefmt.ID{TestID(300), TestID(301)}
	type plant struct {
		name string
		// link returns the table-relative name to replace with a link and
		// whether the link points to a directory
		link func(st *commit.Store) (rel string, dir bool)
	}
	shardOf := func(st *commit.Store, k leasefmt.Kind, id leasefmt.ID) string {
		return st.ShardDir(k, id.Shard(st.Table().Shards(k)))
	}
	plants := []plant{
		{"work shard directory", func(st *commit.Store) (string, bool) { return shardOf(st, leasefmt.Work, id), true }},
		{"work record", func(st *commit.Store) (string, bool) { return st.RecordPath(leasefmt.Work, id), false }},
		{"work lock file", func(st *commit.Store) (string, bool) {
			return filepath.Join(shardOf(st, leasefmt.Work, id), layout.LockFile), false
		}},
		{"target shard directory", func(st *commit.Store) (string, bool) { return shardOf(st, leasefmt.Target, gts[0]), true }},
		{"target record", func(st *commit.Store) (string, bool) { return st.RecordPath(leasefmt.Target, gts[0]), false }},
		{"target lock file", func(st *commit.Store) (string, bool) {
			return filepath.Join(shardOf(st, leasefmt.Target, gts[0]), layout.LockFile), false
		}},
		{"group manifest", func(st *commit.Store) (string, bool) {
			return st.RecordPath(leasefmt.Group, groups.ID(gts)), false
		}},
		{"staged result", func(*commit.Store) (string, bool) { return "stage/result.bin", false }},
		{"stage directory", func(*commit.Store) (string, bool) { return "stage", true }},
		{"public directory", func(*commit.Store) (string, bool) { return "public", true }},
		{"lost+found", func(*commit.Store) (string, bool) { return "lost+found", true }},
		{"work directory", func(*commit.Store) (string, bool) { return "work", true }},
		{"TABLE", func(*commit.Store) (string, bool) { return "TABLE", false }},
	}
	for _, p := range plants {
		t.Run(p.name, func(t *testing.T) {
			root, canary := newTable(t)
			st, err := commit.Open(root, commit.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rel, dir := p.link(st)
			st.Close()
			abs := filepath.Join(root, rel)
			// the link's target: a copy of what was there (so a follower would
			// find a plausible table), in the canary directory
			target := filepath.Join(canary, "target")
			if dir {
				if err := os.MkdirAll(abs, 0o777); err != nil {
					t.Fatal(err)
				}
				if err := exec.Command("cp", "-a", abs, target).Run(); err != nil {
					t.Fatal(err)
				}
			} else {
				data := []byte("{}\n")
				if b, err := os.ReadFile(abs); err == nil {
					data = b
				}
				if rel == "stage/result.bin" {
					data = []byte("staged elsewhere\n")
				}
				if err := os.WriteFile(target, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			os.RemoveAll(abs)
			os.MkdirAll(filepath.Dir(abs), 0o777)
			if err := os.Symlink(target, abs); err != nil {
				t.Fatal(err)
			}
			before := treeState(t, canary)
			now := fmt.Sprint(time.Now().Unix())
			r := lease(t, nil, "claim", "--root", root, "--now", now, string(id))
			held := strings.TrimSpace(r.out)
			if held == "" {
				held = string(id) + " 1"
			}
			runs := []struct {
				stdin string
				args  []string
			}{
				{held + "\n", []string{"renew-batch", "--root", root, "--now", now}},
				{held + "\n", []string{"verify", "--root", root, "--now", now}},
				{held + "\n", []string{"complete", "--root", root, "--now", now, "--publish", "result.bin"}},
				{held + "\n", []string{"complete", "--root", root, "--now", now}},
				{held + "\n", []string{"release", "--root", root, "--now", now}},
				{"", []string{"group-claim", "--root", root, "--now", now, string(gts[0]), string(gts[1])}},
				{string(groups.ID(gts)) + " 1\n", []string{"group-renew", "--root", root, "--now", now}},
				{string(groups.ID(gts)) + " 1\n", []string{"group-release", "--root", root, "--now", now}},
				{"", []string{"status", "--root", root}},
				{"", []string{"fsck", "--root", root, "--repair", "--progress", "never"}},
				{"", []string{"claim", "--root", root, "--now", now, string(TestID(8))}},
			}
			var exits []string
			for _, run := range runs {
				res := lease(t, strings.NewReader(run.stdin), run.args...)
				exits = append(exits, fmt.Sprintf("%s=%d", run.args[0], res.code))
			}
			if d := diffStates(before, treeState(t, canary)); len(d) > 0 {
				t.Errorf("a link at %s was followed for writing (exits %v):\n%s", rel, exits, strings.Join(d, "\n"))
			}
			t.Logf("exits: %s", strings.Join(exits, " "))
		})
	}
}

// TestFileModes: with umasks 022, 027 and 077, every file the commands
// create is 0666 less the umask and every directory 0777 less the umask,
// but the shard lock files, which only their owner may open (0600 less the
// umask): a read lock needs only read access and stops every writer.
func TestFileModes(t *testing.T) {
	bin := leaseBinary(t)
	for _, umask := range []int{0o022, 0o027, 0o077, 0o002} {
		t.Run(fmt.Sprintf("umask %03o", umask), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "table")
			ids := []string{string(TestID(1)), string(TestID(2)), string(TestID(3))}
			script := fmt.Sprintf(`set -e
umask %03o
L=%q
R=%q
$L init --root "$R" --shards 4 >/dev/null
$L claim --root "$R" %s %s %s > held
$L renew-batch --root "$R" < held > held2
head -1 held2 > one
mkdir -p "$R/stage/%s.1"
printf 'result\n' > "$R/stage/%s.1/out.bin"
$L complete --root "$R" --publish out.bin < one >/dev/null
tail -1 held2 | $L release --root "$R" >/dev/null
$L group-claim --root "$R" %s %s >/dev/null
printf '{"torn' > "$R/work/00/%s.json"
$L fsck --root "$R" --repair --progress never >/dev/null || test $? -le 1
`, umask, bin, root, ids[0], ids[1], ids[2], ids[0], ids[0], TestID(400), TestID(401), strings.Repeat("0", 64))
			cmd := exec.Command("sh", "-c", script)
			cmd.Dir = t.TempDir()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			files, dirs := 0, 0
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					t.Fatal(err)
				}
				fi, _ := os.Lstat(p)
				rel, _ := filepath.Rel(root, p)
				if strings.HasPrefix(rel, "stage/"+ids[0]+".1") || rel == "public/out.bin" || strings.HasPrefix(rel, "lost+found/work-00-") && !strings.HasSuffix(rel, ".why") {
					return nil // made by the script's printf, not by lease
				}
				want := fs.FileMode(0o666 &^ umask)
				if d.Name() == ".lock" {
					want = fs.FileMode(0o600 &^ umask)
				}
				if fi.IsDir() {
					want = fs.FileMode(0o777 &^ umask)
					dirs++
				} else {
					files++
				}
				if p != root && fi.Mode().Perm() != want {
					t.Errorf("%s: mode %03o, want %03o", rel, fi.Mode().Perm(), want)
				}
				return nil
			})
			if files < 10 || dirs < 10 {
				t.Fatalf("only %d files and %d directories checked", files, dirs)
			}
		})
	}
}

// endless is a reader of one endless line, counting what was read.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	if e.n >= 1<<30 {
		return 0, io.EOF
	}
	for i := range p {
		p[i] = 'a'
	}
	e.n += int64(len(p))
	return len(p), nil
}

// TestOversizeInputsBounded: a 1 GiB line on stdin is refused with exit 2
// after reading a bounded amount; a 1 GiB record file is read only up to
// 4 KiB + 1 and reported corrupt (exit 3); memory stays small.
func TestOversizeInputsBounded(t *testing.T) {
	root, _ := newTable(t)
	for _, args := range [][]string{
		{"renew-batch", "--root", root},
		{"claim", "--root", root, "-"},
		{"verify", "--root", root},
		{"group-renew", "--root", root},
	} {
		in := &endless{}
		r := lease(t, in, args...)
		if r.code != 2 {
			t.Errorf("lease %s < 1 GiB line: exit %d, want 2\n%s", args[0], r.code, r.errOut)
		}
		// the pipe and the scanner hold at most a few hundred KiB; reading
		// the whole GiB would show here
		if in.n > 16<<20 {
			t.Errorf("lease %s read %d bytes of a 1 GiB line before refusing it", args[0], in.n)
		}
		if r.maxRSS > 200<<10 {
			t.Errorf("lease %s used %d KiB of memory on a 1 GiB line", args[0], r.maxRSS)
		}
		t.Logf("%s: refused after %d bytes of stdin, max RSS %d KiB: %s", args[0], in.n, r.maxRSS, strings.TrimSpace(r.errOut))
	}
	// A huge (sparse) record file.
	id := TestID(5)
	st, err := commit.Open(root, commit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rel := st.RecordPath(leasefmt.Work, id)
	f, err := os.Create(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"schema":"lease.work/v1","id":"` + string(id) + `",`)
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	data, err := st.FS().ReadFile(rel, leasefmt.MaxRecordSize)
	if err != nil || len(data) != leasefmt.MaxRecordSize+1 {
		t.Fatalf("ReadFile of a 1 GiB record: %d bytes, %v; want %d", len(data), err, leasefmt.MaxRecordSize+1)
	}
	if _, err := st.Read(context.Background(), leasefmt.Work, id); !errors.Is(err, leasefmt.ErrCorrupt) {
		t.Fatalf("Read of a 1 GiB record: %v, want corrupt", err)
	}
	for _, run := range []struct {
		stdin string
		args  []string
		want  int
	}{
		{"", []string{"claim", "--root", root, string(id)}, 3},
		{string(id) + " 1\n", []string{"verify", "--root", root}, 3},
		{string(id) + " 1\n", []string{"renew-batch", "--root", root}, 3},
		{"", []string{"status", "--root", root}, 3},
		{"", []string{"fsck", "--root", root, "--progress", "never"}, 4},
	} {
		r := lease(t, strings.NewReader(run.stdin), run.args...)
		if r.code != run.want {
			t.Errorf("lease %s over a 1 GiB record: exit %d, want %d\n%s", run.args[0], r.code, run.want, r.errOut)
		}
		if r.maxRSS > 200<<10 {
			t.Errorf("lease %s over a 1 GiB record used %d KiB of memory", run.args[0], r.maxRSS)
		}
	}
}
