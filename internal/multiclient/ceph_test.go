//go:build linux

package multiclient

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/internal/cephtest"
	"github.com/leasetool/lease/qualify"
)

// cephNeed returns the CephFS mounts, or skips t (fails it under
// LEASE_TEST_REQUIRE).
func cephNeed(t *testing.T) mounts {
	t.Helper()
	m := cephfs()
	need(t, m)
	return m
}

// remount mounts both CephFS clients again with the client options opts,
// and with Ceph's defaults when t ends.
func remount(t *testing.T, opts string) {
	t.Helper()
	if err := ceph.Remount(opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ceph.Remount(""); err != nil {
			t.Errorf("remount with the defaults: %v", err)
		}
	})
}

// TestCephCrossClientReadsKickTheJournal: a renew-batch through client B
// of leases client A renewed last, and a verify through A of leases B
// renewed last. Each record read waits on the MDS's journal (the caps A
// held on the record's inode are taken back and the change journaled;
// the MDS writes its journal at its next tick, up to 5 s away), so lease
// asks the MDS to write it now: the kicks show at the MDS as setattr
// requests (the touch of the table root), and every lease is renewed and
// verified. With lease as it was, the MDS served no setattr for these
// commands, and the renew-batch took 276 s (N = 1024; bench/ceph).
func TestCephCrossClientReadsKickTheJournal(t *testing.T) {
	m := cephNeed(t)
	a, b := table(t, m)
	const n = 256
	claim := lease(t, strings.Join(ids(t.Name(), n), "\n")+"\n", "claim", "--root", a, "--now", "1000", "--ttl", "1e9", "-")
	if claim.code != 0 || len(claim.lines()) != n {
		t.Fatalf("claim: %s", claim)
	}
	held := claim.out
	if r := lease(t, held, "renew-batch", "--root", a, "--now", "1001"); r.code != 0 || r.out != held {
		t.Fatalf("renew-batch through A: %s", r)
	}
	for _, step := range []struct {
		root string
		args []string
	}{
		{b, []string{"renew-batch", "--now", "1002"}},
		{a, []string{"verify", "--now", "1003"}},
	} {
		before, err := cephtest.Requests(cephtest.Base)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		r := lease(t, held, append(step.args, "--root", step.root)...)
		took := time.Since(t0)
		after, err := cephtest.Requests(cephtest.Base)
		if err != nil {
			t.Fatal(err)
		}
		if r.code != 0 || r.out != held {
			t.Errorf("%s through %s after the other client: %s", step.args[0], step.root, r)
		}
		d := cephtest.Delta(before, after)
		if d["setattr"] == 0 {
			t.Errorf("%s through %s: no journal kick reached the MDS (its requests: %v)", step.args[0], step.root, d)
		}
		t.Logf("%s of %d through %s after the other client wrote them: %.2fs, MDS requests %v", step.args[0], n, filepath.Base(filepath.Dir(step.root)), took.Seconds(), d)
	}
}

// TestCephCachingOptionsStaySafe: the ceph-fuse settings that cache more
// or invalidate less (client_force_lazyio, a larger metadata cache, a
// longer cap release delay; the kernel page cache left alone with
// fuse_use_invalidate_cb false) change nothing for lease: lease qualify
// passes its client-caches check, and 10 race rounds of 8 processes
// through both clients grant no ID twice. ceph-fuse gives the kernel no
// dentry or attribute timeouts and lease never rewrites a file in place,
// so no cached copy of a replaced record is ever read.
func TestCephCachingOptionsStaySafe(t *testing.T) {
	m := cephNeed(t)
	for _, opts := range []string{
		"client_force_lazyio=true client_cache_size=65536 client_caps_release_delay=60",
		"fuse_use_invalidate_cb=false",
	} {
		t.Run(strings.Fields(opts)[0], func(t *testing.T) {
			remount(t, opts)
			r := lease(t, "", "qualify", "--json", "--root", filepath.Join(m.B, fmt.Sprintf("qualify-opts-%d", tableSeq.Add(1))))
			p := decodeProof(t, r.out)
			if pass, detail, ok := p.check("client-caches", 0); !ok || !pass || r.code != 0 {
				t.Errorf("lease qualify with %s: exit %d, client-caches pass %v (%s)", opts, r.code, pass, detail)
			}
			a, b := table(t, m)
			doubles, regressions := race(t, a, b, envInt("LEASE_CEPH_OPTION_ROUNDS", 10), 32, true)
			t.Logf("%s: %d double grants, %d token regressions", opts, doubles, regressions)
		})
	}
}

// TestCephReconnectStaleIsUnsafe: a process through client B holds the
// lock of a record's byte; the MDS evicts client B (its node cut off, as
// `ceph tell mds.* client evict` does). Client A then gets the lock. With
// Ceph's defaults B is blocklisted: every later write through B fails, so
// a lease process that lost its lock writes nothing. With
// client_reconnect_stale B opens a new session by itself and the same
// write goes through while A holds the lock: two holders. lease qualify's
// client-caches check passes with the defaults and fails, naming the
// setting, with client_reconnect_stale; the unsafe-filesystem guard says the
// same (qualify.Inspect), so lease init refuses a table there.
func TestCephReconnectStaleIsUnsafe(t *testing.T) {
	m := cephNeed(t)
	for _, c := range []struct {
		opts   string
		unsafe bool
	}{{"", false}, {"client_reconnect_stale=true", true}} {
		t.Run(map[bool]string{false: "defaults", true: "reconnect_stale"}[c.unsafe], func(t *testing.T) {
			remount(t, c.opts) // also a fresh client B after the last subtest evicted it
			dir := fmt.Sprintf("evict-%d", tableSeq.Add(1))
			if err := os.MkdirAll(filepath.Join(m.B, dir), 0o755); err != nil {
				t.Fatal(err)
			}
			r := lease(t, "", "qualify", "--json", "--root", filepath.Join(m.B, dir, "q"))
			p := decodeProof(t, r.out)
			pass, detail, ok := p.check("client-caches", 0)
			if !ok || pass == c.unsafe || (c.unsafe && (r.code != 1 || !strings.Contains(detail, "client_reconnect_stale=true"))) {
				t.Errorf("lease qualify with %q: exit %d, client-caches present %v pass %v: %s", c.opts, r.code, ok, pass, detail)
			}
			if u := qualify.Inspect(filepath.Join(m.B, dir)).Unsafe(); (len(u) > 0) != c.unsafe {
				t.Errorf("the guard with %q: %+v, want unsafe %v", c.opts, u, c.unsafe)
			}
			r = lease(t, "", "init", "--root", filepath.Join(m.B, dir, "table"))
			if refused := r.code == 2 && strings.Contains(r.errs, "refusing to create a table"); refused != c.unsafe || (!c.unsafe && r.code != 0) {
				t.Errorf("lease init with %q: %s\nwant refused %v", c.opts, r, c.unsafe)
			}

			lockB, err := unix.Open(filepath.Join(m.B, dir, "lock"), unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(lockB)
			byte0 := unix.Flock_t{Type: unix.F_WRLCK, Start: 0, Len: 1}
			if err := unix.FcntlFlock(uintptr(lockB), unix.F_OFD_SETLK, &byte0); err != nil {
				t.Fatalf("lock through B: %v", err)
			}
			lockA, err := unix.Open(filepath.Join(m.A, dir, "lock"), unix.O_RDWR|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(lockA)
			if err := unix.FcntlFlock(uintptr(lockA), unix.F_OFD_SETLK, &byte0); err == nil {
				t.Fatal("A got the lock B holds")
			}
			evict(t, "client.b")
			var aErr error
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				if aErr = unix.FcntlFlock(uintptr(lockA), unix.F_OFD_SETLK, &byte0); aErr == nil {
					break
				}
			}
			if aErr != nil {
				t.Fatalf("A did not get the lock after B's eviction: %v", aErr)
			}
			// The holder through B carries on, as a lease process that
			// read a record under its lock would: write and rename.
			var werr error
			tmp, final := filepath.Join(m.B, dir, ".rec.tmp"), filepath.Join(m.B, dir, "rec")
			// With client_reconnect_stale the write fails (ESHUTDOWN) until
			// the client has noticed its eviction and opened a new session:
			// a few seconds on a quiet machine, much longer on a loaded one
			// (CI met more than 5 s), so the test waits for the write, bounded
			// by a minute, instead of counting tries.
			start := time.Now()
			for deadline := start.Add(time.Minute); ; time.Sleep(250 * time.Millisecond) {
				if werr = os.WriteFile(tmp, []byte("written through B after it lost its lock\n"), 0o644); werr == nil {
					werr = os.Rename(tmp, final)
				}
				if werr == nil || !c.unsafe || time.Now().After(deadline) {
					break
				}
			}
			_, seen := os.Stat(filepath.Join(m.A, dir, "rec"))
			switch {
			case !c.unsafe && (werr == nil || seen == nil):
				t.Errorf("defaults: B wrote after its eviction (%v); A sees it: %v", werr, seen == nil)
			case c.unsafe && (werr != nil || seen != nil):
				t.Errorf("client_reconnect_stale: B's write after its eviction: %v; A sees it: %v (want it through, the unsafe case qualify names)", werr, seen == nil)
			}
			t.Logf("%q: after the eviction A holds the lock; B's write (%.1f s after the first try): %v", c.opts, time.Since(start).Seconds(), werr)
		})
	}
}

// evict makes the MDS evict the session of client name ("client.b").
func evict(t *testing.T, name string) {
	t.Helper()
	st, err := cephtest.Admin(cephtest.Socket(cephtest.Base, name), map[string]any{"prefix": "status"})
	if err != nil {
		t.Fatal(err)
	}
	var status struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(st, &status); err != nil || status.ID == 0 {
		t.Fatalf("status of %s: %v %s", name, err, st)
	}
	if out, err := cephtest.Admin(cephtest.Socket(cephtest.Base, "mds.a"), map[string]any{"prefix": "session evict", "filters": []string{fmt.Sprintf("id=%d", status.ID)}}); err != nil {
		t.Fatalf("evict %s: %v %s", name, err, out)
	}
}
