package multiclient

import (
	"strconv"
	"strings"
	"testing"
)

// TestStaleReadsOnDefaults, on the volume with GlusterFS's default options,
// the sequence that made lease start an ID over at token 1: A claims
// (token 1), B looks (held), the lease expires, A claims again (token 2),
// B claims at once, then A claims again. B's claim is served from B's
// client caches and may grant token 2 a second time: the filesystem is
// unsafe there, lease qualify says so, and the count is logged. What lease
// must hold whatever the caches do: A's last claim, whose record was
// replaced through B behind A's lazily opened file (read(2) fails with
// ENOENT after a successful open), is never taken as a missing record: it
// succeeds with a token larger than every token granted before, after
// retries, and the record on disk is the one it wrote.
func TestStaleReadsOnDefaults(t *testing.T) {
	each(t, []mounts{glusterDefault()}, func(t *testing.T, m mounts) {
		a, b := table(t, m)
		doubles := 0
		for _, id := range ids(t.Name(), 6) {
			claim := func(root string, now int) (int64, result) {
				r := lease(t, "", "claim", "-v", "--root", root, "--now", strconv.Itoa(now), "--ttl", "10", id)
				if r.code == 0 {
					tok, err := strconv.ParseInt(strings.Fields(r.out)[1], 10, 64)
					if err != nil {
						t.Fatalf("%s", r)
					}
					return tok, r
				}
				if r.code != 1 {
					t.Fatalf("claim through %s: %s", root, r)
				}
				return 0, r
			}
			var granted []int64
			for _, step := range []struct {
				root string
				now  int
			}{{a, 1000}, {b, 1001}, {a, 2000}, {b, 2001}} {
				if tok, _ := claim(step.root, step.now); tok != 0 {
					granted = append(granted, tok)
				}
			}
			if len(granted) > 2 {
				doubles++
			}
			highest := int64(0)
			for _, g := range granted {
				highest = max(highest, g)
			}
			tok, r := claim(a, 3000)
			if tok <= highest {
				t.Errorf("%s: the last claim through A got token %d after tokens %v were granted (want more than %d): %s", id[:12], tok, granted, highest, r)
			}
			if rec := readRecord(t, a, id); rec.Token != tok {
				t.Errorf("%s: record through A has token %d, the claim reported %d", id[:12], rec.Token, tok)
			}
			t.Logf("%s: tokens granted %v, then %d through A (%s)", id[:12], granted, tok, strings.TrimSpace(lastLine(r.errs)))
		}
		t.Logf("default options: %d of 6 IDs granted twice through B's caches", doubles)
	})
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
