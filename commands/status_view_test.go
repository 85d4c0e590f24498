package commands_test

// lease status as a view: a header, rows sorted by ID or --sort, human
// ages and remaining times, OWNER last, -o wide/id/id-token, lease status
// ID..., and the stable --json lines.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/leasetool/lease/leasefmt"
)

// statusFixture makes a table at clock 1000: a and b held by "node a/w1"
// (a space in the owner) until 1100, c by bob until 1030, d done by carol,
// e released by carol. It returns the root and the IDs by letter.
func statusFixture(t *testing.T) (string, map[string]leasefmt.ID) {
	t.Helper()
	root := uxTable(t)
	ids := map[string]leasefmt.ID{}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		ids[k] = uxID("status-view-" + k)
	}
	uxMust(t, 0, "", "claim", "--root", root, "--now", "1000", "--ttl", "100", "--owner", "node a/w1", string(ids["a"]), string(ids["b"]))
	uxMust(t, 0, "", "claim", "--root", root, "--now", "1000", "--ttl", "30", "--owner", "bob", string(ids["c"]))
	uxMust(t, 0, "", "claim", "--root", root, "--now", "1000", "--ttl", "200", "--owner", "carol", string(ids["d"]), string(ids["e"]))
	uxMust(t, 0, string(ids["d"])+" 1\n", "complete", "--root", root, "--now", "1001")
	uxMust(t, 0, string(ids["e"])+" 1\n", "release", "--root", root, "--now", "1001")
	return root, ids
}

// statusRows splits a table into its header and rows of columns; OWNER,
// the last column, is whatever follows the column before it.
func statusRows(t *testing.T, out string) ([]string, [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatalf("no table: %q", out)
	}
	header := strings.Fields(lines[0])
	// Column starts, from the header: every column is aligned under it.
	starts := make([]int, len(header))
	at := 0
	for i, h := range header {
		at += strings.Index(lines[0][at:], h)
		starts[i] = at
		at += len(h)
	}
	var rows [][]string
	for _, l := range lines[1:] {
		var cols []string
		for i := range header {
			end := len(l)
			if i+1 < len(header) {
				end = starts[i+1]
			}
			if starts[i] > len(l) || end > len(l) {
				t.Fatalf("row %q is not aligned under the header %q", l, lines[0])
			}
			cols = append(cols, strings.TrimSpace(l[starts[i]:end]))
		}
		rows = append(rows, cols)
	}
	return header, rows
}

func TestStatusTable(t *testing.T) {
	t.Parallel()
	root, ids := statusFixture(t)
	r := uxMust(t, 0, "", "status", "--root", root, "--now", "1050")
	header, rows := statusRows(t, r.out)
	if got := strings.Join(header, " "); got != "ID STATUS TOKEN AGE REMAINING OWNER" {
		t.Fatalf("header %q", got)
	}
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5:\n%s", len(rows), r.out)
	}
	var got []string
	for _, row := range rows {
		got = append(got, row[0])
	}
	if !sort.StringsAreSorted(got) {
		t.Errorf("rows are not sorted by ID:\n%s", r.out)
	}
	byID := map[string][]string{}
	for _, row := range rows {
		byID[row[0]] = row
	}
	for k, want := range map[string]string{
		"a": "leased 1 50s 50s node a/w1",
		"c": "leased 1 50s expired 20s ago bob",
		"d": "done 1 50s - carol",
		"e": "released 1 50s - carol",
	} {
		if got := strings.Join(byID[string(ids[k])][1:], " "); got != want {
			t.Errorf("row of %s: %q, want %q\n%s", k, got, want, r.out)
		}
	}
	// Human times under ten seconds, past a minute, an hour and a day.
	for _, tc := range []struct{ now, age, left string }{
		{"1000.25", "0.2s", "1m39s"},
		{"1063", "1m3s", "37s"},
		{"4700", "1h1m", "expired 1h0m ago"}, // 3700 s old: an hour, and its minutes
		{"1000000", "11d13h", "expired 11d13h ago"},
	} {
		_, rows := statusRows(t, uxMust(t, 0, "", "status", "--root", root, "--now", tc.now, string(ids["a"])).out)
		if len(rows) != 1 {
			t.Fatalf("status ID: %d rows", len(rows))
		}
		if rows[0][3] != tc.age || rows[0][4] != tc.left {
			t.Errorf("at %s: AGE %q REMAINING %q, want %q %q", tc.now, rows[0][3], rows[0][4], tc.age, tc.left)
		}
	}
}

func TestStatusSort(t *testing.T) {
	t.Parallel()
	root, ids := statusFixture(t)
	letters := map[string]string{}
	for k, id := range ids {
		letters[string(id)] = k
	}
	order := func(args ...string) string {
		_, rows := statusRows(t, uxMust(t, 0, "", append([]string{"status", "--root", root, "--now", "1050"}, args...)...).out)
		var s []string
		for _, row := range rows {
			s = append(s, letters[row[0]])
		}
		return strings.Join(s, "")
	}
	byID := func(ks ...string) string {
		sort.Slice(ks, func(i, j int) bool { return ids[ks[i]] < ids[ks[j]] })
		return strings.Join(ks, "")
	}
	// expires: c (1030), then a and b (1100, by ID), then d and e, done
	// and released, whose expiry means nothing.
	if got, want := order("--sort", "expires"), "c"+byID("a", "b")+byID("d", "e"); got != want {
		t.Errorf("--sort expires: %s, want %s", got, want)
	}
	if got, want := order("--sort", "owner"), "c"+byID("d", "e")+byID("a", "b"); got != want {
		t.Errorf("--sort owner: %s, want %s", got, want)
	}
	if got, want := order("--sort", "status"), byID("a", "b", "c")+"e"+"d"; got != want {
		t.Errorf("--sort status: %s, want %s", got, want)
	}
	if got, want := order("--live"), byID("a", "b"); got != want {
		t.Errorf("--live: %s, want %s", got, want)
	}
	r := uxMust(t, 2, "", "status", "--root", root, "--sort", "age")
	if !strings.Contains(r.errOut, `--sort "age": want id, expires, owner or status`) {
		t.Errorf("bad --sort: %q", r.errOut)
	}
}

func TestStatusOutputs(t *testing.T) {
	t.Parallel()
	root, ids := statusFixture(t)
	base := []string{"status", "--root", root, "--now", "1050"}
	// -o id and -o id-token: what scripts take, no header, sorted.
	r := uxMust(t, 0, "", append(base, "--expired", "-o", "id")...)
	if r.out != string(ids["c"])+"\n" {
		t.Errorf("--expired -o id: %q", r.out)
	}
	r = uxMust(t, 0, "", append(base, "--live", "--owner", "node a/w1", "-o", "id-token")...)
	want := []string{string(ids["a"]) + " 1", string(ids["b"]) + " 1"}
	sort.Strings(want)
	if r.out != strings.Join(want, "\n")+"\n" {
		t.Errorf("--live --owner -o id-token: %q, want %q", r.out, want)
	}
	// What -o id-token prints is a held set the filters take.
	if v := uxMust(t, 0, r.out, "verify", "--root", root, "--now", "1050"); v.out != r.out {
		t.Errorf("verify of status -o id-token: %q", v.out)
	}
	// -o wide: the times, UTC, and the path.
	header, rows := statusRows(t, uxMust(t, 0, "", append(base, "-o", "wide", string(ids["c"]))...).out)
	if got := strings.Join(header, " "); got != "ID STATUS TOKEN AGE REMAINING CLAIMED RENEWED EXPIRES PATH ATTEMPTS EXIT OWNER" {
		t.Fatalf("wide header %q", got)
	}
	if got := strings.Join(rows[0][5:8], " "); got != "1970-01-01T00:16:40Z 1970-01-01T00:16:40Z 1970-01-01T00:17:10Z" {
		t.Errorf("wide times %q", got)
	}
	if !strings.HasSuffix(rows[0][8], "/work/"+fmt.Sprintf("%02x", shardOf(ids["c"]))+"/"+string(ids["c"])+".json") {
		t.Errorf("wide path %q", rows[0][8])
	}
	if got := strings.Join(rows[0][9:11], " "); got != "0 -" {
		t.Errorf("wide attempts and exit status %q, want \"0 -\"", got)
	}
	// --no-headers.
	r = uxMust(t, 0, "", append(base, "--no-headers", string(ids["a"]))...)
	if strings.Count(r.out, "\n") != 1 || !strings.HasPrefix(r.out, string(ids["a"])) {
		t.Errorf("--no-headers: %q", r.out)
	}
	uxMust(t, 2, "", append(base, "-o", "yaml")...)
	uxMust(t, 2, "", append(base, "-o", "wide", "--json")...)
}

// shardOf is the work shard of id in a table of 16 shards (docs/design.md#layout).
func shardOf(id leasefmt.ID) uint64 {
	var n uint64
	fmt.Sscanf(string(id[:8]), "%x", &n)
	return n % 16
}

// TestStatusOfIDs: lease status ID... shows those records; an ID with no
// record is reported missing (exit 1), the others still shown; - reads
// `ID` or `ID TOKEN` lines.
func TestStatusOfIDs(t *testing.T) {
	t.Parallel()
	root, ids := statusFixture(t)
	nobody := uxID("status-view-nobody")
	r := uxMust(t, 1, "", "status", "--root", root, "--now", "1050", string(ids["d"]), string(nobody), string(ids["a"]))
	_, rows := statusRows(t, r.out)
	if len(rows) != 2 || rows[0][0] > rows[1][0] {
		t.Errorf("status d nobody a: %q", r.out)
	}
	if !strings.HasPrefix(r.errOut, "missing "+string(nobody)+" 0 no record (") {
		t.Errorf("missing ID: stderr %q", r.errOut)
	}
	held := string(ids["a"]) + " 1\n" + string(ids["c"]) + " 1\n"
	r = uxMust(t, 0, held, "status", "--root", root, "--now", "1050", "-o", "id", "-")
	want := []string{string(ids["a"]), string(ids["c"])}
	sort.Strings(want)
	if r.out != strings.Join(want, "\n")+"\n" {
		t.Errorf("status - < held: %q", r.out)
	}
	uxMust(t, 2, "", "status", "--root", root, "not-an-id")
	uxMust(t, 2, "", "status", "--root", root, string(ids["a"]), string(ids["a"]))
}

// TestStatusJSON: --json is one object per record per line with the
// stable fields, in shard order, or in --sort order when asked.
func TestStatusJSON(t *testing.T) {
	t.Parallel()
	root, ids := statusFixture(t)
	r := uxMust(t, 0, "", "status", "--root", root, "--now", "1050", "--json", "-v")
	lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("--json: %d lines\n%s", len(lines), r.out)
	}
	fields := []string{"kind", "id", "status", "owner", "token", "claimed_at", "renewed_at", "expires_at", "remaining_s", "live", "path"}
	for _, l := range lines {
		if !strings.HasPrefix(l, `{"kind":"work","id":"`) {
			t.Errorf("line does not start with kind and id (the completions read them): %s", l)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		for _, f := range fields {
			if _, ok := m[f]; !ok {
				t.Errorf("line lacks %s: %s", f, l)
			}
		}
		if m["id"] == string(ids["c"]) && (m["live"] != false || m["remaining_s"] != 0.0 || m["expires_at"] != 1030.0) {
			t.Errorf("expired lease: %s", l)
		}
	}
	if !strings.Contains(r.errOut, "lease status: records=5 queued=0 shown=5 live=2 expired=1 corrupt=0 missing=0 duration=") {
		t.Errorf("-v: %q", r.errOut)
	}
	r = uxMust(t, 0, "", "status", "--root", root, "--now", "1050", "--json", "--sort", "expires")
	var first map[string]any
	json.Unmarshal([]byte(strings.SplitN(r.out, "\n", 2)[0]), &first)
	if first["id"] != string(ids["c"]) {
		t.Errorf("--json --sort expires starts with %v", first["id"])
	}
}
