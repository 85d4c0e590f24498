package commands_test

// lease claim: one ID, many, from stdin, after expiry within and past
// clock_skew, and --first.

import (
	"os"
	"strings"
	"testing"

	"github.com/leasetool/lease/leasefmt"
)

func TestClaim(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("claim", 6)
	base := []string{"--root", root, "--owner", "host-a/w1", "--now", "1000", "--ttl", "60"}
	// One ID, on a table created on first use.
	r := coreMust(t, 0, "", append([]string{"claim"}, append(base, string(ids[0]))...)...)
	if r.out != string(ids[0])+" 1\n" || r.errOut != "" {
		t.Fatalf("claim one: %s", r)
	}
	rec := coreRecord(t, root, ids[0])
	if rec.Status != leasefmt.Leased || rec.Owner != "host-a/w1" || rec.Token != 1 || rec.ClaimedAt != 1000 || rec.ExpiresAt != 1060 {
		t.Errorf("record after claim: %+v", rec)
	}
	// Many, as arguments: output in input order, the held one refused.
	args := append([]string{"claim"}, base...)
	for _, i := range []int{3, 0, 1, 2} {
		args = append(args, string(ids[i]))
	}
	r = coreMust(t, 1, "", args...)
	if want := coreJoin([]leasefmt.ID{ids[3], ids[1], ids[2]}, " 1"); r.out != want {
		t.Errorf("claim many: stdout\n%s\nwant\n%s", r.out, want)
	}
	if got := coreReasons(t, r.errOut); len(got) != 1 || got[ids[0]] != "held" {
		t.Errorf("claim many: stderr %q", r.errOut)
	}
	if !strings.Contains(r.errOut, "host-a/w1") {
		t.Errorf("held line does not name the holder: %s", r.errOut)
	}
	// From stdin with `-`, comments and blank lines.
	stdin := "# work\n\n" + string(ids[4]) + "  # first\n   \n" + string(ids[5]) + "\n"
	r = coreMust(t, 0, stdin, append([]string{"claim"}, append(base, "-")...)...)
	if r.out != coreJoin(ids[4:6], " 1") {
		t.Errorf("claim -: %s", r)
	}
	// At expiry, within clock_skew (default 1 s), the lease is still
	// held for a claimer; from expires_at + clock_skew another owner gets
	// the next token.
	r = coreMust(t, 1, "", "claim", "--root", root, "--owner", "host-b/w2", "--now", "1060.5", "--ttl", "60", string(ids[0]))
	if got := coreReasons(t, r.errOut); got[ids[0]] != "held" || !strings.Contains(r.errOut, "within clock_skew") {
		t.Errorf("claim within clock_skew of the expiry: %s", r)
	}
	r = coreMust(t, 0, "", "claim", "--root", root, "--owner", "host-b/w2", "--now", "1061", "--ttl", "60", string(ids[0]))
	if r.out != string(ids[0])+" 2\n" {
		t.Errorf("claim after expiry: %s", r)
	}
	if rec := coreRecord(t, root, ids[0]); rec.Owner != "host-b/w2" || rec.Token != 2 || rec.ExpiresAt != 1121 {
		t.Errorf("record after the second claim: %+v", rec)
	}
}

func TestClaimFirst(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("first", 8)
	base := []string{"claim", "--root", root, "--owner", "w", "--now", "1000", "--ttl", "60"}
	coreMust(t, 0, "", append(base, string(ids[1]), string(ids[2]))...)
	r := coreMust(t, 0, coreJoin(ids, ""), append(base, "--first", "3", "-")...)
	if want := coreJoin([]leasefmt.ID{ids[0], ids[3], ids[4]}, " 1"); r.out != want {
		t.Errorf("--first 3: stdout\n%s\nwant\n%s", r.out, want)
	}
	for _, id := range ids[5:] {
		if _, err := os.Stat(corePath(root, id)); err == nil {
			t.Errorf("--first 3 claimed %s beyond the third", id)
		}
	}
	r = coreMust(t, 0, "", append(base, "--first", "1", string(ids[0]), string(ids[5]), string(ids[6]))...)
	if r.out != string(ids[5])+" 1\n" {
		t.Errorf("--first 1 past a held one: %s", r)
	}
	// Nothing to get: a negative answer.
	coreMust(t, 1, "", append(base, "--first", "2", string(ids[0]), string(ids[1]))...)
	before := coreSnapshot(t, root)
	coreMust(t, 2, "", append(base, "--first", "0", string(ids[7]))...)
	coreMust(t, 2, "", append(base, "--first", "-1", string(ids[7]))...)
	coreSame(t, "bad --first", before, coreSnapshot(t, root))
}
