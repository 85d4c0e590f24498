package commands_test

// What a new user types: a file named h or help, the common flags before
// the command's name, misspelled flags and commands, the renewal
// interval's flag named after its key, and a shard conflict named where it
// came from.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/leasefmt"
)

// uxResult is what one in-process run of lease did.
type uxResult struct {
	code        int
	out, errOut string
}

// uxRun runs lease in-process with stdin.
func uxRun(t *testing.T, stdin string, args ...string) uxResult {
	t.Helper()
	var out, errb bytes.Buffer
	code := commands.Run(append([]string{"lease"}, args...), strings.NewReader(stdin), &out, &errb)
	return uxResult{code, out.String(), errb.String()}
}

// uxMust runs lease and fails the test unless it exits with want.
func uxMust(t *testing.T, want int, stdin string, args ...string) uxResult {
	t.Helper()
	r := uxRun(t, stdin, args...)
	if r.code != want {
		t.Fatalf("lease %s: exit %d, want %d\nstdout:\n%sstderr:\n%s", strings.Join(args, " "), r.code, want, r.out, r.errOut)
	}
	return r
}

// uxTable is a fresh table made by lease init.
func uxTable(t *testing.T, extra ...string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "table")
	uxMust(t, 0, "", append([]string{"init", "--root", root}, extra...)...)
	return root
}

// uxID is the ID of name: the SHA-256 of it, as lease id makes it.
func uxID(name string) leasefmt.ID { return coreID(name) }

// TestHelpNameIsAFile: FILE arguments are files, always. A file named h
// or help is read as input by every filter, and renew-batch h > h.new &&
// mv h.new h keeps the held lease instead of replacing it by the help text.
func TestHelpNameIsAFile(t *testing.T) {
	root := uxTable(t)
	dir := t.TempDir()
	t.Chdir(dir)
	id := uxID("help-as-file")
	held := uxMust(t, 0, "", "claim", "--root", root, "--now", "1000", "--ttl", "100", string(id)).out
	for _, name := range []string{"h", "help"} {
		if err := os.WriteFile(name, []byte(held), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"renew-batch", "verify"} {
			r := uxMust(t, 0, "", cmd, "--root", root, "--now", "1010", name)
			if r.out != held {
				t.Errorf("lease %s %s printed %q, want the held line %q", cmd, name, r.out, held)
			}
		}
	}
	// Commands whose arguments are IDs, or that take none, refuse the word
	// as what it is, with their usage status.
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"claim", "h"}, 2},
		{[]string{"revoke", "help"}, 2},
		{[]string{"status", "h"}, 2},
		{[]string{"init", "help"}, 2},
		{[]string{"fsck", "h"}, 16},
		{[]string{"group-renew", "help"}, 1}, // the file help, read as GID TOKEN lines: no such group
	} {
		args := append([]string{tc.args[0], "--root", root}, tc.args[1:]...)
		r := uxRun(t, "", args...)
		if r.code != tc.code || strings.Contains(r.out, "USAGE:") || strings.Contains(r.out, "NAME:") {
			t.Errorf("lease %v: exit %d, want %d, and no help text\nstdout:\n%sstderr:\n%s", tc.args, r.code, tc.code, r.out, r.errOut)
		}
	}
	os.WriteFile("h.new", nil, 0o644)
	// lease help COMMAND and COMMAND --help still show the help.
	for _, args := range [][]string{{"help", "renew-batch"}, {"renew-batch", "--help"}, {"renew-batch", "-h"}} {
		if r := uxMust(t, 0, "", args...); !strings.Contains(r.out, "lease renew-batch") {
			t.Errorf("lease %v shows no help:\n%s", args, r.out)
		}
	}
}

// TestGlobalFlagsBeforeCommand: the common flags may come before the
// command's name, as git, etcdctl and consul take them; a flag after the
// name still wins.
func TestGlobalFlagsBeforeCommand(t *testing.T) {
	t.Parallel()
	root := uxTable(t)
	id := uxID("global-flags")
	held := uxMust(t, 0, "", "--root", root, "--now=1000", "--owner", "alice", "claim", string(id)).out
	if !strings.HasPrefix(held, string(id)+" 1") {
		t.Fatalf("claim with global flags printed %q", held)
	}
	after := uxMust(t, 0, "", "status", "--root", root, "--now", "1000", "--json").out
	before := uxMust(t, 0, "", "--root", root, "--json", "--now", "1000", "status").out
	if before != after || !strings.Contains(before, `"owner":"alice"`) {
		t.Errorf("lease --root R --json status printed\n%s\nlease status --root R --json printed\n%s", before, after)
	}
	// -v and --verbose are switches: the next word is the command.
	if r := uxMust(t, 0, held, "-v", "--root", root, "--now", "1001", "verify"); r.out != held {
		t.Errorf("lease -v --root R verify: %q", r.out)
	}
	// A flag after the name wins over one before it.
	r := uxMust(t, 0, "", "--owner", "bob", "config", "--owner", "carol")
	if !strings.Contains(r.out, `"carol"`) || strings.Contains(r.out, `"bob"`) {
		t.Errorf("lease --owner bob config --owner carol:\n%s", r.out)
	}
	// A command without the flag refuses it with its usage status.
	r = uxMust(t, 2, "", "--root", root, "version")
	if !strings.Contains(r.errOut, "lease version takes no --root") {
		t.Errorf("lease --root R version: %q", r.errOut)
	}
	// A global flag without its value, and one that does not exist, are
	// usage errors of lease itself.
	uxMust(t, 2, "", "--root")
	r = uxMust(t, 2, "", "--roto", root, "status")
	if !strings.Contains(r.errOut, "unknown flag --roto; did you mean --root?") {
		t.Errorf("lease --roto: %q", r.errOut)
	}
	// lease --help lists them.
	if r := uxMust(t, 0, "", "--help"); !strings.Contains(r.out, "GLOBAL OPTIONS") || !strings.Contains(r.out, "--root") {
		t.Errorf("lease --help does not list the global options:\n%s", r.out)
	}
}

// TestUsageNamesTheFlagAsTyped: a misspelled flag is named with its two
// dashes and the flag probably meant; so is a misspelled command.
func TestUsageNamesTheFlagAsTyped(t *testing.T) {
	t.Parallel()
	root := uxTable(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"claim", "--frist", "1", "-"}, 2, "lease claim: usage: unknown flag --frist; did you mean --first? (see lease claim --help)"},
		{[]string{"fsck", "--repiar"}, 16, "unknown flag --repiar; did you mean --repair?"},
		{[]string{"run", "--complet", string(uxID("x")), "--", "true"}, 125, "did you mean --complete?"},
		{[]string{"status", "--xyzzy"}, 2, "unknown flag --xyzzy (see lease status --help)"},
		{[]string{"claim", "--ttl"}, 2, "flag --ttl needs a value"},
		{[]string{"claim", "--ttl", "soon", "-"}, 2, `invalid value "soon" for flag --ttl`},
		{[]string{"stauts"}, 2, `"stauts" is not a lease command; did you mean lease status?`},
	} {
		args := append([]string{tc.args[0], "--root", root}, tc.args[1:]...)
		r := uxRun(t, "", args...)
		if r.code != tc.code || !strings.Contains(r.errOut, tc.want) {
			t.Errorf("lease %v: exit %d, want %d; stderr %q, want it to contain %q", tc.args, r.code, tc.code, r.errOut, tc.want)
		}
		if len(tc.args) > 1 && strings.HasPrefix(tc.args[1], "--") && strings.Contains(r.errOut, " -"+strings.TrimLeft(tc.args[1], "-")) {
			t.Errorf("lease %v names the flag with one dash: %q", tc.args, r.errOut)
		}
	}
}

// TestRenewIntervalFlag: the flag of renew_interval is --renew-interval,
// named after its key; --interval, its old name, still works.
func TestRenewIntervalFlag(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--renew-interval", "--interval"} {
		r := uxMust(t, 0, "", "config", flag, "7", "--json")
		if !strings.Contains(r.out, `"renew_interval":{"value":7,"origin":"flag --renew-interval"}`) {
			t.Errorf("lease config %s 7: %s", flag, r.out)
		}
	}
	if r := uxMust(t, 0, "", "config", "--help"); !strings.Contains(r.out, "--renew-interval SECONDS, --interval SECONDS") {
		t.Errorf("lease config --help does not show --renew-interval with its alias:\n%s", r.out)
	}
}

// TestConfigErrorsNameTheFileAndKey: a TOML key written with dashes gets
// the key meant; a syntax error names the file and line, not "-".
func TestConfigErrorsNameTheFileAndKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct{ text, want string }{
		{"renew-interval = 3\n", `:1: "renew-interval": unknown key; did you mean renew_interval?`},
		{"ttl = 200\nlock_timout = 3\n", `:2: "lock_timout": unknown key; did you mean lock_timeout?`},
		{"colour = 3\n", `:1: "colour": unknown key (lease config lists the keys)`},
		{"[x\n", ":2: TOML syntax error: expected '.' or ']'"},
		{"ttl = = 3\n", ":1: ttl: TOML syntax error:"},
	} {
		file := filepath.Join(dir, "c.toml")
		os.WriteFile(file, []byte(tc.text), 0o644)
		r := uxMust(t, 2, "", "config", "--config", file)
		if !strings.Contains(r.errOut, "config "+file+tc.want) || strings.Contains(r.errOut, " -: ") {
			t.Errorf("config %q: %q, want %q", tc.text, r.errOut, "config "+file+tc.want)
		}
	}
}

// TestShardConflictNamesItsOrigin: a shard count that conflicts with the
// table is reported as given: LEASE_SHARDS, not --shards.
func TestShardConflictNamesItsOrigin(t *testing.T) {
	root := uxTable(t)
	t.Setenv("LEASE_SHARDS", "4")
	r := uxMust(t, 2, "", "init", "--root", root)
	if !strings.Contains(r.errOut, "4 (env LEASE_SHARDS)") || strings.Contains(r.errOut, "--shards") {
		t.Errorf("LEASE_SHARDS=4 lease init: %q", r.errOut)
	}
	r = uxMust(t, 2, "", "init", "--root", root, "--shards", "8")
	if !strings.Contains(r.errOut, "8 (flag --shards)") {
		t.Errorf("lease init --shards 8: %q", r.errOut)
	}
}

// TestInputFileErrors: a missing input file is named once, quoted, with
// the cause, exit 2.
func TestInputFileErrors(t *testing.T) {
	t.Parallel()
	root := uxTable(t)
	r := uxMust(t, 2, "", "renew-batch", "--root", root, filepath.Join(t.TempDir(), "held"))
	if !strings.Contains(r.errOut, "input file ") || !strings.Contains(r.errOut, "no such file or directory") || strings.Contains(r.errOut, "open ") {
		t.Errorf("missing input file: %q", r.errOut)
	}
}
