package commands_test

// The group commands (claim, renew-batch, release and verify with
// --groups) through commands.Run, and the grp* helpers; the deadlock test
// is in groups_deadlock_test.go.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/leasefmt"
)

func grpTarget(name string) leasefmt.ID {
	sum := sha256.Sum256([]byte(name))
	return leasefmt.ID(hex.EncodeToString(sum[:]))
}

func grpTargets(prefix string, n int) []leasefmt.ID {
	out := make([]leasefmt.ID, n)
	for i := range out {
		out[i] = grpTarget(fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// grpShardTargets returns n IDs, the i-th in target shard i%16 of a table
// of 16 shards: the first 8 hex digits choose the shard.
func grpShardTargets(prefix string, n int) []leasefmt.ID {
	out := make([]leasefmt.ID, n)
	for i := range out {
		out[i] = leasefmt.ID(fmt.Sprintf("%08x", i%16) + string(grpTarget(fmt.Sprintf("%s-%d", prefix, i)))[8:])
	}
	return out
}

func grpStrings(ids []leasefmt.ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

// grpLease runs lease in-process and returns its status and output.
func grpLease(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := commands.Run(append([]string{"lease"}, args...), strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// grpClaimOK claims a group and returns its `GID TOKEN` line parts.
func grpClaimOK(t *testing.T, root, owner string, now, ttl float64, targets ...leasefmt.ID) (leasefmt.ID, int64) {
	t.Helper()
	args := append([]string{"group-claim", "--root", root, "--owner", owner, "--now", fmt.Sprint(now), "--ttl", fmt.Sprint(ttl)}, grpStrings(targets)...)
	code, out, errOut := grpLease(t, "", args...)
	if code != 0 {
		t.Fatalf("group-claim: exit %d\n%s", code, errOut)
	}
	f := strings.Fields(out)
	if len(f) != 2 || out != f[0]+" "+f[1]+"\n" {
		t.Fatalf("group-claim printed %q, want one `GID TOKEN` line", out)
	}
	tok, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return leasefmt.ID(f[0]), tok
}

// grpSnap is every directory and file under root with its bytes.
func grpSnap(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			l, err := os.Readlink(p)
			out[rel] = "symlink to " + l
			return err
		}
		data, err := os.ReadFile(p)
		out[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func grpSnapDiff(t *testing.T, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			diffs = append(diffs, "removed "+k)
		} else if v != w {
			diffs = append(diffs, fmt.Sprintf("changed %s: %q -> %q", k, v, w))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, "added "+k)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("the table changed:\n%s", strings.Join(diffs, "\n"))
	}
}

// grpLayout gives record paths of a table of 16 shards without opening one.
var grpLayout = &leasefmt.Table{WorkShards: 16, TargetShards: 16}

func grpRecord(t *testing.T, root string, k leasefmt.Kind, id leasefmt.ID) *leasefmt.Record {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, grpLayout.RecordPath(k, id)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := leasefmt.Decode(data, k, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGroupClaimOverlap: with {a,b,c} held, a claim of {c,d} writes
// nothing and names c with its holder and remaining time; once the first
// group expired it succeeds with a token larger than every earlier token
// of c and d.
func TestGroupClaimOverlap(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ts := grpTargets("overlap", 4)
	a, b, c, d := ts[0], ts[1], ts[2], ts[3]
	// d has a history: four earlier leases, tokens 1..4.
	var dTok int64
	for i := range 4 {
		_, dTok = grpClaimOK(t, root, "early", 500+float64(i)*100, 50, d)
	}
	g1, tok1 := grpClaimOK(t, root, "alice", 1000, 100, c, a, b)
	if g1 != groups.ID([]leasefmt.ID{a, b, c}) {
		t.Fatalf("GID %s, want the digest of the sorted targets", g1)
	}
	before := grpSnap(t, root)
	for _, now := range []string{"1030", "1099.999999"} {
		code, out, errOut := grpLease(t, "", "group-claim", "--root", root, "--owner", "bob", "--now", now, "--ttl", "100", string(d), string(c))
		if code != 1 || out != "" {
			t.Fatalf("claim of {c,d} at %s: exit %d, stdout %q; want 1 and nothing", now, code, out)
		}
		g2 := groups.ID([]leasefmt.ID{c, d})
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if len(lines) != 1 {
			t.Fatalf("stderr %q: want one line, naming c only", errOut)
		}
		if want := fmt.Sprintf("held %s 0 target %s: held by \"alice\" (group %s, token %d) for ", g2, c, g1, tok1); !strings.HasPrefix(lines[0], want) {
			t.Errorf("stderr %q\nwant prefix %q", lines[0], want)
		}
		left := map[string]string{"1030": "70.0s more", "1099.999999": "0.0s more"}[now]
		if !strings.Contains(lines[0], left) {
			t.Errorf("stderr %q does not give the remaining time %q", lines[0], left)
		}
		grpSnapDiff(t, before, grpSnap(t, root))
	}
	// The first group expires at 1100; a claim takes it over from 1101,
	// expires_at + clock_skew (1 s by default).
	g2, tok2 := grpClaimOK(t, root, "bob", 1101, 100, d, c)
	for _, earlier := range []int64{tok1, dTok} {
		if tok2 <= earlier {
			t.Errorf("token %d is not larger than an earlier token %d of c or d", tok2, earlier)
		}
	}
	for _, id := range []leasefmt.ID{c, d} {
		if r := grpRecord(t, root, leasefmt.Target, id); r.Group != g2 || r.Token != tok2 || r.Owner != "bob" || r.ExpiresAt != 1201 {
			t.Errorf("target %s after the claim: %+v", id.Short(), r)
		}
	}
	for _, id := range []leasefmt.ID{a, b} {
		if r := grpRecord(t, root, leasefmt.Target, id); r.Group != g1 || r.Token != tok1 {
			t.Errorf("target %s of the first group was touched: %+v", id.Short(), r)
		}
	}
	// The first group's lease is gone for good: renewing it is refused.
	code, out, errOut := grpLease(t, fmt.Sprintf("%s %d\n", g1, tok1), "group-renew", "--root", root, "--now", "1100")
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "expired "+string(g1)) {
		t.Errorf("renew of the expired first group: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestGroupRenewMixedBatch: one stale group and two current ones: exactly
// the two are renewed, the stale one is untouched, and the invocation
// fsyncs each directory it touched once. The two current groups have
// their targets in the same four shards, so that one fsync per group and
// directory would be more.
func TestGroupRenewMixedBatch(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	x, y, z := grpShardTargets("x", 4), grpShardTargets("y", 4), grpTargets("z", 2)
	gx, tx := grpClaimOK(t, root, "me", 1000, 100, x...)
	gz, tzOld := grpClaimOK(t, root, "me", 1000, 100, z...)
	gy, ty := grpClaimOK(t, root, "me", 1000, 100, y...)
	// z is released and claimed again: the old line is stale.
	if code, _, errOut := grpLease(t, fmt.Sprintf("%s %d\n", gz, tzOld), "group-release", "--root", root, "--now", "1010"); code != 0 {
		t.Fatalf("release: %d %s", code, errOut)
	}
	_, tzNew := grpClaimOK(t, root, "other", 1020, 100, z...)
	if tzNew <= tzOld {
		t.Fatalf("re-claim token %d not larger than %d", tzNew, tzOld)
	}
	var zFiles []string
	for _, id := range z {
		zFiles = append(zFiles, grpLayout.RecordPath(leasefmt.Target, id))
	}
	zFiles = append(zFiles, grpLayout.RecordPath(leasefmt.Group, gz))
	before := grpSnap(t, root)

	in := fmt.Sprintf("%s %d\n# comment\n%s %d\n\n%s %d\n", gx, tx, gz, tzOld, gy, ty)
	code, out, errOut := grpLease(t, in, "group-renew", "--root", root, "--now", "1050", "--ttl", "100", "-v", "--writers", "1", "--sync", "record")
	if code != 1 {
		t.Errorf("exit %d, want 1 (one stale group)\n%s", code, errOut)
	}
	if want := fmt.Sprintf("%s %d\n%s %d\n", gx, tx, gy, ty); out != want {
		t.Errorf("stdout %q, want exactly the two current lines in input order %q", out, want)
	}
	if !regexp.MustCompile(`(?m)^stale-token ` + string(gz) + ` ` + fmt.Sprint(tzOld) + ` current token is `).MatchString(errOut) {
		t.Errorf("stderr does not report the stale group: %q", errOut)
	}
	m := regexp.MustCompile(`directory_syncs=(\d+) `).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("no statistics in %q", errOut)
	}
	dirs := map[string]bool{}
	for g, ts := range map[leasefmt.ID][]leasefmt.ID{gx: x, gy: y} {
		dirs[path.Dir(grpLayout.RecordPath(leasefmt.Group, g))] = true
		for _, id := range ts {
			dirs[path.Dir(grpLayout.RecordPath(leasefmt.Target, id))] = true
		}
	}
	if got, _ := strconv.Atoi(m[1]); got != len(dirs) {
		t.Errorf("directory_syncs=%d, want %d: one per distinct directory of the renewed groups", got, len(dirs))
	}
	after := grpSnap(t, root)
	for _, f := range zFiles {
		if before[f] != after[f] {
			t.Errorf("the stale group's %s changed", f)
		}
	}
	for g, ts := range map[leasefmt.ID][]leasefmt.ID{gx: x, gy: y} {
		if r := grpRecord(t, root, leasefmt.Group, g); r.ExpiresAt != 1150 || r.RenewedAt != 1050 {
			t.Errorf("manifest %s not renewed: %+v", g.Short(), r)
		}
		for _, id := range ts {
			if r := grpRecord(t, root, leasefmt.Target, id); r.ExpiresAt != 1150 {
				t.Errorf("target %s not renewed: %+v", id.Short(), r)
			}
		}
	}
	// --json carries the same outcome with statistics.
	code, out, _ = grpLease(t, in, "group-renew", "--root", root, "--now", "1060", "--ttl", "100", "--json", "--sync", "record")
	var doc struct {
		Results []struct {
			ID     string `json:"id"`
			OK     bool   `json:"ok"`
			Reason string `json:"reason"`
		} `json:"results"`
		Stats commit.Snapshot `json:"stats"`
		Exit  int             `json:"exit"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if code != 1 || doc.Exit != 1 || len(doc.Results) != 3 || !doc.Results[0].OK || doc.Results[1].Reason != "stale-token" || !doc.Results[2].OK ||
		doc.Stats.DirectorySyncs != int64(len(dirs)) {
		t.Errorf("--json: exit %d, %+v", code, doc)
	}
}

// TestGroupClaimCorruptRecord: a manifest or target that exists but does
// not validate is never taken as free: exit 3, nothing written.
func TestGroupClaimCorruptRecord(t *testing.T) {
	t.Parallel()
	ts := grpTargets("corrupt", 3)
	gid := groups.ID(ts)
	valid := func(id leasefmt.ID, tok string, exp string) string {
		return fmt.Sprintf(`{"schema":"lease.target/v1","id":"%s","status":"leased","owner":"o","token":%s,"claimed_at":1,"renewed_at":1,"expires_at":%s,"group":"%s"}`+"\n", id, tok, exp, gid)
	}
	cases := []struct {
		name string
		kind leasefmt.Kind
		id   leasefmt.ID
		data string // "" for a symbolic link
	}{
		{"truncated target", leasefmt.Target, ts[1], `{"schema":"lease.target/v1","id":"` + string(ts[1])},
		{"target with NaN expiry", leasefmt.Target, ts[1], valid(ts[1], "3", "NaN")},
		{"target with infinite expiry", leasefmt.Target, ts[1], valid(ts[1], "3", "1e999")},
		{"target with negative expiry", leasefmt.Target, ts[1], valid(ts[1], "3", "-5")},
		{"target with token 0", leasefmt.Target, ts[2], valid(ts[2], "0", "2")},
		{"target named for another ID", leasefmt.Target, ts[0], valid(ts[1], "3", "2")},
		{"target as a symbolic link", leasefmt.Target, ts[0], ""},
		{"manifest unreadable", leasefmt.Group, gid, "{}\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "table")
			if code, _, errOut := grpLease(t, "", "init", "--root", root); code != 0 {
				t.Fatalf("init: %s", errOut)
			}
			p := filepath.Join(root, grpLayout.RecordPath(tc.kind, tc.id))
			var err error
			if tc.data == "" {
				err = os.Symlink(filepath.Join(root, "TABLE"), p)
			} else {
				err = os.WriteFile(p, []byte(tc.data), 0o666)
			}
			if err != nil {
				t.Fatal(err)
			}
			before := grpSnap(t, root)
			code, out, errOut := grpLease(t, "", append([]string{"group-claim", "--root", root, "--now", "100"}, grpStrings(ts)...)...)
			if code != 3 || out != "" {
				t.Errorf("exit %d, stdout %q; want 3 and nothing\n%s", code, out, errOut)
			}
			if !strings.HasPrefix(errOut, "corrupt "+string(gid)) || !strings.Contains(errOut, string(tc.id)) {
				t.Errorf("stderr %q does not report the corrupt record %s", errOut, tc.id.Short())
			}
			grpSnapDiff(t, before, grpSnap(t, root))
		})
	}
}

// TestGroupClaimInputErrors: exit 2, nothing written (not even the table).
func TestGroupClaimInputErrors(t *testing.T) {
	t.Parallel()
	ts := grpTargets("input", 2)
	many := grpStrings(grpTargets("many", 60))
	cases := []struct {
		name string
		args []string
	}{
		{"manifest over 4 KiB", many},
		{"duplicate target", []string{string(ts[0]), string(ts[1]), string(ts[0])}},
		{"bad target", []string{string(ts[0]), "ABC"}},
		{"bad --group", []string{"--group", "xyz", string(ts[0])}},
		{"negative --now", []string{"--now", "-1", string(ts[0])}},
		{"zero --ttl", []string{"--ttl", "0", string(ts[0])}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "table")
			code, out, errOut := grpLease(t, "", append([]string{"group-claim", "--root", root}, tc.args...)...)
			if code != 2 || out != "" || errOut == "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 with a message", code, out, errOut)
			}
			if _, err := os.Stat(root); err == nil {
				t.Errorf("the table was created")
			}
		})
	}
	code, _, errOut := grpLease(t, "not a line\n", "group-renew", "--root", filepath.Join(t.TempDir(), "t"))
	if code != 2 {
		t.Errorf("group-renew of a malformed line: exit %d %s", code, errOut)
	}
}

// TestGroupReleaseVerify: verify --groups passes a live group's line,
// release ends the group (targets free at once, with larger tokens after),
// and verify then refuses it.
func TestGroupReleaseVerify(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ts := grpTargets("rel", 3)
	g, tok := grpClaimOK(t, root, "me", 1000, 100, ts...)
	line := fmt.Sprintf("%s %d\n", g, tok)
	if code, out, errOut := grpLease(t, line, "verify", "--groups", "--root", root, "--now", "1010"); code != 0 || out != line {
		t.Fatalf("verify --groups of a live group: exit %d %q %s", code, out, errOut)
	}
	if code, out, errOut := grpLease(t, fmt.Sprintf("%s %d\n", g, tok+1), "verify", "--groups", "--root", root, "--now", "1010"); code != 1 || out != "" || !strings.HasPrefix(errOut, "stale-token") {
		t.Errorf("verify --groups of a wrong token: exit %d %q %s", code, out, errOut)
	}
	if code, out, errOut := grpLease(t, line, "group-release", "--root", root, "--now", "1020"); code != 0 || out != line {
		t.Fatalf("release: exit %d %q %s", code, out, errOut)
	}
	for _, id := range append(slices.Clone(ts), g) {
		k := leasefmt.Target
		if id == g {
			k = leasefmt.Group
		}
		if r := grpRecord(t, root, k, id); r.Status != leasefmt.Released || r.ExpiresAt != 1020 || r.Token != tok {
			t.Errorf("%s after release: %+v", id.Short(), r)
		}
	}
	if code, out, errOut := grpLease(t, line, "verify", "--groups", "--root", root, "--now", "1021"); code != 1 || out != "" || !strings.HasPrefix(errOut, "released") {
		t.Errorf("verify --groups after release: exit %d %q %s", code, out, errOut)
	}
	if code, _, _ := grpLease(t, line, "group-release", "--root", root, "--now", "1021"); code != 1 {
		t.Errorf("second release: exit %d, want 1", code)
	}
	_, tok2 := grpClaimOK(t, root, "next", 1021, 100, ts[0], grpTarget("new"))
	if tok2 <= tok {
		t.Errorf("claim after release: token %d, want more than %d", tok2, tok)
	}
	// The released group's targets now disagree with nothing: the manifest
	// still passes groups.Check (one target superseded after the release).
	m := grpRecord(t, root, leasefmt.Group, g)
	tm := map[leasefmt.ID]*leasefmt.Record{}
	for _, id := range ts {
		tm[id] = grpRecord(t, root, leasefmt.Target, id)
	}
	if d := groups.Check(m, tm); len(d) > 0 {
		t.Errorf("groups.Check after release and re-claim: %q", d)
	}
}
