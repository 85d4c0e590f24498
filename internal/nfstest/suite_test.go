//go:build linux

package nfstest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/uml"
	"github.com/leasetool/lease/internal/workcheck"
)

// TestNFSMultiClient is the multi-client suite of internal/multiclient
// (GlusterFS, CephFS) on NFS, on NFSv3 and on NFSv4.2 side by side: for
// each version a server kernel and two client kernels (Up), real lease
// processes in both clients working on one table. Each version's cluster
// boots once; its subtests run one after another on tables of their own.
//
// LEASE_NFS_VERS (3 or 4.2) runs one version only; LEASE_NFS_OPTS adds
// mount options to the clients (e.g. nolock, local_lock=all: the tests of
// one table through two clients must then fail, which is how they were
// seen to fail).
func TestNFSMultiClient(t *testing.T) {
	eachVersion(t, func(t *testing.T, vers, bin string) {
		t0 := time.Now()
		s := &suite{ctx: Context(t), c: UpT(t, Options{Vers: vers, MountOpts: os.Getenv("LEASE_NFS_OPTS")}), lease: bin}
		t.Logf("NFSv%s: server and 2 clients up in %.1fs", vers, time.Since(t0).Seconds())
		for _, sub := range []struct {
			name string
			f    func(*testing.T)
		}{
			{"qualify", s.qualify},
			{"race", s.race},
			{"held", s.held},
			{"publish", s.publish},
			{"campaign", s.campaign},
		} {
			t1 := time.Now()
			t.Run(sub.name, sub.f)
			t.Logf("NFSv%s %s: %.1fs", vers, sub.name, time.Since(t1).Seconds())
		}
	})
}

// eachVersion runs f(t, vers, lease) as a parallel subtest vVERS of t for
// each NFS version, 3 and 4.2 (LEASE_NFS_VERS=3 or 4.2: that one only),
// lease being the lease binary the guests run (uml.BuildLease). It skips t
// as Need does when no cluster can be brought up here.
func eachVersion(t *testing.T, f func(t *testing.T, vers, lease string)) {
	t.Helper()
	Need(t)
	bin, err := uml.BuildLease()
	if err != nil {
		t.Fatal(err)
	}
	only := os.Getenv("LEASE_NFS_VERS")
	if only != "" && only != "3" && only != "4.2" {
		t.Fatalf("LEASE_NFS_VERS=%q: 3 or 4.2", only)
	}
	for _, vers := range []string{"3", "4.2"} {
		if only != "" && only != vers {
			continue
		}
		t.Run("v"+vers, func(t *testing.T) {
			t.Parallel()
			f(t, vers, bin)
		})
	}
}

type suite struct {
	ctx   context.Context // ends before go test's -timeout: Context
	c     *Cluster
	lease string // the lease binary, which the guests read through their hostfs root
	seq   int
}

// table makes a fresh table through client 0 with 16 work shards and
// returns its path in the clients. On a mount with options of
// LEASE_NFS_OPTS it forces the init (the guard refuses nolock and
// local_lock mounts): the tests then see what lease does there.
func (s *suite) table(t *testing.T) string {
	t.Helper()
	s.seq++
	root := fmt.Sprintf("%s/t%d", Mnt, s.seq)
	force := ""
	if s.c.Opts.MountOpts != "" {
		force = " --force"
	}
	if out, code := s.sh(t, 0, `$LEASE init --root `+root+` --shards 16`+force); code != 0 {
		t.Fatalf("init through client 0: exit %d: %s", code, out)
	}
	return root
}

// preamble starts every script: lease as $LEASE, a configuration of its
// own (nothing of the host's), and r TAG CMD..., which runs CMD and prints
// "R TAG EXIT STDOUT | STDERR" on one line.
func (s *suite) preamble() string {
	return `export LEASE=` + s.lease + ` XDG_CONFIG_HOME=/tmp/xdg HOME=/tmp
r() { tag=$1; shift; o=$("$@" 2>/tmp/r.err); c=$?; printf 'R %s %d %s | %s\n' "$tag" "$c" "$(echo $o)" "$(tr '\n' ' ' < /tmp/r.err)"; }
`
}

// sh runs script in client i and returns its output and exit status; a
// kernel that is gone or a script still running after 6 minutes fails t.
func (s *suite) sh(t *testing.T, i int, script string) (string, int) {
	t.Helper()
	return s.shWithin(t, i, 6*time.Minute, script)
}

// shWithin is sh with a bound of its own.
func (s *suite) shWithin(t *testing.T, i int, bound time.Duration, script string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, bound)
	defer cancel()
	out, code, err := s.c.Run(ctx, i, s.preamble()+script)
	if err != nil {
		b, _ := s.c.Clients[i].Console()
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Fatalf("client %d: %v; console: %s", i, err, b)
	}
	return out, code
}

// both runs script[i] in client i, the two at once, and returns their
// outputs.
func (s *suite) both(t *testing.T, scripts [2]string) [2]string {
	t.Helper()
	var outs [2]string
	var codes [2]int
	var wg sync.WaitGroup
	var mu sync.Mutex
	var fatal []string
	for i := range scripts {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(s.ctx, 20*time.Minute)
			defer cancel()
			out, code, err := s.c.Run(ctx, i, s.preamble()+scripts[i])
			if err != nil {
				mu.Lock()
				fatal = append(fatal, fmt.Sprintf("client %d: %v", i, err))
				mu.Unlock()
			}
			outs[i], codes[i] = out, code
		}(i)
	}
	wg.Wait()
	if len(fatal) > 0 {
		t.Fatal(strings.Join(fatal, "; "))
	}
	for i, c := range codes {
		if c != 0 {
			t.Fatalf("client %d: script exit %d: %s", i, c, outs[i])
		}
	}
	return outs
}

// res is one line r printed.
type res struct {
	code      int
	out, errs string
}

func (r res) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.out, r.errs)
}

// results parses the lines r printed, by tag.
func results(t *testing.T, out string) map[string]res {
	t.Helper()
	m := map[string]res{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.SplitN(l, " ", 4)
		if len(f) < 4 || f[0] != "R" {
			continue
		}
		code, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("line %q", l)
		}
		o, e, _ := strings.Cut(f[3], " | ")
		m[f[1]] = res{code, strings.TrimSpace(o), strings.TrimSpace(e)}
	}
	return m
}

// ids returns n IDs.
func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		h := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", prefix, i)))
		out[i] = hex.EncodeToString(h[:])
	}
	return out
}

// heredoc is lines as the stdin of a command: <<'EOF' ... EOF.
func heredoc(lines []string) string {
	return "<<'EOF'\n" + strings.Join(lines, "\n") + "\nEOF\n"
}

// qualify: lease qualify through each client verifies the mount.
func (s *suite) qualify(t *testing.T) {
	for i := 0; i < 2; i++ {
		out, code := s.sh(t, i, fmt.Sprintf(`$LEASE qualify --json --root %s/qualify-%d`, Mnt, i))
		var p struct {
			Verified bool   `json:"verified"`
			Error    string `json:"error"`
		}
		// The proof is the output's last line (stderr is mixed in).
		lines := strings.Split(strings.TrimSpace(out), "\n")
		err := json.Unmarshal([]byte(lines[len(lines)-1]), &p)
		if code != 0 || err != nil || !p.Verified {
			t.Errorf("qualify through client %d: exit %d, verified %v (%v): %s", i, code, p.Verified, err, out)
		}
	}
}

// race: a queue of 32 items; in each of 3 rounds (the previous round's
// leases expired) 8 processes, 4 in each client, claim --next one item
// at a time until the queue answers busy. Every item is granted exactly
// once a round, with the token one more than the round before (tokens
// never repeat), and the holders of one client verify through the other.
func (s *suite) race(t *testing.T) {
	const n, rounds = 32, 3
	root := s.table(t)
	all := ids(t.Name(), n)
	if out, code := s.sh(t, 0, `$LEASE add --root `+root+` `+heredoc(all)); code != 0 {
		t.Fatalf("add: exit %d: %s", code, out)
	}
	last := map[string]int64{}
	doubles := 0
	for round := 1; round <= rounds; round++ {
		now := 1000 * round
		var scripts [2]string
		for c := 0; c < 2; c++ {
			// Both clients start together: each waits for the other's mark.
			scripts[c] = fmt.Sprintf(`touch %[1]s/go-%[2]d-%[3]d; i=0; while [ ! -e %[1]s/go-%[2]d-%[4]d ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
for p in 1 2 3 4; do (
  while o=$($LEASE claim --next 1 --root %[1]s --now %[2]d --ttl 10 --lock-timeout 60 --owner c%[3]d-p$p 2>/tmp/e$p); do echo "G $o"; done
  echo "X $(grep -v 'warning:' /tmp/e$p | head -c 300 | tr '\n' ' ')"
) > /tmp/race$p & done; wait; cat /tmp/race1 /tmp/race2 /tmp/race3 /tmp/race4
`, root, now, c, 1-c)
		}
		outs := s.both(t, scripts)
		granted := map[string][]int64{}
		var held [2][]string
		for c, out := range outs {
			for _, l := range strings.Split(out, "\n") {
				f := strings.Fields(l)
				switch {
				case len(f) == 3 && f[0] == "G":
					tok, err := strconv.ParseInt(f[2], 10, 64)
					if err != nil {
						t.Fatalf("client %d printed %q", c, l)
					}
					granted[f[1]] = append(granted[f[1]], tok)
					held[c] = append(held[c], f[1]+" "+f[2])
				case len(f) > 0 && f[0] == "X":
					if !strings.Contains(l, "busy") && !strings.Contains(l, "empty") {
						t.Errorf("round %d client %d: a claim ended %q, want busy", round, c, l)
					}
				case len(f) > 0 && f[0] == "G":
					t.Fatalf("client %d printed %q", c, l)
				}
			}
		}
		for _, id := range all {
			toks := granted[id]
			if len(toks) != 1 {
				doubles += max(len(toks)-1, 0)
				t.Errorf("round %d: %s granted %d times (tokens %v), want once", round, id[:12], len(toks), toks)
			}
			for _, tok := range toks {
				if tok != last[id]+1 {
					t.Errorf("round %d: %s granted token %d after token %d, want %d", round, id[:12], tok, last[id], last[id]+1)
				}
				last[id] = max(last[id], tok)
			}
		}
		// Each client's holders verify through the other client.
		for c := 0; c < 2; c++ {
			if len(held[c]) == 0 {
				continue
			}
			out, code := s.sh(t, 1-c, fmt.Sprintf(`$LEASE verify --root %s --now %d `, root, now+1)+heredoc(held[c]))
			if code != 0 || strings.Count(out, "\n") != len(held[c]) {
				t.Errorf("round %d: verify of client %d's %d holders through client %d: exit %d: %s", round, c, len(held[c]), 1-c, code, out)
			}
		}
		t.Logf("round %d: %d grants through client 0, %d through client 1", round, len(held[0]), len(held[1]))
		if t.Failed() {
			break
		}
	}
	t.Logf("%d rounds of 8 claim --next processes (4 per client) over %d items: %d double grants", rounds, n, doubles)
}

// held: a claim through one client is refused as held through the other
// at once, in both directions, for IDs the other client has and has not
// looked at before; a release through one frees the ID for a claim through
// the other at once, with token 2.
func (s *suite) held(t *testing.T) {
	root := s.table(t)
	all := ids(t.Name(), 4)
	// Client c is the first of the IDs of index i%2 == c.
	step := func(c int, f func(i int, id string) string) map[string]res {
		var b strings.Builder
		for i, id := range all {
			if cmd := f(i, id); cmd != "" {
				fmt.Fprintf(&b, "r %d %s\n", i, cmd)
			}
		}
		if b.Len() == 0 {
			return nil
		}
		out, code := s.sh(t, c, b.String())
		if code != 0 {
			t.Fatalf("client %d: exit %d: %s", c, code, out)
		}
		return results(t, out)
	}
	first := func(c int) func(i int) bool { return func(i int) bool { return i%2 == c } }
	for c := 0; c < 2; c++ {
		// The other client looks first at every third ID: its caches hold
		// the missing record, if it caches anything.
		for k, r := range step(1-c, func(i int, id string) string {
			if !first(c)(i) || i%3 != 0 {
				return ""
			}
			return fmt.Sprintf("sh -c 'echo %s 1 | $LEASE verify --root %s --now 1000'", id, root)
		}) {
			if r.code != 1 {
				t.Fatalf("verify of %s before the claim: %s", k, r)
			}
		}
	}
	for c := 0; c < 2; c++ {
		for k, r := range step(c, func(i int, id string) string {
			if !first(c)(i) {
				return ""
			}
			return fmt.Sprintf("$LEASE claim --root %s --now 1000 --ttl 60 %s", root, id)
		}) {
			i, _ := strconv.Atoi(k)
			if r.code != 0 || r.out != all[i]+" 1" {
				t.Fatalf("claim of %s through client %d: %s", k, c, r)
			}
		}
	}
	for c := 0; c < 2; c++ {
		for k, r := range step(1-c, func(i int, id string) string {
			if !first(c)(i) {
				return ""
			}
			return fmt.Sprintf("$LEASE claim --root %s --now 1001 --ttl 60 %s", root, id)
		}) {
			i, _ := strconv.Atoi(k)
			if r.code != 1 || r.out != "" || !strings.HasPrefix(r.errs, "held "+all[i]+" 1 ") {
				t.Errorf("claim of %s through client %d, held through client %d: %s; want held by token 1", k, 1-c, c, r)
			}
		}
	}
	for c := 0; c < 2; c++ {
		for k, r := range step(c, func(i int, id string) string {
			if !first(c)(i) {
				return ""
			}
			return fmt.Sprintf("sh -c 'echo %s 1 | $LEASE release --root %s --now 1002'", id, root)
		}) {
			if r.code != 0 {
				t.Fatalf("release of %s through client %d: %s", k, c, r)
			}
		}
	}
	for c := 0; c < 2; c++ {
		for k, r := range step(1-c, func(i int, id string) string {
			if !first(c)(i) {
				return ""
			}
			return fmt.Sprintf("$LEASE claim --root %s --now 1003 --ttl 60 %s", root, id)
		}) {
			i, _ := strconv.Atoi(k)
			if r.code != 0 || r.out != all[i]+" 2" {
				t.Errorf("claim of %s through client %d right after the release through client %d: %s; want token 2", k, 1-c, c, r)
			}
		}
	}
}

// publish: a holder stages a result and completes with --publish through
// one client; through the other the bytes are in public/, the staged name
// is gone, a claim is refused as done and the token no longer verifies.
// A holder whose lease expired and was taken through the other client
// (token 2) cannot publish with token 1: refused, nothing in public/;
// the new holder publishes.
func (s *suite) publish(t *testing.T) {
	root := s.table(t)
	all := ids(t.Name(), 4)
	for i, id := range all[:2] {
		a, b := i%2, 1-i%2
		name := fmt.Sprintf("result-%d.bin", i)
		data := fmt.Sprintf("findings of %s through client %d", id, a)
		out, code := s.sh(t, a, fmt.Sprintf(`r claim $LEASE claim --root %[1]s --now 1000 --ttl 600 %[2]s
mkdir -m 0700 %[1]s/stage/%[2]s.1 && printf '%%s' '%[3]s' > %[1]s/stage/%[2]s.1/%[4]s
r complete sh -c 'echo %[2]s 1 | $LEASE complete --root %[1]s --now 1010 --publish %[4]s'
`, root, id, data, name))
		rs := results(t, out)
		if code != 0 || rs["claim"].code != 0 || rs["complete"].code != 0 {
			t.Fatalf("claim, stage and complete --publish through client %d: exit %d: %s", a, code, out)
		}
		out, code = s.sh(t, b, fmt.Sprintf(`r public cat %[1]s/public/%[4]s
r staged ls %[1]s/stage/%[2]s.1/%[4]s
r claim $LEASE claim --root %[1]s --now 5000 %[2]s
r verify sh -c 'echo %[2]s 1 | $LEASE verify --root %[1]s --now 1011'
r status $LEASE status --json --root %[1]s %[2]s
`, root, id, data, name))
		rs = results(t, out)
		if r := rs["public"]; r.code != 0 || r.out != data {
			t.Errorf("public/%s through client %d: %s; want %q", name, b, r, data)
		}
		if r := rs["staged"]; r.code == 0 {
			t.Errorf("the staged name is still there through client %d: %s", b, r)
		}
		if r := rs["claim"]; r.code != 1 || !strings.HasPrefix(r.errs, "done ") {
			t.Errorf("claim of the done ID through client %d: %s", b, r)
		}
		if r := rs["verify"]; r.code != 1 || !strings.HasPrefix(r.errs, "done ") {
			t.Errorf("verify of the completed lease through client %d: %s", b, r)
		}
		if r := rs["status"]; !strings.Contains(r.out, `"status":"done"`) || !strings.Contains(r.out, `"token":1`) {
			t.Errorf("status through client %d: %s; want done, token 1", b, r)
		}
	}
	// The stale holder.
	id, name := all[2], "stale.bin"
	out, _ := s.sh(t, 0, fmt.Sprintf(`r claim $LEASE claim --root %[1]s --now 1000 --ttl 10 %[2]s
mkdir -m 0700 %[1]s/stage/%[2]s.1 && echo stale > %[1]s/stage/%[2]s.1/%[3]s
`, root, id, name))
	if r := results(t, out)["claim"]; r.code != 0 {
		t.Fatalf("claim through client 0: %s", r)
	}
	out, _ = s.sh(t, 1, fmt.Sprintf(`r claim $LEASE claim --root %[1]s --now 2000 --ttl 600 %[2]s`, root, id))
	if r := results(t, out)["claim"]; r.code != 0 || r.out != id+" 2" {
		t.Fatalf("claim of the expired lease through client 1: %s; want token 2", r)
	}
	out, _ = s.sh(t, 0, fmt.Sprintf(`r complete sh -c 'echo %[2]s 1 | $LEASE complete --root %[1]s --now 2001 --publish %[3]s'`, root, id, name))
	if r := results(t, out)["complete"]; r.code != 1 || !strings.Contains(r.errs, "stale") {
		t.Errorf("complete --publish with the stale token 1 through client 0: %s; want exit 1, stale", r)
	}
	// Through client 1, which then publishes. (Not through client 0: its
	// lookup of the missing name would stay cached after the publish: a
	// negative dentry, trusted until the directory's attributes are
	// revalidated, up to acdirmax = 60 s; seen on NFSv4.2, where client 0
	// found no public/stale.bin right after client 1 published it.)
	out, _ = s.sh(t, 1, fmt.Sprintf(`r public ls %[1]s/public/%[3]s
mkdir -m 0700 %[1]s/stage/%[2]s.2 && echo fresh > %[1]s/stage/%[2]s.2/%[3]s
r complete sh -c 'echo %[2]s 2 | $LEASE complete --root %[1]s --now 2002 --publish %[3]s'`, root, id, name))
	rs := results(t, out)
	if r := rs["public"]; r.code == 0 {
		t.Errorf("the stale holder's result is in public/: %s", r)
	}
	if r := rs["complete"]; r.code != 0 {
		t.Errorf("complete --publish of the holder of token 2 through client 1: %s", r)
	}
	out, _ = s.sh(t, 0, fmt.Sprintf(`r public cat %s/public/%s`, root, name))
	if r := results(t, out)["public"]; r.code != 0 || r.out != "fresh" {
		t.Errorf("public/%s through client 0: %s; want the holder of token 2's", name, r)
	}
}

// campaign: a queue of 160 items (lease add through client 0) worked by
// 8 lease work processes, 4 in each client, with the real clock and a 60 s
// TTL (a 4 s one expired under a load of 40: the guests renewed late and
// 326 of 160 items ran again, each fenced, every item done once), each CMD
// a line in its worker's log. When a third of the items are
// done the whole process group of one worker in each client is killed
// with SIGKILL; lease fsck through client 1 on the live table (6 workers
// running) finds at most what the killed ones left; the others finish the
// queue. Every item is done, once: its record is done with the token of
// the one run that completed it, and an item run more than once is one a
// killed worker held (at most one each). Then fsck (--repair of the
// debris) is clean.
func (s *suite) campaign(t *testing.T) {
	const n = 160
	root := s.table(t)
	all := ids(t.Name(), n)
	if out, code := s.sh(t, 0, `$LEASE add --root `+root+` `+heredoc(all)); code != 0 {
		t.Fatalf("add: exit %d: %s", code, out)
	}
	for c := 0; c < 2; c++ {
		// Worker wC-P of client C: a session and process group of its own
		// (setsid), whose number is in wC-P.pgid; its exit status in
		// wC-P.rc when it ends.
		script := fmt.Sprintf(`mkdir -p /tmp/camp; cd /tmp/camp
for p in 0 1 2 3; do w=w%[1]d-$p
  ( W=$w LEASE_OWNER=$w@client%[1]d setsid sh -c 'echo $$ > $W.pgid; exec "$LEASE" work --root %[2]s --ttl 60 -- sh -c "echo \"\$LEASE_ID \$LEASE_TOKEN $W\" >> /tmp/camp/$W.log"'
    echo $? > $w.rc.tmp; mv $w.rc.tmp $w.rc ) > $w.err 2>&1 &
done; wait`, c, root)
		if err := s.c.Clients[c].Start(s.preamble() + script); err != nil {
			t.Fatal(err)
		}
	}
	count := func() (runs int) {
		for c := 0; c < 2; c++ {
			out, _ := s.sh(t, c, `cat /tmp/camp/*.log 2>/dev/null | wc -l`)
			k, _ := strconv.Atoi(strings.TrimSpace(out))
			runs += k
		}
		return runs
	}
	deadline := time.Now().Add(20 * time.Minute)
	for count() < n/3 {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d runs in 20 minutes", n/3)
		}
		time.Sleep(time.Second) // not a busy loop of commands in the guests at work
	}
	killed := map[string]bool{"w0-0": true, "w1-0": true}
	for c := 0; c < 2; c++ {
		if out, code := s.sh(t, c, fmt.Sprintf(`kill -9 -$(cat /tmp/camp/w%d-0.pgid)`, c)); code != 0 {
			t.Errorf("kill worker w%d-0: exit %d: %s", c, code, out)
		}
	}
	// The live table: 6 workers still at work.
	live, code := s.sh(t, 1, fmt.Sprintf(`$LEASE fsck --root %s`, root))
	// Besides the killed workers' debris, each of the 6 live workers may
	// be in the middle of a write or a complete.
	liveDebris := workcheck.FsckDebris(t, "live", live, code, len(killed)+6)
	// The others finish the queue.
	for c := 0; c < 2; c++ {
		// Under a load of 40 on 2 cores the guests ran about 10 items a
		// minute: the bound is generous.
		out, code := s.shWithin(t, c, 35*time.Minute, `cd /tmp/camp; end=$(($(date +%s) + 1800)); while [ $(date +%s) -lt $end ]; do n=0; for f in *.rc; do [ -e "$f" ] && n=$((n+1)); done; [ $n = 4 ] && break; sleep 0.5; done
for f in *.rc; do echo "RC ${f%.rc} $(cat $f)"; done; for f in *.err; do if [ -s $f ]; then echo "ERR $f"; head -c 500 $f; fi; done`)
		if code != 0 {
			t.Fatalf("client %d: %s", c, out)
		}
		rcs := 0
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) == 3 && f[0] == "RC" {
				rcs++
				if !killed[f[1]] && f[2] != "0" {
					t.Errorf("worker %s: exit %s: %s", f[1], f[2], out)
				}
			}
		}
		if rcs != 4 {
			t.Fatalf("client %d: %d of 4 workers ended in 30 minutes: %s", c, rcs, out)
		}
	}
	var runs []workcheck.Run
	for c := 0; c < 2; c++ {
		out, _ := s.sh(t, c, `cat /tmp/camp/*.log`)
		runs = append(runs, workcheck.ParseRuns(out)...)
	}
	out, code := s.sh(t, 1, `$LEASE status --json --root `+root+` - `+heredoc(all))
	if code != 0 {
		t.Fatalf("status through client 1: exit %d: %s", code, out)
	}
	recs := map[string]workcheck.Record{}
	for _, l := range strings.Split(out, "\n") {
		var st struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Token  int64  `json:"token"`
		}
		if json.Unmarshal([]byte(l), &st) == nil && st.ID != "" {
			recs[st.ID] = workcheck.Record{Status: st.Status, Token: st.Token}
		}
	}
	again := workcheck.Check(t, all, recs, runs, killed)
	out, code = s.sh(t, 1, fmt.Sprintf(`$LEASE fsck --root %s`, root))
	debris := workcheck.FsckDebris(t, "after", out, code, len(killed))
	if code == 4 {
		if out, code := s.sh(t, 1, fmt.Sprintf(`$LEASE fsck --repair --root %s`, root)); code != 1 {
			t.Errorf("fsck --repair through client 1: exit %d: %s", code, out)
		}
	}
	if out, code := s.sh(t, 0, fmt.Sprintf(`$LEASE fsck --root %s`, root)); code != 0 {
		t.Errorf("fsck through client 0 after the repair: exit %d: %s", code, out)
	}
	counts := workcheck.PerWorker(runs)
	t.Logf("%d items by 8 workers in 2 clients, 2 worker groups killed; %d runs, %d items run again; fsck live: %d items with debris, after: %d; runs per worker %v",
		n, len(runs), again, liveDebris, debris, counts)
}
