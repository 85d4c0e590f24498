package commands_test

// A table whose filesystem runs out of inodes before bytes (issue 28):
// lease add warns before it queues more than the inodes left can hold, an
// add, claim or publish that runs out says so once (inodes, not bytes) with
// the count of what was not done, and status --summary and qualify show the
// inodes left.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/leasefmt"
)

func freeInodes(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Ffree) // int64 on freebsd
}

// lines splits output into its non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestOutOfInodes runs a table on a loop-mounted ext4 of 1024 inodes and
// plenty of bytes. Before, `lease add` of 3000 IDs there printed 3000
// identical lines naming one unrelated queue file and "the filesystem is
// full", and nothing said inodes.
func TestOutOfInodes(t *testing.T) {
	t.Parallel()
	mnt := testenv.LoopMount(t, "ext4", 64<<20, "-N", "1024", "-m", "0")
	// qualify shows the inodes left.
	// (The lease binary: qualify's lock checks run a second process of it.)
	qout, qerr, qcode := mpiExec(t, procBin, "", "qualify", "--root", filepath.Join(mnt, "q"))
	if qcode != 0 || !strings.Contains(qout, "inodes") || !strings.Contains(qout, "of 1024 inodes free: room for about") {
		t.Errorf("qualify on a filesystem of 1024 inodes: exit %d\n%s%s\nwant an inodes line", qcode, qout, qerr)
	}
	// Every lease is a process of its own (an in-process run keeps the
	// table's root open, and the mount busy).
	run := func(stdin string, args ...string) coreResult {
		out, errOut, code := mpiExec(t, procBin, stdin, args...)
		return coreResult{code, out, errOut}
	}
	must := func(want int, stdin string, args ...string) coreResult {
		t.Helper()
		r := run(stdin, args...)
		if r.code != want {
			t.Fatalf("lease %s: %s\nwant exit %d", strings.Join(args, " "), r, want)
		}
		return r
	}
	root := filepath.Join(mnt, "table")
	must(0, "", "init", "--root", root, "--shards", "4")
	// One lease held, with a staged result, before the inodes run out.
	held := coreID("inodes-held")
	must(0, "", "claim", "--root", root, "--now", "1000", "--ttl", "1000", string(held))
	stage := filepath.Join(root, "stage", string(held)+".1")
	os.MkdirAll(stage, 0o755)
	if err := os.WriteFile(filepath.Join(stage, "r.bin"), []byte("R"), 0o644); err != nil {
		t.Fatal(err)
	}
	free := freeInodes(t, mnt)
	ids := coreIDs("inodes", 3000)
	add := run(coreJoin(ids, ""), "add", "--root", root)
	errLines := lines(add.errOut)
	if add.code != 4 || len(errLines) != 2 {
		t.Fatalf("add of 3000 IDs with %d inodes free: exit %d, %d stderr lines (want exit 4 and 2 lines: the warning, then once out of inodes):\n%s",
			free, add.code, len(errLines), strings.Join(errLines[:min(len(errLines), 5)], "\n"))
	}
	if w := errLines[0]; !strings.Contains(w, "warning: 3000 IDs to add need up to 6000 inodes") || !strings.Contains(w, fmt.Sprintf("has %d of 1024 free", free)) {
		t.Errorf("the warning before the add: %q", w)
	}
	if l := errLines[1]; !strings.Contains(l, "lease add: out of inodes: the table's filesystem at "+root+" has 0 of 1024 inodes free") ||
		!strings.Contains(l, "bytes are not the limit") || !strings.Contains(l, "3000 of 3000 IDs not added") {
		t.Errorf("the add's report of the inodes: %q", l)
	}
	if add.out != "" {
		t.Errorf("the failed add reported IDs added: %q", add.out)
	}
	// status --summary shows the inodes beside the queue.
	sum := must(0, "", "status", "--summary", "--root", root)
	if !strings.Contains(sum.out, "inodes") || !strings.Contains(sum.out, "free of 1024 on the table's filesystem: room for about 0 more items") {
		t.Errorf("status --summary with no inode left:\n%s", sum.out)
	}
	js := must(0, "", "status", "--summary", "--json", "--root", root)
	var doc struct {
		Queued int64 `json:"queued"`
		Inodes struct {
			Known bool   `json:"known"`
			Free  uint64 `json:"free"`
			Total uint64 `json:"total"`
		} `json:"inodes"`
	}
	if err := json.Unmarshal([]byte(js.out), &doc); err != nil || !doc.Inodes.Known || doc.Inodes.Free != freeInodes(t, mnt) || doc.Queued == 0 {
		t.Errorf("status --summary --json: %v %s", err, js.out)
	}
	// Claims and the publish run out the same way: said once each.
	claim := run(coreJoin(ids[:20], ""), "claim", "--root", root, "--now", "1001", "-")
	if l := lines(claim.errOut); claim.code != 4 || len(l) != 1 || !strings.Contains(l[0], "out of inodes") || !strings.Contains(l[0], "20 of 20 IDs not granted") {
		t.Errorf("claim of 20 IDs out of inodes: %s", claim)
	}
	next := run("", "claim", "--root", root, "--next", "5", "--now", "1001")
	// claim --next stops at the first item that cannot be written.
	if l := lines(next.errOut); next.code != 4 || len(l) != 2 || strings.Count(next.errOut, "out of inodes") != 1 || !strings.Contains(l[1], "1 of 1 IDs not granted") {
		t.Errorf("claim --next 5 out of inodes: %s", next)
	}
	// The holder's publish still goes through: its committing and done
	// records are written through the table's reserve, which needs no
	// inode, and the move into public/ is a rename (docs/design.md#durability).
	pub := run(string(held)+" 1\n", "complete", "--root", root, "--now", "1002", "--publish", "r.bin", "-v")
	if pub.code != 0 || pub.out != string(held)+" 1\n" || !strings.Contains(pub.errOut, "spares_used=2 ") {
		t.Errorf("complete --publish out of inodes: %s\nwant it completed through the reserve", pub)
	}
	data, err := os.ReadFile(filepath.Join(root, "work", fmt.Sprintf("%02x", shard4(held)), string(held)+".json"))
	if rec, derr := leasefmt.Decode(data, leasefmt.Work, held); err != nil || derr != nil || rec.Status != leasefmt.Done || rec.Token != 1 {
		t.Errorf("the held lease after the publish: %v %v %s", err, derr, data)
	}
	if _, err := os.Stat(filepath.Join(root, "public", "r.bin")); err != nil {
		t.Errorf("the published result: %v", err)
	}
	// Completing again with the token succeeds (a retry is safe), inodes
	// freed or not.
	for _, id := range ids[:50] {
		os.Remove(filepath.Join(root, "queue", fmt.Sprintf("%02x", shard4(id)), string(id)))
	}
	must(0, string(held)+" 1\n", "complete", "--root", root, "--now", "1003", "--publish", "r.bin")
}

// shard4 is the work shard of id in a table of 4 shards.
func shard4(id leasefmt.ID) int {
	var v uint64
	fmt.Sscanf(string(id[:8]), "%x", &v)
	return int(v % 4)
}
