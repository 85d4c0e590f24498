package commands_test

// Exit statuses of batches (docs/design.md#cli): the most serious outcome wins, and
// every refused input leaves the table byte-identical.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/leasefmt"
)

// TestExitSeverity: a batch goes on past lost and corrupt records and exits
// with the most serious outcome: 4 over 3 over 5 over 1 over 0.
func TestExitSeverity(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ok, stale, locked, corrupt, ioerr := coreInShard("ok", 0), coreInShard("stale", 1), coreInShard("locked", 2), coreInShard("corrupt", 3), coreInShard("io", 4)
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "w", "--now", "1000", "--ttl", "1000",
		string(ok), string(stale), string(locked), string(corrupt), string(ioerr))
	os.WriteFile(corePath(root, corrupt), []byte(`{"schema":"lease.work/v1","expires_at":NaN}`), 0o644)
	coreHoldLock(t, root, locked)
	line := func(id leasefmt.ID, tok string) string { return string(id) + " " + tok + "\n" }
	renew := func(want int, stdin string, extra ...string) coreResult {
		t.Helper()
		args := append([]string{"renew-batch", "--root", root, "--now", "1100", "--ttl", "1000", "--lock-timeout", "0.2", "--writers", "1"}, extra...)
		return coreMust(t, want, stdin, args...)
	}
	r := renew(0, line(ok, "1"))
	if r.out != line(ok, "1") {
		t.Errorf("ok: %s", r)
	}
	r = renew(1, line(ok, "1")+line(stale, "2"))
	if r.out != line(ok, "1") {
		t.Errorf("ok+stale: %s", r)
	}
	r = renew(5, line(stale, "2")+line(locked, "1")+line(ok, "1"))
	if r.out != line(ok, "1") || coreReasons(t, r.errOut)[locked] != "lock-timeout" {
		t.Errorf("stale+locked: %s", r)
	}
	r = renew(3, line(corrupt, "1")+line(locked, "1")+line(stale, "2")+line(ok, "1"))
	if got := coreReasons(t, r.errOut); got[corrupt] != "corrupt" || got[locked] != "lock-timeout" || got[stale] != "stale-token" || r.out != line(ok, "1") {
		t.Errorf("corrupt+locked+stale: %s", r)
	}
	// An I/O error fails the batch: 4, nothing reported renewed.
	coreImmutable(t, filepath.Dir(corePath(root, ioerr)))
	r = renew(4, line(ok, "1")+line(corrupt, "1")+line(ioerr, "1")+line(stale, "2"))
	if got := coreReasons(t, r.errOut); r.out != "" || got[corrupt] != "corrupt" || got[ioerr] != "io-error" || got[ok] != "io-error" {
		t.Errorf("with an I/O error: %s", r)
	}
	// claim --first: getting one is success (lease-claim(1)), whatever
	// the candidates passed on the way; getting none is the gravest
	// failure met. Before, a grant after a locked or corrupt candidate
	// exited 5 or 3, and `held=$(lease claim --first 1 -) || exit 1`
	// dropped a lease it held.
	free, free2 := coreInShard("free", 5), coreInShard("free2", 5)
	claim := []string{"claim", "--root", root, "--owner", "w", "--now", "1100", "--lock-timeout", "0.2", "--first", "1"}
	coreMust(t, 1, "", append(claim, string(ok))...)
	coreMust(t, 3, "", append(claim, string(corrupt))...)
	coreMust(t, 5, "", append(claim, string(locked))...)
	r = coreMust(t, 0, "", append(claim, string(locked), string(free))...)
	if r.out != line(free, "1") || coreReasons(t, r.errOut)[locked] != "lock-timeout" {
		t.Errorf("claim --first past a locked candidate: %s\nwant the grant on stdout, the lock timeout on stderr", r)
	}
	r = coreMust(t, 0, "", append(claim, string(corrupt), string(free2))...)
	if r.out != line(free2, "1") || coreReasons(t, r.errOut)[corrupt] != "corrupt" {
		t.Errorf("claim --first past a corrupt candidate: %s\nwant the grant on stdout, the corrupt record on stderr", r)
	}
}

// TestBadInputLeavesTableIdentical: every refused input exits as docs/design.md#cli
// says and leaves every name and byte under the root as it was.
func TestBadInputLeavesTableIdentical(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("bad", 3)
	coreMust(t, 0, "", "claim", "--root", root, "--owner", "w", "--now", "1000", "--ttl", "100", string(ids[0]), string(ids[1]))
	good := string(ids[0]) + " 1\n"
	nanID, linkID, bigID := coreID("nan"), coreID("link"), coreID("big")
	os.WriteFile(corePath(root, nanID), []byte(`{"schema":"lease.work/v1","id":"`+string(nanID)+`","status":"leased","owner":"w","token":1,"claimed_at":1000,"renewed_at":1000,"expires_at":NaN}`+"\n"), 0o644)
	outside := filepath.Join(t.TempDir(), "outside.json")
	os.WriteFile(outside, []byte(`{"schema":"lease.work/v1","id":"`+string(linkID)+`","status":"released","owner":"w","token":1,"claimed_at":1,"renewed_at":1,"expires_at":1}`+"\n"), 0o644)
	os.Symlink(outside, corePath(root, linkID))
	os.WriteFile(corePath(root, bigID), append([]byte(`{"schema":"lease.work/v1","id":"`+string(bigID)+`","x":"`), append(bytes.Repeat([]byte("x"), 5<<10), `"}`+"\n"...)...), 0o644)
	outsideBefore, _ := os.ReadFile(outside)

	upper := strings.ToUpper(string(ids[2]))
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  int
	}{
		{"missing token", string(ids[0]) + "\n", []string{"renew-batch"}, 2},
		{"extra field", string(ids[0]) + " 1 x\n", []string{"renew-batch"}, 2},
		{"malformed after a good line", good + "garbage\n", []string{"renew-batch"}, 2},
		{"duplicate ID", good + good, []string{"renew-batch"}, 2},
		{"duplicate ID other token", good + string(ids[0]) + " 2\n", []string{"release"}, 2},
		{"upper-case ID", good + upper + " 1\n", []string{"renew-batch"}, 2},
		{"short ID", good + string(ids[2][:40]) + " 1\n", []string{"complete"}, 2},
		{"dot-dot ID", good + "../../../../etc/passwd 1\n", []string{"renew-batch"}, 2},
		{"dot-dot ID of 64", good + "../" + string(ids[2][3:]) + " 1\n", []string{"renew-batch"}, 2},
		{"slash ID", good + string(ids[2][:32]) + "/" + string(ids[2][33:]) + " 1\n", []string{"release"}, 2},
		{"token 0", good + string(ids[1]) + " 0\n", []string{"renew-batch"}, 2},
		{"token 2^53", good + string(ids[1]) + " 9007199254740992\n", []string{"renew-batch"}, 2},
		{"token -1", good + string(ids[1]) + " -1\n", []string{"renew-batch"}, 2},
		{"token 1.0", good + string(ids[1]) + " 1.0\n", []string{"verify"}, 2},
		{"token 1e3", good + string(ids[1]) + " 1e3\n", []string{"renew-batch"}, 2},
		{"long line", good + string(ids[1]) + " 1" + strings.Repeat(" ", 5000) + "\n", []string{"renew-batch"}, 2},
		{"NUL in line", good + string(ids[1]) + "\x00 1\n", []string{"renew-batch"}, 2},
		{"claim upper-case", "", []string{"claim", upper}, 2},
		{"claim short", "", []string{"claim", string(ids[2]), "abc"}, 2},
		{"claim dot-dot", "", []string{"claim", "../" + string(ids[2][3:])}, 2},
		{"claim duplicate", "", []string{"claim", string(ids[2]), string(ids[2])}, 2},
		{"claim stdin duplicate", string(ids[2]) + "\n" + string(ids[2]) + "\n", []string{"claim", "-"}, 2},
		{"claim stdin with token", string(ids[2]) + " 1\n", []string{"claim", "-"}, 2},
		{"claim empty argument", "", []string{"claim", ""}, 2},
		{"now NaN", good, []string{"renew-batch", "--now", "NaN"}, 2},
		{"now -1", good, []string{"renew-batch", "--now", "-1"}, 2},
		{"now abc", good, []string{"renew-batch", "--now", "abc"}, 2},
		{"now Inf", "", []string{"claim", "--now", "+Inf", string(ids[2])}, 2},
		{"claim now NaN", "", []string{"claim", "--now", "NaN", string(ids[2])}, 2},
		{"ttl NaN", good, []string{"renew-batch", "--ttl", "NaN"}, 2},
		{"unknown flag", good, []string{"renew-batch", "--bogus"}, 2},
		{"missing input file", "", []string{"renew-batch", filepath.Join(root, "no-such-file")}, 2},
		{"shard conflict", good, []string{"renew-batch", "--shards", "8"}, 2},
		{"NaN in a record", string(nanID) + " 1\n", []string{"renew-batch"}, 3},
		{"NaN in a record, claim", "", []string{"claim", "--now", "5000", string(nanID)}, 3},
		{"NaN in a record, release", string(nanID) + " 1\n", []string{"release"}, 3},
		{"NaN in a record, complete", string(nanID) + " 1\n", []string{"complete"}, 3},
		{"symlink record", string(linkID) + " 1\n", []string{"renew-batch"}, 3},
		{"symlink record, claim", "", []string{"claim", string(linkID)}, 3},
		{"symlink record, verify", string(linkID) + " 1\n", []string{"verify"}, 3},
		{"5 KiB record", string(bigID) + " 1\n", []string{"renew-batch"}, 3},
		{"5 KiB record, claim", "", []string{"claim", string(bigID)}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := coreSnapshot(t, root)
			args := []string{tc.args[0], "--root", root, "--owner", "w"}
			if !strings.Contains(strings.Join(tc.args, " "), "--now") {
				args = append(args, "--now", "1010")
			}
			args = append(args, tc.args[1:]...)
			r := coreLease(t, tc.stdin, args...)
			if r.code != tc.want {
				t.Errorf("%s\nwant exit %d", r, tc.want)
			}
			if r.out != "" {
				t.Errorf("stdout %q on a refused input", r.out)
			}
			if r.errOut == "" || len(r.errOut) > 2*leasefmt.MaxErrorText {
				t.Errorf("stderr %q: want a bounded message", r.errOut)
			}
			coreSame(t, tc.name, before, coreSnapshot(t, root))
			if after, _ := os.ReadFile(outside); !bytes.Equal(after, outsideBefore) {
				t.Errorf("the symlink's target changed: %s", after)
			}
		})
	}
	// A usage error never creates a table either.
	fresh := coreBareRoot(t)
	for _, args := range [][]string{
		{"claim", "--root", fresh, "--owner", "w", "--now", "NaN", string(ids[2])},
		{"claim", "--root", fresh, "--owner", "w", upper},
		{"renew-batch", "--root", fresh, "--now", "-1"},
		{"init", "--root", fresh, "--shards", "0"},
	} {
		coreMust(t, 2, good, args...)
		if _, err := os.Lstat(fresh); err == nil {
			t.Fatalf("%v created %s", args, fresh)
		}
	}
}
