package commands_test

// The command line as a whole: unknown commands and global options.

import (
	"os"
	"strings"
	"testing"
)

// TestUnknownCommand: a command that does not exist is a usage error, and
// repeated in-process runs keep their exit statuses apart.
func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	for i := 0; i < 3; i++ {
		coreMust(t, 2, "", "claim", "--root", root, "--now", "NaN", string(coreID("x")))
		r := coreMust(t, 2, "", "no-such-command")
		if !strings.Contains(r.errOut, "no-such-command") {
			t.Errorf("unknown command message: %s", r)
		}
		coreMust(t, 0, "", "version")
	}
}

// TestGlobalOptions: lease --version prints what lease version prints; a
// bad global option is a usage error (exit 2) that names lease itself, not
// "lease lease".
func TestGlobalOptions(t *testing.T) {
	t.Parallel()
	v := coreMust(t, 0, "", "version")
	if got := coreMust(t, 0, "", "--version"); got.out != v.out || !strings.HasPrefix(got.out, "lease ") {
		t.Errorf("lease --version: %q; lease version: %q", got.out, v.out)
	}
	r := coreMust(t, 2, "", "--no-such-option")
	if !strings.HasPrefix(r.errOut, "lease: usage: ") || !strings.Contains(r.errOut, "(see lease --help)") {
		t.Errorf("bad global option: %s", r)
	}
	r = coreMust(t, 2, "", "claim", "--no-such-option")
	if !strings.HasPrefix(r.errOut, "lease claim: usage: ") || !strings.Contains(r.errOut, "(see lease claim --help)") {
		t.Errorf("bad claim option: %s", r)
	}
}

// TestRunClosesItsStores: every descriptor a command opened in its table
// is closed when Run returns (the table's stores: one descriptor per shard
// directory used, its lock files). In-process runs are how the tests run
// thousands of commands in one process; a store left open took about 50
// descriptors a status. Counted under the test's own table only, so other
// tests running at the same time do not matter.
func TestRunClosesItsStores(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	id := string(coreID("closes"))
	coreMust(t, 0, id+"\n", "add", "--root", root)
	held := coreMust(t, 0, "", "claim", "--root", root, "--owner", "me", "--ttl", "60", id).out
	coreMust(t, 0, "", "status", "--root", root)
	coreMust(t, 0, "", "status", "--root", root, "--summary")
	coreMust(t, 0, "", "fsck", "--root", root)
	coreMust(t, 0, held, "release", "--root", root, "--owner", "me")
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var open []string
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && (l == root || strings.HasPrefix(l, root+"/")) {
			open = append(open, l)
		}
	}
	if len(open) > 0 {
		t.Errorf("after the commands returned, %d descriptors are open in the table: %v", len(open), open)
	}
}
