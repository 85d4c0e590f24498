package commands_test

// The command line as a whole: unknown commands and global options.

import (
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
