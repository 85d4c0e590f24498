package commands_test

// lease status: its filters (--live, --expired, --owner), --json, and
// corrupt records and shard directories.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/leasetool/lease/leasefmt"
)

func TestStatus(t *testing.T) {
	t.Parallel()
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

// TestStatusQueued: an item of the queue without a record is listed as
// queued (table, --json, -o id), --state selects statuses, lease status ID
// of a queued item says queued with exit 0 (an ID with neither a record nor
// an entry is still missing, exit 1), -v counts the queued items, and
// --limit bounds the rows, in the order of --sort, also past 2N rows held.
func TestStatusQueued(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("status-queued", 12)
	var in strings.Builder
	for _, id := range ids[:11] {
		in.WriteString(string(id) + "\n")
	}
	coreMust(t, 0, in.String(), "add", "--root", root)
	held := coreMust(t, 0, "", "claim", "--root", root, "--owner", "alice", "--now", "1000", "--ttl", "100", "--next", "2").out
	claimed := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(held), "\n") {
		claimed[strings.Fields(l)[0]] = true
	}
	var queued []string
	for _, id := range ids[:11] {
		if !claimed[string(id)] {
			queued = append(queued, string(id))
		}
	}
	sort.Strings(queued)
	base := []string{"status", "--root", root, "--now", "1050"}

	r := coreMust(t, 0, "", append(base, "--json")...)
	statuses := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("status --json line %q: %v", l, err)
		}
		statuses[m["id"].(string)] = m["status"].(string)
		if m["status"] == "queued" && (m["token"] != 0.0 || m["live"] != false || !strings.Contains(m["path"].(string), "/queue/")) {
			t.Errorf("status --json of a queued item: %v", m)
		}
	}
	for _, id := range ids[:11] {
		want := "queued"
		if claimed[string(id)] {
			want = "leased"
		}
		if statuses[string(id)] != want {
			t.Errorf("status --json: %s is %q, want %s", id.Short(), statuses[string(id)], want)
		}
	}
	if len(statuses) != 11 {
		t.Errorf("status --json listed %d items, want 11", len(statuses))
	}

	r = coreMust(t, 0, "", append(base, "--state", "queued", "-o", "id", "-v")...)
	if got := strings.Fields(r.out); fmt.Sprint(got) != fmt.Sprint(queued) {
		t.Errorf("status --state queued -o id: %v, want %v", got, queued)
	}
	if !strings.Contains(r.errOut, "records=2 queued=9 shown=9") {
		t.Errorf("status -v: %s", r.errOut)
	}
	r = coreMust(t, 0, "", append(base, "--state", "leased,done", "-o", "id")...)
	if got := strings.Fields(r.out); len(got) != 2 || !claimed[got[0]] || !claimed[got[1]] {
		t.Errorf("status --state leased,done: %v", got)
	}
	r = coreMust(t, 0, "", append(base, "--state", "queued")...)
	if n := strings.Count(r.out, " queued "); n != 9 {
		t.Errorf("status --state queued: %d queued rows, want 9\n%s", n, r.out)
	}

	// --limit: the first N in ID order, however many rows are held before.
	for _, n := range []int{1, 3, 4} {
		r = coreMust(t, 0, "", append(base, "--state", "queued", "-o", "id", "--limit", fmt.Sprint(n))...)
		if got := strings.Fields(r.out); fmt.Sprint(got) != fmt.Sprint(queued[:n]) {
			t.Errorf("status --limit %d: %v, want %v", n, got, queued[:n])
		}
		r = coreMust(t, 0, "", append(base, "--json", "--limit", fmt.Sprint(n), "-v")...)
		if got := strings.Count(r.out, "\n"); got != n || !strings.Contains(r.errOut, fmt.Sprintf(" shown=%d ", n)) {
			t.Errorf("status --json --limit %d: %d lines (it stops reading there): %s", n, got, r.errOut)
		}
	}

	// One queued item by ID: its row, exit 0; an ID neither queued nor
	// recorded: missing, exit 1.
	r = coreMust(t, 0, "", append(base, "--json", queued[0])...)
	if !strings.Contains(r.out, `"status":"queued"`) {
		t.Errorf("status ID of a queued item: %s", r)
	}
	r = coreMust(t, 1, "", append(base, string(ids[11]))...)
	if !strings.Contains(r.errOut, "missing "+string(ids[11])) {
		t.Errorf("status of an ID neither queued nor recorded: %s", r)
	}
	for _, bad := range [][]string{{"--state", "free"}, {"--limit", "0"}, {"--limit", "-1"}, {"--summary", "--state", "queued"}} {
		coreMust(t, 2, "", append(base, bad...)...)
	}
}

// TestStatusQueuedFolded: the table for people shows the first 20 queued
// items by ID and one line for the rest; --state queued and -o id list
// them all.
func TestStatusQueuedFolded(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("status-folded", 45)
	var in strings.Builder
	var all []string
	for _, id := range ids {
		in.WriteString(string(id) + "\n")
		all = append(all, string(id))
	}
	sort.Strings(all)
	coreMust(t, 0, in.String(), "add", "--root", root)
	r := coreMust(t, 0, "", "status", "--root", root)
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == "queued" {
			rows = append(rows, f[0])
		}
	}
	if fmt.Sprint(rows) != fmt.Sprint(all[:20]) || !strings.Contains(r.out, "... and 25 more queued items") {
		t.Errorf("status of 45 queued items: rows %d, want the first 20 by ID and a line for 25 more\n%s", len(rows), r.out)
	}
	for _, args := range [][]string{{"--state", "queued", "--no-headers"}, {"-o", "id"}} {
		r = coreMust(t, 0, "", append([]string{"status", "--root", root}, args...)...)
		if n := strings.Count(r.out, "\n"); n != 45 || strings.Contains(r.out, "more queued") {
			t.Errorf("status %v: %d lines, want 45\n%s", args, n, r.out)
		}
	}
}
