package commands_test

// The commands on held leases: renew-batch (a filter, from stdin or a FILE,
// --json), release, complete and verify, each fenced by its token; and a
// record written by another program, claimed and renewed by lease.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/leasefmt"
)

func TestRenewReleaseComplete(t *testing.T) {
	t.Parallel()
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
	r = coreMust(t, 1, string(ids[4])+" 2\n"+string(ids[3])+" 9\n", "renew-batch", "--root", root, "--now", "2010", "--ttl", "60", "--json", "--sync", "record")
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

func TestVerify(t *testing.T) {
	t.Parallel()
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

// TestInteropRecord: a record written by another program as plain JSON
// text, with an unknown key, is claimed and renewed by lease and keeps the
// key.
func TestInteropRecord(t *testing.T) {
	t.Parallel()
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
