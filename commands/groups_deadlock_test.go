package commands_test

// Group claims under contention: processes claiming random overlapping
// groups never deadlock and never grant a target to two live groups. The
// grp* helpers are in groups_test.go.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/leasefmt"
)

// grpGrant is one granted group lease and the interval it was held.
type grpGrant struct {
	gid        leasefmt.ID
	token      int64
	targets    []leasefmt.ID
	start, end float64
}

// TestGroupClaimsNeverDeadlock: 8 processes claim random overlapping
// groups of 2-4 of 12 targets, in random input order, for about 3 seconds,
// and renew some of their grants. No process hangs and no lock wait runs
// out (2 s, far more than any critical section); no target is ever in two live groups: the intervals [now,
// expires) of grants of a target never overlap, its tokens increase with
// time, and at the end every manifest agrees with its targets.
func TestGroupClaimsNeverDeadlock(t *testing.T) {
	t.Parallel() // processes only: no in-process lease, no environment, no knob
	if testing.Short() {
		t.Skip("runs real processes for several seconds")
	}
	dir := t.TempDir()
	bin := procBin // TestMain's build
	root := filepath.Join(dir, "table")
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o777)
	// One machine, one clock: no clock_skew margin, or a 0.2 s lease would
	// be lost before it is granted.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home, "LEASE_CLOCK_SKEW=0"}
	if out, err := exec.Command(bin, "init", "--root", root).CombinedOutput(); err != nil {
		t.Fatalf("init: %v %s", err, out)
	}
	pool := grpTargets("pool", 12)
	const ttl = 0.2
	ttlS := "0.2"
	// Every critical section is a few file writes; a lock wait that runs
	// out is a cycle in the lock order (or a process waiting for a byte it
	// holds itself), so no wait may run out (exit 5).
	lockTimeout := "2"
	endOf := func(now float64) float64 {
		v, _ := strconv.ParseFloat(string(leasefmt.AppendTime(nil, now+ttl)), 64)
		return v // expires_at as written: microsecond precision
	}
	run := func(stdin string, args ...string) (int, string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env, cmd.Dir = env, dir
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if ctx.Err() != nil {
			return -1, out.String(), errb.String(), fmt.Errorf("lease %s did not finish within 30s: %v", args[0], ctx.Err())
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			return -1, "", "", err
		}
		return code, out.String(), errb.String(), nil
	}
	var (
		mu     sync.Mutex
		grants []*grpGrant
		codes  = map[string]int{}
		wg     sync.WaitGroup
	)
	// The race goes on until enough has happened to test anything (about
	// 3 s on a quiet machine); the deadline only bounds a machine too
	// slow to get there.
	deadline := time.Now().Add(2 * time.Minute)
	enough := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(grants) >= 30 && codes["claim exit 1"] >= 3
	}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			owner := fmt.Sprintf("w%d", w)
			for time.Now().Before(deadline) && !enough() {
				k := 2 + rng.IntN(3)
				var targets []leasefmt.ID
				for _, i := range rng.Perm(len(pool))[:k] {
					targets = append(targets, pool[i])
				}
				nowS := strconv.FormatFloat(float64(time.Now().UnixMicro())/1e6, 'f', 6, 64)
				now, _ := strconv.ParseFloat(nowS, 64)
				args := append([]string{"group-claim", "--root", root, "--owner", owner, "--ttl", ttlS, "--now", nowS, "--lock-timeout", lockTimeout}, grpStrings(targets)...)
				code, out, errOut, err := run("", args...)
				mu.Lock()
				codes[fmt.Sprintf("claim exit %d", code)]++
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
				switch code {
				case 1:
					continue
				case 0:
				default:
					t.Errorf("group-claim: exit %d\n%s", code, errOut)
					continue
				}
				gid := groups.ID(targets)
				f := strings.Fields(out)
				tok, perr := int64(0), error(nil)
				if len(f) == 2 {
					tok, perr = strconv.ParseInt(f[1], 10, 64)
				}
				if len(f) != 2 || out != f[0]+" "+f[1]+"\n" || f[0] != string(gid) || perr != nil || tok < 1 {
					t.Errorf("group-claim printed %q, want `%s TOKEN`", out, gid)
					continue
				}
				g := &grpGrant{gid: gid, token: tok, targets: targets, start: now, end: endOf(now)}
				mu.Lock()
				grants = append(grants, g)
				mu.Unlock()
				// Renew some grants once, right away or after a while.
				if rng.IntN(2) == 0 {
					time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
					nowS := strconv.FormatFloat(float64(time.Now().UnixMicro())/1e6, 'f', 6, 64)
					now2, _ := strconv.ParseFloat(nowS, 64)
					code, out2, errOut, err := run(out, "group-renew", "--root", root, "--ttl", ttlS, "--now", nowS, "--lock-timeout", lockTimeout)
					mu.Lock()
					codes[fmt.Sprintf("renew exit %d", code)]++
					if err == nil && code == 0 {
						if out2 != out {
							t.Errorf("group-renew printed %q for %q", out2, out)
						}
						g.end = endOf(now2)
					}
					mu.Unlock()
					if err != nil {
						t.Error(err)
						return
					}
					if code != 0 && code != 1 {
						t.Errorf("group-renew: exit %d\n%s", code, errOut)
					}
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d grants; %v", len(grants), codes)
	if len(grants) < 10 || codes["claim exit 1"] == 0 {
		t.Fatalf("too little happened to test anything: %d grants, %v", len(grants), codes)
	}
	// No target in two live groups: per target, grants in start order have
	// disjoint intervals and increasing tokens.
	byTarget := map[leasefmt.ID][]*grpGrant{}
	for _, g := range grants {
		for _, id := range g.targets {
			byTarget[id] = append(byTarget[id], g)
		}
	}
	for id, gs := range byTarget {
		sort.Slice(gs, func(i, j int) bool { return gs[i].start < gs[j].start })
		for i := 1; i < len(gs); i++ {
			p, q := gs[i-1], gs[i]
			if q.start < p.end {
				t.Errorf("target %s: group %s token %d held [%.6f, %.6f) overlaps group %s token %d held [%.6f, %.6f)",
					id.Short(), p.gid.Short(), p.token, p.start, p.end, q.gid.Short(), q.token, q.start, q.end)
			}
			if q.token <= p.token {
				t.Errorf("target %s: group %s got token %d at %.6f, not more than token %d granted at %.6f",
					id.Short(), q.gid.Short(), q.token, q.start, p.token, p.start)
			}
		}
	}
	// Final scan: every manifest agrees with its targets, every target
	// with the manifest it names, and every granted token is at most the
	// group's current one.
	st, err := commit.Open(root, commit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	targets := map[leasefmt.ID]*leasefmt.Record{}
	for _, id := range pool {
		r, err := st.Read(context.Background(), leasefmt.Target, id)
		if err != nil {
			t.Fatalf("target %s: %v", id.Short(), err)
		}
		if r != nil {
			targets[id] = r
		}
	}
	manifests := map[leasefmt.ID]*leasefmt.Record{}
	for _, g := range grants {
		if manifests[g.gid] == nil {
			m, err := st.Read(context.Background(), leasefmt.Group, g.gid)
			if err != nil || m == nil {
				t.Fatalf("manifest %s: %v", g.gid.Short(), err)
			}
			manifests[g.gid] = m
		}
		if m := manifests[g.gid]; m.Token < g.token {
			t.Errorf("group %s: token %d on disk, but %d was granted", g.gid.Short(), m.Token, g.token)
		}
	}
	for _, m := range manifests {
		if d := groups.Check(m, targets); len(d) > 0 {
			t.Errorf("group %s: %q", m.ID.Short(), d)
		}
	}
	for _, r := range targets {
		if d := groups.CheckTarget(r, manifests[r.Group]); len(d) > 0 {
			t.Errorf("target %s: %q", r.ID.Short(), d)
		}
	}
}
