package multiclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/leasefmt"
)

// TestClaimHeldThroughOtherMount, on the safe volume: a claim through one
// mount is refused as held through the other at once, in both directions,
// for IDs the other mount has and has not looked at before; and a release
// through one mount frees the ID for a claim through the other at once,
// with a larger token.
func TestClaimHeldThroughOtherMount(t *testing.T) {
	each(t, safeFilesystems(), func(t *testing.T, m mounts) {
		a, b := table(t, m)
		for i, id := range ids(t.Name(), 12) {
			first, second := a, b
			if i%2 == 1 {
				first, second = b, a
			}
			if i%3 == 0 {
				// The other mount looks first: it has the missing record in
				// its caches, if it caches anything.
				if r := lease(t, id+" 1\n", "verify", "--root", second, "--now", "1000"); r.code != 1 {
					t.Fatalf("verify before the claim: %s", r)
				}
			}
			r := lease(t, "", "claim", "--root", first, "--now", "1000", "--ttl", "60", id)
			if r.code != 0 || r.out != id+" 1\n" {
				t.Fatalf("claim through %s: %s", first, r)
			}
			r = lease(t, "", "claim", "--root", second, "--now", "1001", "--ttl", "60", id)
			if r.code != 1 || r.out != "" || !strings.HasPrefix(r.errs, "held "+id+" 1 ") {
				t.Errorf("claim through the other mount %s right after: %s; want held by token 1", second, r)
			}
			if r := lease(t, id+" 1\n", "release", "--root", first, "--now", "1002"); r.code != 0 {
				t.Fatalf("release: %s", r)
			}
			r = lease(t, "", "claim", "--root", second, "--now", "1003", "--ttl", "60", id)
			if r.code != 0 || r.out != id+" 2\n" {
				t.Errorf("claim through %s right after the release through %s: %s; want token 2", second, first, r)
			}
		}
	})
}

// TestPublishSeenThroughOtherMount, on the safe volume: a holder stages a
// result and completes with --publish through one mount; through the other
// mount the published bytes are there, the staged name is gone, the record
// is done (a claim is refused as done) and the holder's token no longer
// verifies.
func TestPublishSeenThroughOtherMount(t *testing.T) {
	each(t, safeFilesystems(), func(t *testing.T, m mounts) {
		a, b := table(t, m)
		for i, id := range ids(t.Name(), 4) {
			first, second := a, b
			if i%2 == 1 {
				first, second = b, a
			}
			if r := lease(t, "", "claim", "--root", first, "--now", "1000", "--ttl", "600", id); r.code != 0 {
				t.Fatalf("claim: %s", r)
			}
			name := fmt.Sprintf("result-%d.bin", i)
			data := []byte(fmt.Sprintf("findings of %s through %s\n", id, first))
			stage := filepath.Join(first, "stage", id+".1")
			if err := os.MkdirAll(stage, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(stage, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			if r := lease(t, id+" 1\n", "complete", "--root", first, "--now", "1010", "--publish", name); r.code != 0 {
				t.Fatalf("complete --publish through %s: %s", first, r)
			}
			got, err := os.ReadFile(filepath.Join(second, "public", name))
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("public/%s through %s: %q, %v; want %q", name, second, got, err, data)
			}
			if _, err := os.Lstat(filepath.Join(second, "stage", id+".1", name)); err == nil {
				t.Errorf("the staged name is still there through %s", second)
			}
			rec := readRecord(t, second, id)
			if rec.Status != leasefmt.Done || rec.Token != 1 {
				t.Errorf("record through %s: %+v, want done with token 1", second, rec)
			}
			if r := lease(t, "", "claim", "--root", second, "--now", "5000", id); r.code != 1 || !strings.HasPrefix(r.errs, "done ") {
				t.Errorf("claim of the done ID through %s: %s", second, r)
			}
			if r := lease(t, id+" 1\n", "verify", "--root", second, "--now", "1011"); r.code != 1 || !strings.HasPrefix(r.errs, "done ") {
				t.Errorf("verify of the completed lease through %s: %s", second, r)
			}
		}
	})
}

// readRecord reads the work record of id in the table at root, directly.
func readRecord(t *testing.T, root, id string) *leasefmt.Record {
	t.Helper()
	pid, err := leasefmt.ParseID(id)
	if err != nil {
		t.Fatal(err)
	}
	var hdr struct {
		WorkShards int `json:"work_shards"`
	}
	b, err := os.ReadFile(filepath.Join(root, "TABLE"))
	if err != nil || json.Unmarshal(b, &hdr) != nil {
		t.Fatalf("TABLE: %v", err)
	}
	p := filepath.Join(root, "work", leasefmt.ShardDirName(pid.Shard(hdr.WorkShards), hdr.WorkShards), pid.FileName())
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := leasefmt.Decode(data, leasefmt.Work, pid)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRenewKilledThenFsckThroughOtherMount, on the safe volume: a
// renew-batch of 400 leases through mount A is killed with SIGKILL part
// way through; through mount B, lease fsck finds what it left (temp files
// at most), --repair puts it right, a second fsck is clean, every lease
// still verifies with its token and a renew-batch through B renews all.
func TestRenewKilledThenFsckThroughOtherMount(t *testing.T) {
	each(t, safeFilesystems(), func(t *testing.T, m mounts) {
		a, b := table(t, m)
		const n = 400
		all := ids(t.Name(), n)
		claim := lease(t, strings.Join(all, "\n")+"\n", "claim", "--root", a, "--now", "1000", "--ttl", "100000", "-")
		if claim.code != 0 || len(claim.lines()) != n {
			t.Fatalf("claim: %s", claim)
		}
		held := claim.out
		delay := 400 * time.Millisecond
		renewed, at := 0, 0.0
		for try := 1; try <= 8; try++ {
			at = 1000 + float64(try)
			// One writer: a process killed with more lock requests in flight
			// than the GlusterFS 10.3 client has event threads (2 by default)
			// deadlocks that client for good (gluster issue 4371: each
			// interrupted setlk blocks an epoll thread until its clear-lock
			// answer, which needs a free one). With 64 writers it hung the
			// mount here in 1 of 2 runs; lease(1) and lease-qualify(1) say so.
			cmd := exec.Command(leaseBin, "renew-batch", "--writers", "1", "--root", a, "--now", strconv.FormatFloat(at, 'f', -1, 64))
			cmd.Stdin = strings.NewReader(held)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(delay)
			cmd.Process.Signal(syscall.SIGKILL)
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			var werr error
			select {
			case werr = <-exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("try %d: renew-batch still in the kernel 30 s after SIGKILL: the GlusterFS client of mount A deadlocked", try)
			}
			renewed = 0
			for _, st := range statusAll(t, b, all) {
				if st.RenewedAt == at {
					renewed++
				}
			}
			t.Logf("try %d: killed after %v (%v): %d of %d renewed", try, delay, werr, renewed, n)
			if renewed > 0 && renewed < n {
				break
			}
			if renewed == n {
				delay /= 2
			} else {
				delay = delay * 3 / 2
			}
		}
		if renewed == 0 || renewed == n {
			t.Fatalf("could not kill renew-batch part way through (%d of %d renewed)", renewed, n)
		}
		check := lease(t, "", "fsck", "--root", b, "--now", "1100")
		if check.code != 0 && check.code != 4 {
			t.Fatalf("fsck through B after the kill: %s", check)
		}
		if check.code == 4 && strings.Contains(check.out+check.errs, "corrupt") {
			t.Errorf("fsck through B found more than a killed writer leaves: %s", check)
		}
		if r := lease(t, "", "fsck", "--root", b, "--now", "1100", "--repair"); r.code != 0 && r.code != 1 {
			t.Fatalf("fsck --repair through B: %s", r)
		}
		if r := lease(t, "", "fsck", "--root", b, "--now", "1100"); r.code != 0 {
			t.Fatalf("fsck through B after the repair: %s", r)
		}
		if r := lease(t, held, "verify", "--root", b, "--now", "1100"); r.code != 0 || r.out != held {
			t.Fatalf("verify through B after the repair: %s", r)
		}
		if r := lease(t, held, "renew-batch", "--root", b, "--now", "1200"); r.code != 0 || r.out != held {
			t.Fatalf("renew-batch through B after the repair: %s", r)
		}
		t.Logf("killed part way: %d of %d renewed; fsck before the repair exit %d", renewed, n, check.code)
	})
}
