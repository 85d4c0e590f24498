package commands_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/commands"
)

// TestOwnerLoneSurrogate: a record whose owner holds a lone surrogate
// escape ("a\ud800b", which JSON decoders read as U+FFFD) is corrupt: a
// claim or renew of it changes nothing and says so, lease fsck reports it;
// and no way of naming an owner writes one.
func TestOwnerLoneSurrogate(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "table")
	if out, code := runLease([]string{"init", "--root", root, "--shards", "4"}, os.Stderr); code != 0 {
		t.Fatalf("init: exit %d %s", code, out)
	}
	id := strings.Repeat("ab", 32)
	if out, code := runLease([]string{"claim", "--root", root, "--owner", "w1", "--now", "1000", "--ttl", "100", id}, os.Stderr); code != 0 {
		t.Fatalf("claim: exit %d %s", code, out)
	}
	var path string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == id+".json" {
			path = p
		}
		return nil
	})
	data, err := os.ReadFile(path)
	if err != nil || !bytes.Contains(data, []byte(`"owner":"w1"`)) {
		t.Fatalf("the claimed record %s: %v\n%s", path, err, data)
	}
	bad := bytes.Replace(data, []byte(`"owner":"w1"`), []byte(`"owner":"a\ud800b"`), 1)
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"claim", "--root", root, "--owner", "w2", "--now", "2000", id},
		{"renew-batch", "--root", root, "--owner", "w1", "--now", "1050"},
		{"verify", "--root", root, "--now", "1050"},
	} {
		var out, errb bytes.Buffer
		code := commands.Run(append([]string{"lease"}, args...), strings.NewReader(id+" 1\n"), &out, &errb)
		if code == 0 || !strings.Contains(errb.String(), "corrupt") || !strings.Contains(errb.String(), `\ud800`) {
			t.Errorf("lease %s: exit %d, stdout %q, stderr %q; want it refused as corrupt, naming the escape", args[0], code, out.String(), errb.String())
		}
		if now, _ := os.ReadFile(path); !bytes.Equal(now, bad) {
			t.Errorf("lease %s rewrote the record:\n%s\nwas\n%s", args[0], now, bad)
		}
	}
	var errb bytes.Buffer
	out, code := runLease([]string{"fsck", "--root", root, "--now", "1050"}, &errb)
	if code != 4 || !strings.Contains(out, "owner") || !strings.Contains(out, `\ud800`) {
		t.Errorf("fsck: exit %d, want 4 and a finding naming the owner's escape:\n%s%s", code, out, errb.String())
	}
	// Writing one: an owner is a Go string from argv, the environment or
	// the config file, and none of them carries a lone surrogate as text.
	cfg := filepath.Join(t.TempDir(), "lease.toml")
	os.WriteFile(cfg, []byte("owner = \"a\\ud800b\"\n"), 0o644)
	other := strings.Repeat("cd", 32)
	for _, args := range [][]string{
		{"claim", "--root", root, "--owner", "a\xed\xa0\x80b", other},
		{"claim", "--root", root, "--config", cfg, other},
	} {
		var errb bytes.Buffer
		if _, code := runLease(args, &errb); code != 2 {
			t.Errorf("lease %v: exit %d, want 2: %s", args[3:], code, errb.String())
		}
	}
}
