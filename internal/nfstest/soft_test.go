//go:build linux

package nfstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// softOpts are the options of the soft mount: a call fails (EIO) after
// about 1+2+3 s without an answer (NFS over TCP: timeo in tenths of a
// second, growing by timeo at each of retrans retransmissions).
const softOpts = "soft,timeo=10,retrans=2"

// soft: lease through a soft mount while the server is away (issue 33: no
// false success, every failure exit 4, nothing half done that fsck
// --repair cannot settle). Client 0 mounts the export a second time with
// softOpts; a table with a pool of 32 leases (in its 4 shards) is made
// through the default mount. A loop in client 0 runs, through the soft
// mount, round after round: a claim of a new ID, a renew-batch of the
// pool, a claim and complete --publish of another new ID, an add of two
// new IDs, each command's exit status and output logged once it returned.
// knfsd is stopped (StopKnfsd: the server kernel, its tmpfs export and
// mountd stay) as the second round's claim (NFSv3) or renew-batch
// (NFSv4.2) starts, and stays stopped until 8 commands returned after
// the stop, or until a command waits in the kernel's NLM unlock (NFSv3
// sends it until the server answers, soft or not): the loop is stopped
// while the server is still away, or, when a command waits in its
// unlock, once the server is back. Every command must have exited 0 or 4
// (SPEC §7: 4 is an I/O error, nothing reported as a success for records
// in flight), at least one 4 after the stop unless one waited in its
// unlock (else the soft mount proved nothing); every line a command printed as a success must be on the
// export, read through the default mount: a claim's record with its token
// and expiry, a renewal's expiry, a publish's record done and its
// result's bytes, an added ID queued. Then lease fsck, fsck --repair and
// fsck (exit 0) through the default mount, and a claim through the soft
// mount succeeds again.
func soft(t *testing.T, s *suite, vers string) {
	const softMnt = "/tmp/nfs-soft"
	mountAgain(t, s, 0, vers, softMnt, softOpts)
	root := Mnt + "/soft"
	via := softMnt + "/soft" // the same table through the soft mount
	pool := ids(t.Name(), 32)
	out, code := s.sh(t, 0, fmt.Sprintf(`$LEASE init --root %[1]s --shards 4 > /dev/null &&
$LEASE claim --root %[1]s --ttl 600 %[2]s > /tmp/pool && cat /tmp/pool`, root, strings.Join(pool, " ")))
	if code != 0 || strings.Count(out, "\n") != len(pool) {
		t.Fatalf("init and the pool's claim through client 0: exit %d: %s", code, out)
	}
	spool := filepath.Join(s.c.Clients[0].Dir(), "spool")
	logf := filepath.Join(spool, "soft.log")
	// The loop: "S TAG" as each command starts, "R TAG@T0 EXIT STDOUT |
	// STDERR" once it returned, T0 the client's clock before it started.
	// IDs: c (a claim), b (a claim and publish), a (adds), then the
	// round's number.
	loop := s.preamble() + fmt.Sprintf(`V=%s; log=/run/spool/soft.log
rr() { tag=$1; shift; echo "S $tag" >> $log; t0=$(date +%%s.%%N); o=$("$@" 2>/tmp/rr.err); c=$?
  printf 'R %%s@%%s %%d %%s | %%s\n' "$tag" "$t0" "$c" "$(echo $o)" "$(tr '\n' ' ' < /tmp/rr.err | cut -c1-600)" >> $log; return $c; }
k=0
while [ ! -e /run/spool/soft.stop ]; do
  k=$((k+1))
  rr claim-$k $LEASE claim --root $V --ttl 600 $(printf 'c%%063x' $k)
  rr renew-$k $LEASE renew-batch --root $V --ttl 900 /tmp/pool
  if rr pclaim-$k $LEASE claim --root $V --ttl 600 $(printf 'b%%063x' $k); then
    set -- $o; echo "$1 $2" > /tmp/p
    if mkdir "$V/stage/$1.$2" && echo "$1 $k" > "$V/stage/$1.$2/res-$k"; then
      rr publish-$k $LEASE complete --root $V --publish res-$k /tmp/p
    else echo "STAGEFAIL $k" >> $log; fi
  fi
  printf 'a%%063x\na%%063x\n' $((2*k)) $((2*k+1)) > /tmp/add
  rr add-$k $LEASE add --root $V /tmp/add
done
echo "END $k" >> $log
`, via)
	readLog := func() []byte { b, _ := os.ReadFile(logf); return b }
	// waitLog waits until cond holds for the log (at most 10 minutes).
	waitLog := func(what string, cond func(b []byte) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Minute)
		for !cond(readLog()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10 minutes; the log: %s", what, readLog())
			}
			select {
			case <-s.ctx.Done():
				t.Fatalf("%s: %v; the log: %s", what, s.ctx.Err(), readLog())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if err := s.c.Clients[0].Start(loop); err != nil {
		t.Fatal(err)
	}
	stopLoop := func() {
		if err := os.WriteFile(filepath.Join(spool, "soft.stop"), nil, 0o644); err != nil {
			t.Error(err)
		}
	}
	// The loop ends with the test, whatever happens (its commands fail
	// fast with the server away: soft).
	t.Cleanup(stopLoop)
	// knfsd stops as the second round's claim (NFSv3) or renew-batch
	// (NFSv4.2) starts: the stop lands in it or in a command after it
	// (on a loaded machine the stop takes about as long as a command).
	inFlight := map[string]string{"3": "claim-2", "4.2": "renew-2"}[vers]
	waitLog("the second round's "+inFlight+" through the soft mount", func(b []byte) bool { return bytes.Contains(b, []byte("\nS "+inFlight+"\n")) })
	tStop := time.Now()
	if err := s.c.StopKnfsd(s.ctx); err != nil {
		t.Fatal(err)
	}
	mark := len(readLog())
	t.Logf("NFSv%s: knfsd stopped in %.1fs, from the start of %s", vers, time.Since(tStop).Seconds(), inFlight)
	t0 := time.Now()
	stopped := true
	defer func() {
		if stopped { // a failure below: knfsd back for the next cases
			if err := s.c.StartKnfsd(s.ctx); err != nil {
				t.Error(err)
			}
		}
	}()
	// On NFSv3 a command that held a record's lock when the server went
	// away waits in the kernel's unlock (NLM's calls are not soft: the
	// unlock is sent until the server answers; only SIGKILL ends the
	// wait): then the server comes back first.
	unlockWaits := func() string {
		out, _, err := s.c.Run(s.ctx, 0, `for f in $(grep -l do_unlk /proc/[0-9]*/task/*/stack 2>/dev/null); do p=${f#/proc/}; p=${p%%/*}; echo "$p $(tr '\0' ' ' < /proc/$p/cmdline)"; done`)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(out)
	}
	var hung string
	var away time.Duration
	polls := 0
	waitLog("8 commands after knfsd's stop, or one waiting in its unlock", func(b []byte) bool {
		if bytes.Count(b[mark:], []byte("\nR ")) >= 8 {
			return true
		}
		if polls++; polls%20 == 0 {
			hung = unlockWaits()
		}
		return hung != ""
	})
	if hung != "" {
		away = time.Since(t0)
		t.Logf("NFSv%s: waiting in the kernel's NLM unlock with the server away (%.1fs after the stop): %s", vers, away.Seconds(), hung)
		if err := s.c.StartKnfsd(s.ctx); err != nil {
			t.Fatal(err)
		}
		stopped = false
	}
	stopLoop()
	waitLog("the loop's end", func(b []byte) bool { return bytes.Contains(b[mark:], []byte("\nEND ")) })
	if stopped {
		away = time.Since(t0)
		if err := s.c.StartKnfsd(s.ctx); err != nil {
			t.Fatal(err)
		}
		stopped = false
	}
	log := readLog()
	// The table as it is on the export, through client 0's default (hard)
	// mount, before any fsck; then fsck, --repair, fsck; then a claim
	// through the soft mount again.
	out, code = s.sh(t, 0, fmt.Sprintf(`$LEASE status --json --root %[1]s > /tmp/status.json || { echo "STATUS FAILED $?"; exit 1; }
for f in %[1]s/public/*; do [ -e "$f" ] && echo "PUB $(basename "$f") $(cat "$f")"; done
r fsck $LEASE fsck --root %[1]s
r repair $LEASE fsck --repair --root %[1]s
r clean $LEASE fsck --root %[1]s
r again $LEASE claim --root %[2]s --ttl 600 %[3]s
cat /tmp/status.json`, root, via, strings.Repeat("d", 64)))
	if code != 0 {
		t.Fatalf("the table after knfsd's start: exit %d: %s", code, out)
	}
	type record struct {
		ID        string  `json:"id"`
		Status    string  `json:"status"`
		Token     int64   `json:"token"`
		ExpiresAt float64 `json:"expires_at"`
		Publish   string  `json:"publish"`
		Path      string  `json:"path"`
	}
	recs := map[string]record{}
	pub := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "{") {
			var r record
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("status line %q: %v", l, err)
			}
			recs[r.ID] = r
		}
		if v, ok := strings.CutPrefix(l, "PUB "); ok {
			name, content, _ := strings.Cut(v, " ")
			pub[name] = content
		}
	}
	rs := results(t, out)
	shards := map[string]bool{}
	for _, id := range pool {
		shards[filepath.Dir(recs[id].Path)] = true
	}
	if len(shards) < 2 {
		t.Errorf("the pool's %d leases are in %d shard(s); want several", len(pool), len(shards))
	}
	// Each command's line: exit 0 or 4; what it printed, on the export.
	renewed := map[string]float64{} // ID -> the latest T0 of an acknowledged renewal
	var during, failed, failedDuring int
	var lines []string
	var afterStop []bool // whether lines[i] was logged after knfsd's stop
	for i, part := range []string{string(log[:mark]), string(log[mark:])} {
		for _, l := range strings.Split(part, "\n") {
			lines = append(lines, l)
			afterStop = append(afterStop, i == 1)
		}
	}
	for i, l := range lines {
		f := strings.SplitN(l, " ", 4)
		if len(f) < 4 || f[0] != "R" {
			continue
		}
		tag, t0s, _ := strings.Cut(f[1], "@")
		start, err1 := strconv.ParseFloat(t0s, 64)
		code, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			t.Fatalf("log line %q", l)
		}
		stdout, _, _ := strings.Cut(f[3], " | ")
		fields := strings.Fields(stdout)
		after := afterStop[i]
		if after {
			during++
		}
		if code != 0 {
			failed++
			if after {
				failedDuring++
			}
			if code != 4 {
				t.Errorf("%s: exit %d; want 0 or 4 (an I/O error): %s", tag, code, l)
			}
		}
		kind, k, _ := strings.Cut(tag, "-")
		switch kind {
		case "claim", "pclaim":
			if code != 0 {
				continue
			}
			if len(fields) != 2 {
				t.Errorf("%s: succeeded printing %q; want one ID TOKEN line", tag, stdout)
				continue
			}
			r, ok := recs[fields[0]]
			tok, _ := strconv.ParseInt(fields[1], 10, 64)
			want := "leased"
			if kind == "pclaim" && r.Status != "leased" {
				want = "committing or done" // its publish's doing
			}
			switch {
			case !ok:
				t.Errorf("%s: granted %s, no record on the export", tag, stdout)
			case r.Token != tok || (want == "leased" && r.Status != "leased") || (r.Status != "leased" && r.Status != "committing" && r.Status != "done"):
				t.Errorf("%s: granted %s; on the export: %s token %d; want %s, token %d", tag, stdout, r.Status, r.Token, want, tok)
			case r.Status == "leased" && r.ExpiresAt < start+600:
				t.Errorf("%s: granted %s at %.6f with --ttl 600; on the export it expires at %.6f", tag, stdout, start, r.ExpiresAt)
			}
		case "renew":
			if code == 0 && len(fields) != 2*len(pool) {
				t.Errorf("%s: exit 0 printing %d lines; want the pool's %d", tag, len(fields)/2, len(pool))
			}
			for i := 0; i+1 < len(fields); i += 2 {
				renewed[fields[i]] = max(renewed[fields[i]], start)
			}
		case "publish":
			if code != 0 {
				continue
			}
			id := strings.Fields(stdout)
			r := recs[id[0]]
			name := "res-" + k
			if r.Status != "done" || r.Publish != name || strconv.FormatInt(r.Token, 10) != id[1] {
				t.Errorf("%s: completed %s publishing %s; on the export: %+v", tag, stdout, name, r)
			}
			if want := id[0] + " " + k; pub[name] != want {
				t.Errorf("%s: public/%s holds %q; want %q", tag, name, pub[name], want)
			}
		case "add":
			for _, id := range fields {
				if _, ok := recs[id]; !ok {
					t.Errorf("%s: added %s; not queued on the export", tag, id)
				}
			}
		}
	}
	for id, start := range renewed {
		r := recs[id]
		if r.Status != "leased" || r.ExpiresAt < start+900 {
			t.Errorf("renewed %s at %.6f with --ttl 900; on the export: %s, expires at %.6f", id, start, r.Status, r.ExpiresAt)
		}
	}
	if failedDuring == 0 && hung == "" {
		t.Errorf("no command failed while knfsd was away (%d ran): the soft mount proved nothing; the log: %s", during, log)
	}
	t.Logf("NFSv%s %s: knfsd away %.1fs; %d commands returned after its stop, %d of them failed (exit 4), %d failed in all; fsck %s; --repair %s",
		vers, softOpts, away.Seconds(), during, failedDuring, failed, rs["fsck"], rs["repair"])
	if r := rs["repair"]; r.code > 1 {
		t.Errorf("fsck --repair: %s; want 0 or 1", r)
	}
	if r := rs["clean"]; r.code != 0 {
		t.Errorf("fsck after --repair: %s; want 0", r)
	}
	if r := rs["again"]; r.code != 0 {
		t.Errorf("a claim through the soft mount with knfsd back: %s", r)
	}
	if t.Failed() {
		t.Logf("the log: %s\nafter: %s", log, out)
	} else {
		t.Logf("NFSv%s: the commands that returned after knfsd's stop:\n%s", vers, log[mark:])
	}
}
