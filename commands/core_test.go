package commands_test

// In-process tests of the work-lease commands through commands.Run: the
// filter contract, exit statuses (SPEC §7), configuration origins (§6), and
// that every refused input leaves the table byte-identical.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/commit"
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

func coreID(name string) leasefmt.ID {
	sum := sha256.Sum256([]byte(name))
	return leasefmt.ID(hex.EncodeToString(sum[:]))
}

func coreIDs(prefix string, n int) []leasefmt.ID {
	out := make([]leasefmt.ID, n)
	for i := range out {
		out[i] = coreID(fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// coreBareRoot is a fresh table root (not yet created) in a temp dir.
func coreBareRoot(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "table")
}

// coreRoot is a fresh table (16 work shards) made by lease init: only init
// creates a table (SPEC §2).
func coreRoot(t *testing.T) string {
	t.Helper()
	root := coreBareRoot(t)
	coreMust(t, 0, "", "init", "--root", root)
	return root
}

// corePath is the path of the work record of id in a table of 16 shards,
// computed from SPEC §2 alone.
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

func TestInit(t *testing.T) {
	root := coreBareRoot(t)
	r := coreMust(t, 0, "", "init", "--root", root, "--shards", "4", "--target-shards", "2", "--now", "1000")
	if !strings.Contains(r.out, root) {
		t.Errorf("init output does not name the root: %s", r.out)
	}
	var hdr map[string]any
	data, err := os.ReadFile(filepath.Join(root, "TABLE"))
	if err != nil || json.Unmarshal(data, &hdr) != nil {
		t.Fatalf("TABLE: %q, %v", data, err)
	}
	if hdr["schema"] != "lease.table/v1" || hdr["work_shards"] != 4.0 || hdr["target_shards"] != 2.0 || hdr["created_at"] != 1000.0 {
		t.Errorf("TABLE = %s", data)
	}
	for _, p := range []string{"work/00/.lock", "work/03/.lock", "targets/01/.lock", "groups/01/.lock", "stage", "public", "lost+found"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "work/04")); err == nil {
		t.Errorf("work/04 exists in a table of 4 work shards")
	}
	before := coreSnapshot(t, root)
	coreMust(t, 0, "", "init", "--root", root)
	coreMust(t, 0, "", "init", "--root", root, "--shards", "4")
	r = coreMust(t, 2, "", "init", "--root", root, "--shards", "8")
	if !strings.Contains(r.errOut, "work_shards 4") {
		t.Errorf("shard conflict message: %s", r.errOut)
	}
	coreMust(t, 2, "", "init", "--root", root, "extra")
	coreSame(t, "init again", before, coreSnapshot(t, root))

	// A corrupt header is exit 3 for every command and left alone.
	os.WriteFile(filepath.Join(root, "TABLE"), []byte("{not json"), 0o644)
	before = coreSnapshot(t, root)
	coreMust(t, 3, "", "claim", "--root", root, "--owner", "w", string(coreID("x")))
	coreMust(t, 3, "", "status", "--root", root)
	coreSame(t, "corrupt TABLE", before, coreSnapshot(t, root))
}

func TestClaim(t *testing.T) {
	root := coreRoot(t)
	ids := coreIDs("claim", 6)
	base := []string{"--root", root, "--owner", "host-a/w1", "--now", "1000", "--ttl", "60"}
	// One ID, on a table created on first use.
	r := coreMust(t, 0, "", append([]string{"claim"}, append(base, string(ids[0]))...)...)
	if r.out != string(ids[0])+" 1\n" || r.errOut != "" {
		t.Fatalf("claim one: %s", r)
	}
	rec := coreRecord(t, root, ids[0])
	if rec.Status != leasefmt.Leased || rec.Owner != "host-a/w1" || rec.Token != 1 || rec.ClaimedAt != 1000 || rec.ExpiresAt != 1060 {
		t.Errorf("record after claim: %+v", rec)
	}
	// Many, as arguments: output in input order, the held one refused.
	args := append([]string{"claim"}, base...)
	for _, i := range []int{3, 0, 1, 2} {
		args = append(args, string(ids[i]))
	}
	r = coreMust(t, 1, "", args...)
	if want := coreJoin([]leasefmt.ID{ids[3], ids[1], ids[2]}, " 1"); r.out != want {
		t.Errorf("claim many: stdout\n%s\nwant\n%s", r.out, want)
	}
	if got := coreReasons(t, r.errOut); len(got) != 1 || got[ids[0]] != "held" {
		t.Errorf("claim many: stderr %q", r.errOut)
	}
	if !strings.Contains(r.errOut, "host-a/w1") {
		t.Errorf("held line does not name the holder: %s", r.errOut)
	}
	// From stdin with `-`, comments and blank lines.
	stdin := "# work\n\n" + string(ids[4]) + "  # first\n   \n" + string(ids[5]) + "\n"
	r = coreMust(t, 0, stdin, append([]string{"claim"}, append(base, "-")...)...)
	if r.out != coreJoin(ids[4:6], " 1") {
		t.Errorf("claim -: %s", r)
	}
	// At expiry, within clock_skew (default 1 s), the lease is still
	// held for a claimer; from expires_at + clock_skew another owner gets
	// the next token.
	r = coreMust(t, 1, "", "claim", "--root", root, "--owner", "host-b/w2", "--now", "1060.5", "--ttl", "60", string(ids[0]))
	if got := coreReasons(t, r.errOut); got[ids[0]] != "held" || !strings.Contains(r.errOut, "within clock_skew") {
		t.Errorf("claim within clock_skew of the expiry: %s", r)
	}
	r = coreMust(t, 0, "", "claim", "--root", root, "--owner", "host-b/w2", "--now", "1061", "--ttl", "60", string(ids[0]))
	if r.out != string(ids[0])+" 2\n" {
		t.Errorf("claim after expiry: %s", r)
	}
	if rec := coreRecord(t, root, ids[0]); rec.Owner != "host-b/w2" || rec.Token != 2 || rec.ExpiresAt != 1121 {
		t.Errorf("record after the second claim: %+v", rec)
	}
}

func TestClaimFirst(t *testing.T) {
	root := coreRoot(t)
	ids := coreIDs("first", 8)
	base := []string{"claim", "--root", root, "--owner", "w", "--now", "1000", "--ttl", "60"}
	coreMust(t, 0, "", append(base, string(ids[1]), string(ids[2]))...)
	r := coreMust(t, 0, coreJoin(ids, ""), append(base, "--first", "3", "-")...)
	if want := coreJoin([]leasefmt.ID{ids[0], ids[3], ids[4]}, " 1"); r.out != want {
		t.Errorf("--first 3: stdout\n%s\nwant\n%s", r.out, want)
	}
	for _, id := range ids[5:] {
		if _, err := os.Stat(corePath(root, id)); err == nil {
			t.Errorf("--first 3 claimed %s beyond the third", id)
		}
	}
	r = coreMust(t, 0, "", append(base, "--first", "1", string(ids[0]), string(ids[5]), string(ids[6]))...)
	if r.out != string(ids[5])+" 1\n" {
		t.Errorf("--first 1 past a held one: %s", r)
	}
	// Nothing to get: a negative answer.
	coreMust(t, 1, "", append(base, "--first", "2", string(ids[0]), string(ids[1]))...)
	before := coreSnapshot(t, root)
	coreMust(t, 2, "", append(base, "--first", "0", string(ids[7]))...)
	coreMust(t, 2, "", append(base, "--first", "-1", string(ids[7]))...)
	coreSame(t, "bad --first", before, coreSnapshot(t, root))
}

func TestRenewReleaseComplete(t *testing.T) {
	root := coreRoot(t)
	ids := coreIDs("life", 5)
	coreMust(t, 0, "", append([]string{"claim", "--root", root, "--owner", "w", "--now", "1000", "--ttl", "60"}, strings.Fields(coreJoin(ids, ""))...)...)
	held := coreJoin(ids, " 1")
	// renew-batch is a filter: all renewed, same lines, input order.
	r := coreMust(t, 0, held, "renew-batch", "--root", root, "--now", "1030", "--ttl", "60")
	if r.out != held || r.errOut != "" {
		t.Fatalf("renew-batch: %s", r)
	}
	for _, id := range ids {
		if rec := coreRecord(t, root, id); rec.RenewedAt != 1030 || rec.ExpiresAt != 1090 || rec.Token != 1 {
			t.Errorf("after renew: %+v", rec)
		}
	}
	// From a FILE argument too, with a stale line in the middle.
	in := filepath.Join(t.TempDir(), "held")
	os.WriteFile(in, []byte(string(ids[0])+" 1\n"+string(ids[1])+" 2\n"+string(ids[2])+" 1\n"), 0o644)
	r = coreMust(t, 1, "", "renew-batch", "--root", root, "--now", "1040", "--ttl", "60", in)
	if r.out != string(ids[0])+" 1\n"+string(ids[2])+" 1\n" {
		t.Errorf("renew-batch FILE: stdout %q", r.out)
	}
	if got := coreReasons(t, r.errOut); len(got) != 1 || got[ids[1]] != "stale-token" || !strings.HasPrefix(r.errOut, "stale-token "+string(ids[1])+" 2 ") {
		t.Errorf("renew-batch FILE: stderr %q", r.errOut)
	}
	// release and complete, fenced.
	r = coreMust(t, 0, string(ids[0])+" 1\n", "release", "--root", root, "--now", "1050")
	if r.out != string(ids[0])+" 1\n" || coreRecord(t, root, ids[0]).Status != leasefmt.Released {
		t.Errorf("release: %s", r)
	}
	r = coreMust(t, 0, string(ids[1])+" 1\n"+string(ids[2])+" 1\n", "complete", "--root", root, "--now", "1050")
	if r.out != string(ids[1])+" 1\n"+string(ids[2])+" 1\n" || coreRecord(t, root, ids[1]).Status != leasefmt.Done {
		t.Errorf("complete: %s", r)
	}
	// Each refusal has its reason word; the batch exits 1.
	r = coreMust(t, 1, string(ids[0])+" 1\n"+string(ids[1])+" 1\n"+string(ids[3])+" 7\n"+string(coreID("none"))+" 1\n"+string(ids[4])+" 1\n",
		"renew-batch", "--root", root, "--now", "1200", "--ttl", "60")
	want := map[leasefmt.ID]string{ids[0]: "released", ids[1]: "done", ids[3]: "stale-token", coreID("none"): "missing", ids[4]: "expired"}
	if got := coreReasons(t, r.errOut); fmt.Sprint(got) != fmt.Sprint(want) || r.out != "" {
		t.Errorf("refusals: %v, want %v\n%s", got, want, r)
	}
	coreMust(t, 1, string(ids[1])+" 1\n", "claim", "--root", root, "--owner", "w", "--now", "9999", string(ids[1]))
	coreMust(t, 1, string(ids[4])+" 1\n", "release", "--root", root, "--now", "1200")

	// --json: one document with results and statistics.
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "w", "--now", "2000", "--ttl", "60", string(ids[4]))
	r = coreMust(t, 1, string(ids[4])+" 2\n"+string(ids[3])+" 9\n", "renew-batch", "--root", root, "--now", "2010", "--ttl", "60", "--json")
	var doc struct {
		Command string `json:"command"`
		Results []struct {
			ID     string `json:"id"`
			OK     bool   `json:"ok"`
			Reason string `json:"reason"`
		} `json:"results"`
		Stats struct {
			Renewals       int64 `json:"renewals"`
			FileSyncs      int64 `json:"file_syncs"`
			DirectorySyncs int64 `json:"directory_syncs"`
			Lost           int64 `json:"lost"`
		} `json:"stats"`
		Exit int `json:"exit"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.out)
	}
	if doc.Command != "renew-batch" || len(doc.Results) != 2 || !doc.Results[0].OK || doc.Results[1].Reason != "stale-token" ||
		doc.Stats.Renewals != 1 || doc.Stats.FileSyncs != 1 || doc.Stats.DirectorySyncs != 1 || doc.Stats.Lost != 1 || doc.Exit != 1 {
		t.Errorf("--json document: %+v", doc)
	}
}

func TestCompletePublish(t *testing.T) {
	root := coreRoot(t)
	ids := coreIDs("pub", 4)
	claim := func(now string, id leasefmt.ID) {
		coreMust(t, 0, "", "claim", "--root", root, "--owner", "w", "--now", now, "--ttl", "60", string(id))
	}
	stage := func(id leasefmt.ID, token int, name, data string) {
		dir := filepath.Join(root, "stage", fmt.Sprintf("%s.%d", id, token))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	claim("1000", ids[0])
	stage(ids[0], 1, "result-0.tar", "RESULT 0")
	r := coreMust(t, 0, string(ids[0])+" 1\n", "complete", "--root", root, "--now", "1010", "--publish", "result-0.tar")
	if r.out != string(ids[0])+" 1\n" {
		t.Errorf("publish: %s", r)
	}
	if data, err := os.ReadFile(filepath.Join(root, "public", "result-0.tar")); err != nil || string(data) != "RESULT 0" {
		t.Errorf("public/result-0.tar: %q, %v", data, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "stage", string(ids[0])+".1")); err == nil {
		t.Error("the emptied staging directory is still there after the publish")
	}
	if rec := coreRecord(t, root, ids[0]); rec.Status != leasefmt.Done || rec.Publish != "result-0.tar" {
		t.Errorf("record after publish: %+v", rec)
	}
	// Completing again with the token that completed it succeeds (a retry
	// after a lost reply), and changes nothing.
	before := coreSnapshot(t, root)
	r = coreMust(t, 0, string(ids[0])+" 1\n", "complete", "--root", root, "--now", "1020", "--publish", "result-0.tar")
	if r.out != string(ids[0])+" 1\n" {
		t.Errorf("publish retried: %s", r)
	}
	coreSame(t, "publish retried", before, coreSnapshot(t, root))
	// A path inside the holder's staging directory works as well as a bare
	// name; a file directly in ROOT/stage/ (not fenced) is refused.
	claim("1000", ids[3])
	stage(ids[3], 1, "result-3", "R3")
	os.WriteFile(filepath.Join(root, "stage", "loose"), []byte("R3"), 0o644)
	r = coreMust(t, 2, string(ids[3])+" 1\n", "complete", "--root", root, "--now", "1010", "--publish", filepath.Join(root, "stage", "loose"))
	if !strings.Contains(r.errOut, "fenced staging") {
		t.Errorf("a publish from stage/ itself: %s", r)
	}
	os.Remove(filepath.Join(root, "stage", "loose"))
	coreMust(t, 0, string(ids[3])+" 1\n", "complete", "--root", root, "--now", "1010", "--publish",
		filepath.Join(root, "stage", string(ids[3])+".1", "result-3"))

	// Staged bytes are fenced: an expired holder and the next one stage the
	// same name, each in its own directory; the stale publish is refused and
	// the current one publishes its own bytes, not the stale holder's.
	claim("1000", ids[1])
	stage(ids[1], 1, "result-1.tar", "STALE")
	claim("1070", ids[1]) // expired and claimed again: token 2
	stage(ids[1], 2, "result-1.tar", "CURRENT")
	before = coreSnapshot(t, root)
	r = coreMust(t, 1, string(ids[1])+" 1\n", "complete", "--root", root, "--now", "1080", "--publish", "result-1.tar")
	if r.out != "" || coreReasons(t, r.errOut)[ids[1]] != "stale-token" {
		t.Errorf("stale publish: %s", r)
	}
	coreSame(t, "stale publish", before, coreSnapshot(t, root))
	coreMust(t, 0, string(ids[1])+" 2\n", "complete", "--root", root, "--now", "1080", "--publish", "result-1.tar")
	if data, _ := os.ReadFile(filepath.Join(root, "public", "result-1.tar")); string(data) != "CURRENT" {
		t.Errorf("public/result-1.tar holds %q, want the current holder's bytes", data)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "stage", string(ids[1])+".1", "result-1.tar")); string(data) != "STALE" {
		t.Errorf("the stale holder's staged file changed: %q", data)
	}

	// An existing public name is never replaced.
	claim("1000", ids[2])
	stage(ids[2], 1, "same", "NEW")
	os.WriteFile(filepath.Join(root, "public", "same"), []byte("OLD"), 0o644)
	before = coreSnapshot(t, root)
	r = coreLease(t, string(ids[2])+" 1\n", "complete", "--root", root, "--now", "1010", "--publish", "same")
	if r.code == 0 || r.out != "" || !strings.Contains(r.errOut, "already exists") {
		t.Errorf("publish over an existing name: %s", r)
	}
	coreSame(t, "publish over an existing name", before, coreSnapshot(t, root))
	// A staged file that does not exist is named as missing, not as "not a
	// regular file".
	r = coreMust(t, 2, string(ids[2])+" 1\n", "complete", "--root", root, "--now", "1010", "--publish", "no-such-result")
	if !strings.Contains(r.errOut, "no such file") || strings.Contains(r.errOut, "not a regular file") {
		t.Errorf("publish of a missing file: %s", r)
	}

	// Usage errors: nothing written.
	for _, tc := range []struct {
		stdin string
		args  []string
	}{
		{string(ids[2]) + " 1\n", []string{"--publish", "/etc/passwd"}},
		{string(ids[2]) + " 1\n", []string{"--publish", filepath.Join(root, "public", "same")}},
		{string(ids[2]) + " 1\n", []string{"--publish", "../public/same"}},
		{string(ids[2]) + " 1\n", []string{"--publish", ".."}},
		{string(ids[2]) + " 1\n", []string{"--publish", "no-such-file"}},
		{string(ids[2]) + " 1\n" + string(ids[0]) + " 1\n", []string{"--publish", "same"}},
		{"", []string{"--publish", "same"}},
	} {
		r := coreLease(t, tc.stdin, append([]string{"complete", "--root", root, "--now", "1010"}, tc.args...)...)
		if r.code != 2 || r.out != "" {
			t.Errorf("complete %v: %s\nwant exit 2", tc.args, r)
		}
		coreSame(t, fmt.Sprint(tc.args), before, coreSnapshot(t, root))
	}
}

func TestVerify(t *testing.T) {
	root := coreRoot(t)
	ids := coreIDs("verify", 3)
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "w", "--now", "1000", "--ttl", "60", string(ids[0]), string(ids[1]))
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "w", "--now", "1000", "--ttl", "5", string(ids[2]))
	before := coreSnapshot(t, root)
	r := coreMust(t, 1, string(ids[0])+" 1\n"+string(ids[1])+" 3\n"+string(ids[2])+" 1\n", "verify", "--root", root, "--now", "1010")
	if r.out != string(ids[0])+" 1\n" {
		t.Errorf("verify stdout: %q", r.out)
	}
	if got := coreReasons(t, r.errOut); got[ids[1]] != "stale-token" || got[ids[2]] != "expired" || len(got) != 2 {
		t.Errorf("verify stderr: %q", r.errOut)
	}
	coreSame(t, "verify", before, coreSnapshot(t, root))
	// verify | complete composes.
	r = coreMust(t, 0, r.out, "complete", "--root", root, "--now", "1011")
	if r.out != string(ids[0])+" 1\n" {
		t.Errorf("complete of verified lines: %s", r)
	}
	// verify never creates a table.
	other := coreBareRoot(t)
	coreMust(t, 2, string(ids[0])+" 1\n", "verify", "--root", other)
	if _, err := os.Lstat(other); err == nil {
		t.Error("verify created a table root")
	}
}

func TestStatus(t *testing.T) {
	root := coreRoot(t)
	ids := coreIDs("status", 4)
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "alice", "--now", "1000", "--ttl", "100", string(ids[0]))
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "bob", "--now", "1000", "--ttl", "10", string(ids[1]))
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "bob", "--now", "1000", "--ttl", "100", string(ids[2]), string(ids[3]))
	coreMust(t, 0, string(ids[2])+" 1\n", "release", "--root", root, "--now", "1001")
	coreMust(t, 0, string(ids[3])+" 1\n", "complete", "--root", root, "--now", "1001")
	listed := func(out string) []string {
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] != "ID" { // the header
				got = append(got, f[0])
			}
		}
		sort.Strings(got)
		return got
	}
	sorted := func(ids ...leasefmt.ID) []string {
		var s []string
		for _, id := range ids {
			s = append(s, string(id))
		}
		sort.Strings(s)
		return s
	}
	base := []string{"status", "--root", root, "--now", "1050"}
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{nil, sorted(ids...)},
		{[]string{"--live"}, sorted(ids[0])},
		{[]string{"--expired"}, sorted(ids[1])},
		{[]string{"--owner", "bob"}, sorted(ids[1:]...)},
		{[]string{"--owner", "alice", "--expired"}, nil},
	} {
		r := coreMust(t, 0, "", append(base, tc.flags...)...)
		if got := listed(r.out); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("status %v: %v, want %v\n%s", tc.flags, got, tc.want, r.out)
		}
	}
	r := coreMust(t, 0, "", append(base, "--json")...)
	lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("status --json: %d lines, want 4\n%s", len(lines), r.out)
	}
	byID := map[string]map[string]any{}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("status --json line %q: %v", l, err)
		}
		byID[m["id"].(string)] = m
	}
	if m := byID[string(ids[0])]; m["status"] != "leased" || m["owner"] != "alice" || m["token"] != 1.0 || m["live"] != true || m["remaining_s"] != 50.0 || m["expires_at"] != 1100.0 {
		t.Errorf("status --json of a live lease: %v", m)
	}
	if m := byID[string(ids[1])]; m["live"] != false || m["remaining_s"] != 0.0 {
		t.Errorf("status --json of an expired lease: %v", m)
	}
	if m := byID[string(ids[3])]; m["status"] != "done" {
		t.Errorf("status --json of done work: %v", m)
	}
	coreMust(t, 2, "", append(base, "--live", "--expired")...)
	coreMust(t, 2, "", append(base, "extra")...)
	// A corrupt record: listed on stderr, exit 3, the rest still listed.
	os.WriteFile(corePath(root, ids[2]), []byte("garbage"), 0o644)
	r = coreMust(t, 3, "", base...)
	if !strings.Contains(r.errOut, "corrupt") || !strings.Contains(r.errOut, string(ids[2])) || len(listed(r.out)) != 3 {
		t.Errorf("status with a corrupt record: %s", r)
	}
}

// TestConfigOrigins: lease config names where each value came from, with
// flags over environment over file over defaults.
func TestConfigOrigins(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	file := filepath.Join(dir, "c.toml")
	os.WriteFile(file, []byte("# campaign settings\nowner = \"file-owner\"\n\nttl = 200\nshards = 32\nlock_timeout = 3\n"), 0o644)
	origins := func(r coreResult) map[string]string {
		out := map[string]string{}
		for _, l := range strings.Split(r.out, "\n") {
			if i := strings.Index(l, " # "); i > 0 && !strings.HasPrefix(l, "#") {
				f := strings.Fields(l[:i])
				out[f[0]] = strings.TrimSpace(l[i+3:]) + " = " + strings.Join(f[2:], " ")
			}
		}
		return out
	}
	r := coreMust(t, 0, "", "config", "--root", "/r")
	o := origins(r)
	for k, want := range map[string]string{
		"ttl": "default (max(120, 4*target_timeout)) = 120", "shards": "default = 16", "root": "flag --root = \"/r\"",
		"renew_interval": "default (max(0.1, min(30, ttl/3))) = 30", "lock_timeout": "default = 10",
	} {
		if o[k] != want {
			t.Errorf("defaults: %s is %q, want %q\n%s", k, o[k], want, r.out)
		}
	}
	t.Setenv("LEASE_TTL", "300")
	t.Setenv("LEASE_SHARDS", "64")
	r = coreMust(t, 0, "", "config", "--config", file, "--shards", "8")
	o = origins(r)
	for k, want := range map[string]string{
		"owner":          file + ":2 = \"file-owner\"",
		"lock_timeout":   file + ":6 = 3",
		"ttl":            "env LEASE_TTL = 300",
		"shards":         "flag --shards = 8",
		"renew_interval": "default (max(0.1, min(30, ttl/3))) = 30",
		"target_timeout": "default = 30",
	} {
		if o[k] != want {
			t.Errorf("%s is %q, want %q\n%s", k, o[k], want, r.out)
		}
	}
	if !strings.Contains(r.out, "# config file: "+file) {
		t.Errorf("config does not name its file:\n%s", r.out)
	}
	// LEASE_CONFIG, and ./lease.toml when nothing names a file.
	t.Setenv("LEASE_CONFIG", file)
	if o := origins(coreMust(t, 0, "", "config")); o["owner"] != file+":2 = \"file-owner\"" {
		t.Errorf("LEASE_CONFIG: owner %q", o["owner"])
	}
	t.Setenv("LEASE_CONFIG", "")
	os.WriteFile(filepath.Join(dir, "lease.toml"), []byte("ttl = 90\n"), 0o644)
	t.Setenv("LEASE_TTL", "")
	if o := origins(coreMust(t, 0, "", "config")); o["ttl"] != "lease.toml:1 = 90" {
		t.Errorf("./lease.toml: ttl %q", o["ttl"])
	}
	// --json carries values and origins.
	r = coreMust(t, 0, "", "config", "--json", "--ttl", "99")
	var doc map[string]struct {
		Value  any    `json:"value"`
		Origin string `json:"origin"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		// config_file is a plain string; decode the rest leniently.
		var raw map[string]json.RawMessage
		if err2 := json.Unmarshal([]byte(r.out), &raw); err2 != nil {
			t.Fatalf("config --json: %v\n%s", err2, r.out)
		}
		doc = map[string]struct {
			Value  any    `json:"value"`
			Origin string `json:"origin"`
		}{}
		for k, v := range raw {
			var e struct {
				Value  any    `json:"value"`
				Origin string `json:"origin"`
			}
			if json.Unmarshal(v, &e) == nil {
				doc[k] = e
			}
		}
	}
	if doc["ttl"].Value != 99.0 || doc["ttl"].Origin != "flag --ttl" {
		t.Errorf("config --json ttl: %+v", doc["ttl"])
	}
	os.Remove(filepath.Join(dir, "lease.toml"))

	// Bad files: exit 2 naming file:line and key.
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"syntax", "owner = \"a\"\nttl = = 3\n", []string{":2", "ttl"}},
		{"unterminated", "owner = \"a\nttl = 3\n", []string{":1"}},
		{"unknown key", "ttl = 10\n\nbogus_key = 1\n", []string{":3", "bogus_key", "unknown key"}},
		{"nan", "shards = 4\nttl = nan\n", []string{":2", "ttl"}},
		{"infinity", "lock_timeout = inf\n", []string{":1", "lock_timeout"}},
		{"negative ttl", "owner = \"o\"\nttl = -5\n", []string{":2", "ttl"}},
		{"negative shards", "shards = -1\n", []string{":1", "shards"}},
		{"wrong type", "\nshards = \"many\"\n", []string{":2", "shards"}},
		{"float shards", "shards = 1.5\n", []string{":1", "shards"}},
		{"table", "[work]\nshards = 4\n", []string{":1", "work"}},
		{"dotted key", "ttl = 100\nwork.shards = 4\n", []string{":2", "work"}},
		{"quoted key", "ttl = 100\n\"bogus\" = 4\n", []string{":2", "bogus"}},
		{"control owner", "owner = \"a\\u0007b\"\n", []string{"owner"}},
	} {
		bad := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".toml")
		os.WriteFile(bad, []byte(tc.text), 0o644)
		r := coreLease(t, "", "config", "--config", bad)
		if r.code != 2 || r.out != "" {
			t.Errorf("%s: %s\nwant exit 2", tc.name, r)
			continue
		}
		for _, w := range append([]string{bad}, tc.want...) {
			if !strings.Contains(r.errOut, w) {
				t.Errorf("%s: error %q does not name %q", tc.name, r.errOut, w)
			}
		}
	}
	// Bad environment and flags are usage errors too.
	for _, tc := range []struct {
		env, val string
		args     []string
	}{
		{"LEASE_TTL", "NaN", nil}, {"LEASE_TTL", "-1", nil}, {"LEASE_TTL", "abc", nil}, {"LEASE_SHARDS", "0", nil},
		{"", "", []string{"--ttl", "-1"}}, {"", "", []string{"--ttl", "NaN"}}, {"", "", []string{"--ttl", "0"}},
		{"", "", []string{"--lock-timeout", "Inf"}}, {"", "", []string{"--owner", ""}}, {"", "", []string{"--config", filepath.Join(dir, "missing.toml")}},
	} {
		if tc.env != "" {
			t.Setenv(tc.env, tc.val)
		}
		r := coreLease(t, "", append([]string{"config"}, tc.args...)...)
		if r.code != 2 {
			t.Errorf("%s=%q %v: %s\nwant exit 2", tc.env, tc.val, tc.args, r)
		}
		if tc.env != "" {
			t.Setenv(tc.env, "")
		}
	}
}

// coreImmutable makes dir immutable (chattr +i) until the test ends, so
// that creating a file in it fails even for root: an I/O error on demand.
func coreImmutable(t *testing.T, dir string) {
	t.Helper()
	const immutable = 0x10 // FS_IMMUTABLE_FL
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, flags|immutable)
	}
	if err != nil {
		t.Fatalf("cannot make %s immutable to inject an I/O error (needs root on ext4, xfs or btrfs): %v", dir, err)
	}
	t.Cleanup(func() {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer unix.Close(fd)
		if err := unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, flags); err != nil {
			t.Error(err)
		}
	})
}

// coreHoldLock takes the lock of id from this process (an OFD lock on its
// own descriptor conflicts with the command's) until the test ends.
func coreHoldLock(t *testing.T, root string, id leasefmt.ID) {
	t.Helper()
	osfs, err := commit.OS(root)
	if err != nil {
		t.Fatal(err)
	}
	st, err := commit.Open(root, osfs, nil)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := st.Lock(leasefmt.Work, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unlock(); osfs.Close() })
}

// coreInShard returns an ID named name that falls in work shard sh of 16.
func coreInShard(name string, sh int) leasefmt.ID {
	return leasefmt.ID(fmt.Sprintf("%08x", sh) + string(coreID(name))[8:])
}

// TestExitSeverity: a batch goes on past lost and corrupt records and exits
// with the most serious outcome: 4 over 3 over 5 over 1 over 0.
func TestExitSeverity(t *testing.T) {
	root := coreRoot(t)
	ok, stale, locked, corrupt, ioerr := coreInShard("ok", 0), coreInShard("stale", 1), coreInShard("locked", 2), coreInShard("corrupt", 3), coreInShard("io", 4)
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "w", "--now", "1000", "--ttl", "1000",
		string(ok), string(stale), string(locked), string(corrupt), string(ioerr))
	os.WriteFile(corePath(root, corrupt), []byte(`{"schema":"lease.work/v1","expires_at":NaN}`), 0o644)
	coreHoldLock(t, root, locked)
	line := func(id leasefmt.ID, tok string) string { return string(id) + " " + tok + "\n" }
	renew := func(want int, stdin string, extra ...string) coreResult {
		t.Helper()
		args := append([]string{"renew-batch", "--root", root, "--now", "1100", "--ttl", "1000", "--lock-timeout", "0.2", "--writers", "1"}, extra...)
		return coreMust(t, want, stdin, args...)
	}
	r := renew(0, line(ok, "1"))
	if r.out != line(ok, "1") {
		t.Errorf("ok: %s", r)
	}
	r = renew(1, line(ok, "1")+line(stale, "2"))
	if r.out != line(ok, "1") {
		t.Errorf("ok+stale: %s", r)
	}
	r = renew(5, line(stale, "2")+line(locked, "1")+line(ok, "1"))
	if r.out != line(ok, "1") || coreReasons(t, r.errOut)[locked] != "lock-timeout" {
		t.Errorf("stale+locked: %s", r)
	}
	r = renew(3, line(corrupt, "1")+line(locked, "1")+line(stale, "2")+line(ok, "1"))
	if got := coreReasons(t, r.errOut); got[corrupt] != "corrupt" || got[locked] != "lock-timeout" || got[stale] != "stale-token" || r.out != line(ok, "1") {
		t.Errorf("corrupt+locked+stale: %s", r)
	}
	// An I/O error fails the batch: 4, nothing reported renewed.
	coreImmutable(t, filepath.Dir(corePath(root, ioerr)))
	r = renew(4, line(ok, "1")+line(corrupt, "1")+line(ioerr, "1")+line(stale, "2"))
	if got := coreReasons(t, r.errOut); r.out != "" || got[corrupt] != "corrupt" || got[ioerr] != "io-error" || got[ok] != "io-error" {
		t.Errorf("with an I/O error: %s", r)
	}
	// claim --first: getting one is success unless something failed.
	free := coreInShard("free", 5)
	claim := []string{"claim", "--root", root, "--owner", "w", "--now", "1100", "--lock-timeout", "0.2", "--first", "1"}
	coreMust(t, 1, "", append(claim, string(ok))...)
	coreMust(t, 3, "", append(claim, string(corrupt))...)
	coreMust(t, 5, "", append(claim, string(locked))...)
	coreMust(t, 5, "", append(claim, string(locked), string(free))...)
}

// TestBadInputLeavesTableIdentical: every refused input exits as SPEC §7
// says and leaves every name and byte under the root as it was.
func TestBadInputLeavesTableIdentical(t *testing.T) {
	root := coreRoot(t)
	ids := coreIDs("bad", 3)
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "w", "--now", "1000", "--ttl", "100", string(ids[0]), string(ids[1]))
	good := string(ids[0]) + " 1\n"
	nanID, linkID, bigID := coreID("nan"), coreID("link"), coreID("big")
	os.WriteFile(corePath(root, nanID), []byte(`{"schema":"lease.work/v1","id":"`+string(nanID)+`","status":"leased","owner":"w","token":1,"claimed_at":1000,"renewed_at":1000,"expires_at":NaN}`+"\n"), 0o644)
	outside := filepath.Join(t.TempDir(), "outside.json")
	os.WriteFile(outside, []byte(`{"schema":"lease.work/v1","id":"`+string(linkID)+`","status":"released","owner":"w","token":1,"claimed_at":1,"renewed_at":1,"expires_at":1}`+"\n"), 0o644)
	os.Symlink(outside, corePath(root, linkID))
	os.WriteFile(corePath(root, bigID), append([]byte(`{"schema":"lease.work/v1","id":"`+string(bigID)+`","x":"`), append(bytes.Repeat([]byte("x"), 5<<10), `"}`+"\n"...)...), 0o644)
	outsideBefore, _ := os.ReadFile(outside)

	upper := strings.ToUpper(string(ids[2]))
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  int
	}{
		{"missing token", string(ids[0]) + "\n", []string{"renew-batch"}, 2},
		{"extra field", string(ids[0]) + " 1 x\n", []string{"renew-batch"}, 2},
		{"malformed after a good line", good + "garbage\n", []string{"renew-batch"}, 2},
		{"duplicate ID", good + good, []string{"renew-batch"}, 2},
		{"duplicate ID other token", good + string(ids[0]) + " 2\n", []string{"release"}, 2},
		{"upper-case ID", good + upper + " 1\n", []string{"renew-batch"}, 2},
		{"short ID", good + string(ids[2][:40]) + " 1\n", []string{"complete"}, 2},
		{"dot-dot ID", good + "../../../../etc/passwd 1\n", []string{"renew-batch"}, 2},
		{"dot-dot ID of 64", good + "../" + string(ids[2][3:]) + " 1\n", []string{"renew-batch"}, 2},
		{"slash ID", good + string(ids[2][:32]) + "/" + string(ids[2][33:]) + " 1\n", []string{"release"}, 2},
		{"token 0", good + string(ids[1]) + " 0\n", []string{"renew-batch"}, 2},
		{"token 2^53", good + string(ids[1]) + " 9007199254740992\n", []string{"renew-batch"}, 2},
		{"token -1", good + string(ids[1]) + " -1\n", []string{"renew-batch"}, 2},
		{"token 1.0", good + string(ids[1]) + " 1.0\n", []string{"verify"}, 2},
		{"token 1e3", good + string(ids[1]) + " 1e3\n", []string{"renew-batch"}, 2},
		{"long line", good + string(ids[1]) + " 1" + strings.Repeat(" ", 5000) + "\n", []string{"renew-batch"}, 2},
		{"NUL in line", good + string(ids[1]) + "\x00 1\n", []string{"renew-batch"}, 2},
		{"claim upper-case", "", []string{"claim", upper}, 2},
		{"claim short", "", []string{"claim", string(ids[2]), "abc"}, 2},
		{"claim dot-dot", "", []string{"claim", "../" + string(ids[2][3:])}, 2},
		{"claim duplicate", "", []string{"claim", string(ids[2]), string(ids[2])}, 2},
		{"claim stdin duplicate", string(ids[2]) + "\n" + string(ids[2]) + "\n", []string{"claim", "-"}, 2},
		{"claim stdin with token", string(ids[2]) + " 1\n", []string{"claim", "-"}, 2},
		{"claim empty argument", "", []string{"claim", ""}, 2},
		{"now NaN", good, []string{"renew-batch", "--now", "NaN"}, 2},
		{"now -1", good, []string{"renew-batch", "--now", "-1"}, 2},
		{"now abc", good, []string{"renew-batch", "--now", "abc"}, 2},
		{"now Inf", "", []string{"claim", "--now", "+Inf", string(ids[2])}, 2},
		{"claim now NaN", "", []string{"claim", "--now", "NaN", string(ids[2])}, 2},
		{"ttl NaN", good, []string{"renew-batch", "--ttl", "NaN"}, 2},
		{"unknown flag", good, []string{"renew-batch", "--bogus"}, 2},
		{"missing input file", "", []string{"renew-batch", filepath.Join(root, "no-such-file")}, 2},
		{"shard conflict", good, []string{"renew-batch", "--shards", "8"}, 2},
		{"NaN in a record", string(nanID) + " 1\n", []string{"renew-batch"}, 3},
		{"NaN in a record, claim", "", []string{"claim", "--now", "5000", string(nanID)}, 3},
		{"NaN in a record, release", string(nanID) + " 1\n", []string{"release"}, 3},
		{"NaN in a record, complete", string(nanID) + " 1\n", []string{"complete"}, 3},
		{"symlink record", string(linkID) + " 1\n", []string{"renew-batch"}, 3},
		{"symlink record, claim", "", []string{"claim", string(linkID)}, 3},
		{"symlink record, verify", string(linkID) + " 1\n", []string{"verify"}, 3},
		{"5 KiB record", string(bigID) + " 1\n", []string{"renew-batch"}, 3},
		{"5 KiB record, claim", "", []string{"claim", string(bigID)}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := coreSnapshot(t, root)
			args := []string{tc.args[0], "--root", root, "--owner", "w"}
			if !strings.Contains(strings.Join(tc.args, " "), "--now") {
				args = append(args, "--now", "1010")
			}
			args = append(args, tc.args[1:]...)
			r := coreLease(t, tc.stdin, args...)
			if r.code != tc.want {
				t.Errorf("%s\nwant exit %d", r, tc.want)
			}
			if r.out != "" {
				t.Errorf("stdout %q on a refused input", r.out)
			}
			if r.errOut == "" || len(r.errOut) > 2*leasefmt.MaxErrorText {
				t.Errorf("stderr %q: want a bounded message", r.errOut)
			}
			coreSame(t, tc.name, before, coreSnapshot(t, root))
			if after, _ := os.ReadFile(outside); !bytes.Equal(after, outsideBefore) {
				t.Errorf("the symlink's target changed: %s", after)
			}
		})
	}
	// A usage error never creates a table either.
	fresh := coreBareRoot(t)
	for _, args := range [][]string{
		{"claim", "--root", fresh, "--owner", "w", "--now", "NaN", string(ids[2])},
		{"claim", "--root", fresh, "--owner", "w", upper},
		{"renew-batch", "--root", fresh, "--now", "-1"},
		{"init", "--root", fresh, "--shards", "0"},
	} {
		coreMust(t, 2, good, args...)
		if _, err := os.Lstat(fresh); err == nil {
			t.Fatalf("%v created %s", args, fresh)
		}
	}
}

// TestInteropRecord: a record written by another program as plain JSON
// text, with an unknown key, is claimed and renewed by lease and keeps the
// key.
func TestInteropRecord(t *testing.T) {
	root := coreRoot(t)
	coreMust(t, 0, "", "init", "--root", root)
	id := coreID("interop")
	// As Python's json.dumps would write it (spaces after separators).
	text := `{"schema": "lease.work/v1", "x_campaign": {"a": [1, 2]}, "id": "` + string(id) + `", "status": "leased", ` +
		`"owner": "py/coordinator", "token": 41, "claimed_at": 1764450000.5, "renewed_at": 1764450030.5, "expires_at": 1764450150.5}` + "\n"
	if err := os.WriteFile(corePath(root, id), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// Held by the coordinator: claim refused, renew under its token works.
	r := coreMust(t, 1, "", "claim", "--root", root, "--owner", "w", "--now", "1764450100", string(id))
	if coreReasons(t, r.errOut)[id] != "held" || !strings.Contains(r.errOut, "py/coordinator") {
		t.Errorf("claim of the coordinator's lease: %s", r)
	}
	r = coreMust(t, 0, string(id)+" 41\n", "renew-batch", "--root", root, "--now", "1764450100", "--ttl", "60")
	if r.out != string(id)+" 41\n" {
		t.Errorf("renew: %s", r)
	}
	want := `{"schema":"lease.work/v1","id":"` + string(id) + `","status":"leased","owner":"py/coordinator","token":41,` +
		`"claimed_at":1764450000.5,"renewed_at":1764450100,"expires_at":1764450160,"x_campaign":{"a":[1,2]}}` + "\n"
	if data, _ := os.ReadFile(corePath(root, id)); string(data) != want {
		t.Errorf("record after renew:\n%s\nwant\n%s", data, want)
	}
	// Expired: claimed with the next token, the key still there.
	r = coreMust(t, 0, "", "claim", "--root", root, "--owner", "host-b/w", "--now", "1764450200", "--ttl", "30", string(id))
	if r.out != string(id)+" 42\n" {
		t.Errorf("claim after expiry: %s", r)
	}
	data, _ := os.ReadFile(corePath(root, id))
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(m["x_campaign"]) != "map[a:[1 2]]" || m["token"] != 42.0 || m["owner"] != "host-b/w" || m["expires_at"] != 1764450230.0 {
		t.Errorf("record after claim: %s", data)
	}
	if !strings.HasSuffix(string(data), `,"x_campaign":{"a":[1,2]}}`+"\n") {
		t.Errorf("unknown key not kept verbatim: %s", data)
	}
}

// TestUnknownCommand: a command that does not exist is a usage error, and
// repeated in-process runs keep their exit statuses apart.
func TestUnknownCommand(t *testing.T) {
	root := coreRoot(t)
	for i := 0; i < 3; i++ {
		coreMust(t, 2, "", "claim", "--root", root, "--now", "NaN", string(coreID("x")))
		r := coreMust(t, 2, "", "no-such-command")
		if !strings.Contains(r.errOut, "no-such-command") {
			t.Errorf("unknown command message: %s", r)
		}
		coreMust(t, 0, "", "version")
	}
}

// TestGlobalOptions: lease --version prints what lease version prints; a
// bad global option is a usage error (exit 2) that names lease itself, not
// "lease lease".
func TestGlobalOptions(t *testing.T) {
	v := coreMust(t, 0, "", "version")
	if got := coreMust(t, 0, "", "--version"); got.out != v.out || !strings.HasPrefix(got.out, "lease ") {
		t.Errorf("lease --version: %q; lease version: %q", got.out, v.out)
	}
	r := coreMust(t, 2, "", "--no-such-option")
	if !strings.HasPrefix(r.errOut, "lease: usage: ") || !strings.Contains(r.errOut, "(see lease --help)") {
		t.Errorf("bad global option: %s", r)
	}
	r = coreMust(t, 2, "", "claim", "--no-such-option")
	if !strings.HasPrefix(r.errOut, "lease claim: usage: ") || !strings.Contains(r.errOut, "(see lease claim --help)") {
		t.Errorf("bad claim option: %s", r)
	}
}

// TestStatusFilters: only --owner filters status by holder; an owner from
// the environment or a file is what this worker writes, not a filter. A
// link planted as a shard directory is reported corrupt (exit 3), never
// followed, and the other shards are still listed.
func TestStatusFilters(t *testing.T) {
	root := coreRoot(t)
	a, b := coreInShard("a", 1), coreInShard("b", 2)
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "alice", "--now", "1000", string(a))
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "bob", "--now", "1000", string(b))
	t.Setenv("LEASE_OWNER", "alice")
	r := coreMust(t, 0, "", "status", "--root", root, "--now", "1000")
	if !strings.Contains(r.out, string(a)) || !strings.Contains(r.out, string(b)) {
		t.Errorf("status with LEASE_OWNER set lists only some records:\n%s", r.out)
	}
	r = coreMust(t, 0, "", "status", "--root", root, "--now", "1000", "--owner", "bob")
	if strings.Contains(r.out, string(a)) || !strings.Contains(r.out, string(b)) {
		t.Errorf("status --owner bob:\n%s", r.out)
	}

	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, string(b)+".json"), []byte("not a record"), 0o644)
	shard := filepath.Dir(corePath(root, b))
	if err := os.RemoveAll(shard); err != nil {
		t.Fatal(err)
	}
	os.Symlink(outside, shard)
	before, outsideBefore := coreSnapshot(t, root), coreSnapshot(t, outside)
	r = coreMust(t, 3, "", "status", "--root", root, "--now", "1000")
	if !strings.Contains(r.out, string(a)) || !strings.Contains(r.errOut, "corrupt") || !strings.Contains(r.errOut, shard) {
		t.Errorf("status with a link as a shard directory: %s", r)
	}
	for _, args := range [][]string{
		{"claim", "--root", root, "--owner", "w", "--now", "9999", string(b)},
		{"renew-batch", "--root", root, "--now", "1000"},
		{"verify", "--root", root, "--now", "1000"},
	} {
		r := coreMust(t, 3, string(b)+" 1\n", args...)
		if coreReasons(t, r.errOut)[b] != "corrupt" {
			t.Errorf("%v: %s", args, r)
		}
	}
	coreSame(t, "link as a shard directory", before, coreSnapshot(t, root))
	coreSame(t, "outside the table", outsideBefore, coreSnapshot(t, outside))
}
