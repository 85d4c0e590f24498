//go:build linux

package nfstest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNFSCases are the NFS cases of issue 33 that need a mount of their
// own or a client's open file: for each version one server kernel and two
// client kernels with the default options (Up), on which the clients also
// mount the export a second time with other options (nosharecache: a
// superblock and caches of its own), so that one cluster per version
// shows the default mount and the other side by side.
//
//   - locallocks: a second mount asking for the client's locks kept
//     local (NFSv3 nolock, NFSv4.2 local_lock=all). NFSv3: a lock held
//     through one client is granted through the other there, not on the
//     default mount; lease qualify through each client fails there (exit
//     1, its client-caches check naming the option) and is verified on
//     the default mount; lease init refuses there (exit 2) and makes a
//     table on the default mount. NFSv4.2: the client ignores the option
//     (local_lock=none in effect), so there it is as safe as the default.
//   - sillyrename: a record open in a shell of a client (exec 3<) while
//     lease rewrites it through that client: the client renames the old
//     file to .nfsXXXX in the shard; fsck calls it an nfs-silly-rename
//     notice (exit 0, --repair leaves it), the summary and claim --next
//     pass it over; closed, the file is gone.
//   - caches: a change through one client read through the other right
//     after, with the default options and on a mount with noac and
//     lookupcache=none: a claim is refused as held at once (locks and
//     revalidation); an item added to the queue, a completion in the
//     summary: seen through the other client how much later (logged).
func TestNFSCases(t *testing.T) {
	eachVersion(t, func(t *testing.T, vers, bin string) {
		t0 := time.Now()
		s := &suite{ctx: Context(t), c: UpT(t, Options{Vers: vers, Name: "cases"}), lease: bin}
		t.Logf("NFSv%s: server and 2 clients up in %.1fs", vers, time.Since(t0).Seconds())
		for _, sub := range []struct {
			name string
			f    func(*testing.T, *suite, string)
		}{
			{"locallocks", localLocks},
			{"sillyrename", sillyRename},
			{"caches", caches},
			{"soft", soft},
		} {
			t1 := time.Now()
			t.Run(sub.name, func(t *testing.T) { sub.f(t, s, vers) })
			t.Logf("NFSv%s %s: %.1fs", vers, sub.name, time.Since(t1).Seconds())
		}
	})
}

// mountAgain mounts the export a second time at dir in client i with
// opts more (nosharecache: its own superblock, so the options apply).
func mountAgain(t *testing.T, s *suite, i int, vers, dir, opts string) string {
	t.Helper()
	out, code := s.sh(t, i, fmt.Sprintf(`src=$(awk '$2 == "%s" { print $1 }' /proc/mounts)
mkdir -p %[2]s && mount -t nfs -o vers=%[3]s,%[4]s,nosharecache "$src" %[2]s && grep " %[2]s " /proc/mounts`, Mnt, dir, vers, opts))
	if code != 0 {
		t.Fatalf("client %d: mount with %s: exit %d: %s", i, opts, code, out)
	}
	t.Logf("client %d: %s", i, strings.TrimSpace(out))
	return out
}

// localLocks: see TestNFSCases.
func localLocks(t *testing.T, s *suite, vers string) {
	const local = "/tmp/nfs-local"
	// On NFSv4 the Linux client drops nolock and local_lock (6.1:
	// /proc/mounts shows local_lock=none): its locks are the server's
	// whatever the options, so that mount is as safe as the default one.
	opt, localSafe := "nolock", false
	if vers != "3" {
		opt, localSafe = "local_lock=all", true
	}
	for i := 0; i < 2; i++ {
		mounted := mountAgain(t, s, i, vers, local, opt)
		if localSafe != strings.Contains(mounted, ",local_lock=none,") {
			t.Fatalf("client %d: NFSv%s mounted with %s: %s; want local_lock=%v", i, vers, opt, mounted, map[bool]string{true: "none", false: "all"}[localSafe])
		}
	}
	for k, m := range []struct {
		dir  string
		safe bool
	}{{Mnt, true}, {local, localSafe}} {
		// A directory of each mount's own: both mounts are the export.
		dir := fmt.Sprintf("%s/locallocks-%d", m.dir, k)
		// A lock held through client 0 (lease's own holder, as qualify's
		// lock check starts it), asked for through client 1.
		out, code := s.sh(t, 0, fmt.Sprintf(`mkdir -p %[1]s && : > %[1]s/lock
: > /tmp/hold.out  # empty before the holder starts: not the last mount's "locked", nor missing
($LEASE qualify --hold-lock %[1]s/lock > /tmp/hold.out 2>&1 & echo $! > /tmp/hold.pid)
i=0; until grep -q locked /tmp/hold.out || [ $i -ge 300 ]; do sleep 1; i=$((i+1)); done; cat /tmp/hold.out
grep -q locked /tmp/hold.out || { echo "after $i s:"; ps -ef | grep -v grep | grep lease; cat /proc/$(cat /tmp/hold.pid)/stack; dmesg | tail -5; }`, dir))
		if code != 0 || strings.TrimSpace(out) != "locked" {
			t.Fatalf("%s: the lock through client 0: exit %d: %s", m.dir, code, out)
		}
		out, _ = s.sh(t, 1, fmt.Sprintf(`r hold timeout 30 $LEASE qualify --hold-lock %s/lock`, dir))
		hold := results(t, out)["hold"]
		s.sh(t, 0, `kill $(cat /tmp/hold.pid)`)
		switch {
		case m.safe && (hold.code != 5 || hold.out == "locked"):
			t.Errorf("%s: the lock held through client 0 asked for through client 1: %s; want refused (exit 5)", m.dir, hold)
		case !m.safe && hold.out != "locked":
			t.Errorf("%s (%s): the lock held through client 0 asked for through client 1: %s; want granted (the locks stay in each client)", m.dir, opt, hold)
		default:
			t.Logf("%s: the lock held through client 0, through client 1: %s", m.dir, hold)
		}
		for i := 0; i < 2; i++ {
			out, code := s.sh(t, i, fmt.Sprintf(`$LEASE qualify --json --root %s/qualify-%d 2>/dev/null`, dir, i))
			var p struct {
				Verified bool `json:"verified"`
				Checks   []struct {
					Name   string `json:"name"`
					Pass   bool   `json:"pass"`
					Detail string `json:"detail"`
				} `json:"checks"`
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &p); err != nil {
				t.Fatalf("%s: qualify through client %d: exit %d: %v: %s", m.dir, i, code, err, out)
			}
			cc := "no client-caches check"
			ccPass := false
			for _, c := range p.Checks {
				if c.Name == "client-caches" {
					cc, ccPass = c.Detail, c.Pass
				}
			}
			switch {
			case m.safe && (code != 0 || !p.Verified || !ccPass):
				t.Errorf("%s: qualify through client %d: exit %d, verified %v, client-caches %v %q", m.dir, i, code, p.Verified, ccPass, cc)
			case !m.safe && (code != 1 || p.Verified || ccPass || !strings.Contains(cc, opt)):
				t.Errorf("%s (%s): qualify through client %d: exit %d, verified %v, client-caches %v %q; want exit 1 and client-caches failed naming %s", m.dir, opt, i, code, p.Verified, ccPass, cc, opt)
			}
		}
		out, _ = s.sh(t, 1, fmt.Sprintf(`r init $LEASE init --root %s/table --shards 4`, dir))
		r := results(t, out)["init"]
		switch {
		case m.safe && r.code != 0:
			t.Errorf("%s: lease init: %s", m.dir, r)
		case !m.safe && (r.code != 2 || !strings.Contains(r.errs, opt)):
			t.Errorf("%s (%s): lease init: %s; want refused, exit 2, naming %s", m.dir, opt, r, opt)
		case !m.safe:
			t.Logf("%s: lease init: %s", m.dir, r)
		}
	}
}

// sillyRename: see TestNFSCases.
func sillyRename(t *testing.T, s *suite, vers string) {
	root := Mnt + "/silly"
	id := ids(t.Name(), 1)[0]
	out, code := s.sh(t, 0, fmt.Sprintf(`$LEASE init --root %[1]s --shards 1 &&
echo %[2]s | $LEASE add --root %[1]s &&
$LEASE claim --root %[1]s --ttl 600 %[2]s > /tmp/held || exit 1
rec=$(ls %[1]s/work/*/%[2]s.json)
exec 3< "$rec"
$LEASE renew-batch --root %[1]s --ttl 600 < /tmp/held > /dev/null || exit 1
echo "SILLY $(ls -a $(dirname "$rec") | grep '^\.nfs' | tr '\n' ' ')"
r fsck $LEASE fsck --root %[1]s
r repair $LEASE fsck --repair --root %[1]s
r summary $LEASE status --summary --json --root %[1]s
r next $LEASE claim --next 1 -v --root %[1]s
r openread sh -c 'cat <&3'
exec 3<&-
echo "AFTER $(ls -a $(dirname "$rec") | grep '^\.nfs' | tr '\n' ' ')"
`, root, id))
	if code != 0 {
		t.Fatalf("client 0: exit %d: %s", code, out)
	}
	var silly, after string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "SILLY "); ok {
			silly = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "AFTER "); ok {
			after = strings.TrimSpace(v)
		}
	}
	rs := results(t, out)
	t.Logf("NFSv%s: the record renamed over while open: %q; fsck: %s", vers, silly, rs["fsck"])
	if silly == "" || strings.Contains(silly, " ") {
		t.Fatalf("want one .nfsXXXX file in the shard while the old record is open, got %q: %s", silly, out)
	}
	for _, tag := range []string{"fsck", "repair"} {
		if r := rs[tag]; r.code != 0 || !strings.Contains(r.out, "notice nfs-silly-rename "+root+"/work/00/"+silly+": ") {
			t.Errorf("%s: %s; want exit 0 and the notice nfs-silly-rename of %s", tag, r, silly)
		}
	}
	if r := rs["summary"]; r.code != 0 || !strings.Contains(r.out, `"leased":1,`) || !strings.Contains(r.out, `"corrupt":0,`) {
		t.Errorf("summary: %s; want the one item leased, nothing corrupt", r)
	}
	if r := rs["next"]; r.code != 1 || !strings.Contains(r.errs, "busy") || !strings.Contains(r.errs, " foreign=0 ") {
		t.Errorf("claim --next: %s; want busy, exit 1, no foreign names", r)
	}
	if r := rs["openread"]; r.code != 0 || !strings.Contains(r.out, `"token":1`) {
		t.Errorf("the old record through the open descriptor: %s", r)
	}
	if after != "" {
		t.Errorf("after the close: %q in the shard; want the client to have removed it", after)
	}
}

// caches: see TestNFSCases. The table has one shard, so that every
// change lands in a directory client 1 has just listed or looked at: the
// record's shard, the queue's, the tally's bucket (a summary keeps a
// bucket's counts in tally/CHECKPOINT while the bucket's ctime is the
// one it counted, which client 1 reads by a stat).
func caches(t *testing.T, s *suite, vers string) {
	const strict = "/tmp/nfs-strict"
	mountAgain(t, s, 1, vers, strict, "noac,lookupcache=none")
	for k, m := range []struct{ dir, name string }{{Mnt, "default options"}, {strict, "noac,lookupcache=none"}} {
		root := Mnt + "/caches-" + strconv.Itoa(k)
		seen := m.dir + root[len(Mnt):] // the same table through client 1's mount
		all := ids(t.Name()+m.name, 3)
		// Through client 0: two items claimed, one completed (its bucket
		// made), then quiet for the summary to keep the bucket's counts.
		out, code := s.sh(t, 0, fmt.Sprintf(`$LEASE init --root %[1]s --shards 1 && printf '%%s\n' %[2]s %[3]s | $LEASE add --root %[1]s &&
$LEASE claim --root %[1]s --ttl 600 %[2]s %[3]s > /tmp/held && head -1 /tmp/held | $LEASE complete --root %[1]s && sleep 3`, root, all[0], all[1]))
		if code != 0 {
			t.Fatalf("%s: init, add, claim, complete through client 0: exit %d: %s", m.name, code, out)
		}
		// Through client 1: the summary twice (the second from the
		// checkpoint the first wrote), and the queue (both items held).
		out, _ = s.sh(t, 1, fmt.Sprintf(`r summary1 $LEASE status --summary --json --root %[1]s
r summary $LEASE status --summary --json --root %[1]s
r next $LEASE claim --next 1 --root %[1]s`, seen))
		rs := results(t, out)
		if r := rs["summary"]; r.code != 0 || !strings.Contains(r.out, `"done":1,`) || !strings.Contains(r.out, `"leased":1,`) {
			t.Fatalf("%s: summary through client 1 before: %s", m.name, r)
		}
		if r := rs["next"]; r.code != 1 || r.out != "" {
			t.Errorf("%s: claim --next through client 1 with every item held through client 0: %s; want nothing granted, exit 1", m.name, r)
		}
		// Through client 0: the second completed (its link in the same
		// bucket), a third item added to the queue.
		out, code = s.sh(t, 0, fmt.Sprintf(`tail -1 /tmp/held | $LEASE complete --root %s && echo %s | $LEASE add --root %[1]s`, root, all[2]))
		if code != 0 {
			t.Fatalf("%s: complete and add through client 0: exit %d: %s", m.name, code, out)
		}
		// Through client 1 right after: the summary and claim --next,
		// each polled until it shows the change.
		out, code = s.sh(t, 1, fmt.Sprintf(`t0=$(date +%%s.%%N)
i=0; until $LEASE status --summary --json --root %[1]s > /tmp/sum && { [ $i -gt 0 ] || cp /tmp/sum /tmp/sum.0; } && grep -q '"done":2,' /tmp/sum; do i=$((i+1)); [ $i -ge 300 ] && break; sleep 1; done
echo "SUMMARY $i $(echo "$(date +%%s.%%N) - $t0" | bc)"
[ $i -gt 0 ] && echo "STALE $(cat /tmp/sum.0)"
t0=$(date +%%s.%%N)
i=0; until $LEASE claim --next 1 --ttl 600 --root %[1]s > /tmp/next 2>/tmp/next.err; do i=$((i+1)); [ $i -ge 300 ] && break; sleep 1; done
echo "NEXT $i $(echo "$(date +%%s.%%N) - $t0" | bc) $(cat /tmp/next)"
[ $i -gt 0 ] && echo "STALENEXT $(cat /tmp/next.err)"
true`, seen))
		if code != 0 {
			t.Fatalf("%s: polls through client 1: exit %d: %s", m.name, code, out)
		}
		re := regexp.MustCompile(`(?m)^(SUMMARY|NEXT) (\d+) ([0-9.]+) ?(.*)$`)
		got := map[string][]string{}
		for _, g := range re.FindAllStringSubmatch(out, -1) {
			got[g[1]] = g[2:]
		}
		if len(got) != 2 {
			t.Fatalf("%s: polls through client 1: %s", m.name, out)
		}
		if got["SUMMARY"][0] == "300" {
			t.Errorf("%s: the completion through client 0 not in client 1's summary after 300 polls", m.name)
		}
		if got["NEXT"][0] == "300" || !strings.HasPrefix(got["NEXT"][2], all[2]+" 1") {
			t.Errorf("%s: claim --next through client 1 of the item added through client 0: %v", m.name, got["NEXT"])
		}
		t.Logf("NFSv%s %s: through client 1, the completion through client 0 in the summary after %s polls (%s s), the item added to the queue granted after %s polls (%s s)\n%s",
			vers, m.name, got["SUMMARY"][0], got["SUMMARY"][1], got["NEXT"][0], got["NEXT"][1], out)
	}
}
