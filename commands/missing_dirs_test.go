package commands_test

// A table made by another program holds TABLE and whatever that program
// needed: lease makes the directories it writes into on demand, durably
// (docs/lease-format.md, Layout), and a complete retried after a publish
// succeeds (lease-complete(1)).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/leasefmt"
)

// foreignTable is a table as a minimal other program makes it: the root
// and its TABLE header, nothing else.
func foreignTable(t *testing.T) string {
	t.Helper()
	root := coreBareRoot(t)
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	hdr := `{"schema":"lease.table/v1","work_shards":16,"target_shards":16,"created_at":1000}` + "\n"
	if err := os.WriteFile(filepath.Join(root, "TABLE"), []byte(hdr), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestForeignTableDirectoriesOnDemand: add, claim --next, staging and
// complete --publish on a table that has no queue/, work/, stage/ or
// public/ yet. Before, the publish exited 4 ("no such file or directory"
// for public/NAME) and left the record committing until it expired.
func TestForeignTableDirectoriesOnDemand(t *testing.T) {
	t.Parallel()
	root := foreignTable(t)
	id := coreID("foreign-0")
	coreMust(t, 0, string(id)+"\n", "add", "--root", root)
	r := coreMust(t, 0, "", "claim", "--root", root, "--next", "1", "--owner", "w", "--now", "1000", "--ttl", "60")
	if r.out != string(id)+" 1\n" {
		t.Fatalf("claim --next: %s", r)
	}
	// What lease run does for its CMD (LEASE_STAGE), through the store.
	stage := filepath.Join(root, "stage", string(id)+".1")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stage, "out.bin"), []byte("RESULT"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(root, "public")); !os.IsNotExist(err) {
		t.Fatalf("public/ exists before the publish (%v): the test needs a table without it", err)
	}
	r = coreLease(t, string(id)+" 1\n", "complete", "--root", root, "--now", "1010", "--publish", "out.bin")
	if r.code != 0 || r.out != string(id)+" 1\n" {
		t.Fatalf("complete --publish on a table without public/: %s", r)
	}
	if data, err := os.ReadFile(filepath.Join(root, "public", "out.bin")); err != nil || string(data) != "RESULT" {
		t.Errorf("public/out.bin: %q, %v", data, err)
	}
	if rec := coreRecord(t, root, id); rec.Status != leasefmt.Done || rec.Publish != "out.bin" {
		t.Errorf("record after the publish: %+v, want done with publish out.bin", rec)
	}
	// What lease made is the layout's: fsck --repair only adds what no
	// command needed yet (targets/, groups/, lost+found/), and then the
	// table is clean.
	if r := coreLease(t, "", "fsck", "--repair", "--root", root); r.code&^1 != 0 || strings.Contains(r.out, "unrepaired") {
		t.Errorf("fsck --repair after the publish: %s", r)
	}
	coreMust(t, 0, "", "fsck", "--root", root)
}

// TestCompleteAgainAfterPublish: a plain complete with the token that
// completed the item through --publish succeeds and changes nothing (it
// was refused with done), while a stale token is still refused and a
// publish of another name after it is not taken for a retry.
func TestCompleteAgainAfterPublish(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("again", 2)
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "w", "--now", "1000", "--ttl", "60", string(ids[0]), string(ids[1]))
	stage := filepath.Join(root, "stage", string(ids[0])+".1")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stage, "r.bin"), []byte("R"), 0o644); err != nil {
		t.Fatal(err)
	}
	coreMust(t, 0, string(ids[0])+" 1\n", "complete", "--root", root, "--now", "1010", "--publish", "r.bin")
	before := coreSnapshot(t, root)
	r := coreLease(t, string(ids[0])+" 1\n", "complete", "--root", root, "--now", "1020")
	if r.code != 0 || r.out != string(ids[0])+" 1\n" || r.errOut != "" {
		t.Errorf("plain complete after complete --publish with the same token: %s\nwant exit 0 and the line on stdout", r)
	}
	coreSame(t, "complete again", before, coreSnapshot(t, root))
	r = coreLease(t, string(ids[0])+" 2\n", "complete", "--root", root, "--now", "1020")
	if r.code != 1 || coreReasons(t, r.errOut)[ids[0]] != "stale-token" {
		t.Errorf("complete with another token after the publish: %s\nwant exit 1, stale-token", r)
	}
	// A plain complete, then a publish with the same token: the publish
	// never happened, so it is not a retry.
	coreMust(t, 0, string(ids[1])+" 1\n", "complete", "--root", root, "--now", "1010")
	stage = filepath.Join(root, "stage", string(ids[1])+".1")
	os.MkdirAll(stage, 0o755)
	os.WriteFile(filepath.Join(stage, "late.bin"), []byte("L"), 0o644)
	r = coreLease(t, string(ids[1])+" 1\n", "complete", "--root", root, "--now", "1020", "--publish", "late.bin")
	if r.code == 0 {
		t.Errorf("complete --publish after a plain complete succeeded: %s", r)
	}
	if _, err := os.Lstat(filepath.Join(root, "public", "late.bin")); err == nil {
		t.Error("a result was published for an item completed without it")
	}
}
