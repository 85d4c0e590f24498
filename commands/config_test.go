package commands_test

// lease config: where each value came from (docs/design.md#clocks).

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigOrigins: lease config names where each value came from, with
// flags over environment over file over defaults.
func TestConfigOrigins(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	file := filepath.Join(dir, "c.toml")
	os.WriteFile(file, []byte("# campaign settings\nowner = \"file-owner\"\n\nttl = 200\nshards = 32\nlock_timeout = 3\n"), 0o644)
	origins := func(r coreResult) map[string]string {
		out := map[string]string{}
		for _, l := range strings.Split(r.out, "\n") {
			if i := strings.Index(l, " # "); i > 0 && !strings.HasPrefix(l, "#") {
				f := strings.Fields(l[:i])
				out[f[0]] = strings.TrimSpace(l[i+3:]) + " = " + strings.Join(f[2:], " ")
			}
		}
		return out
	}
	r := coreMust(t, 0, "", "config", "--root", "/r")
	o := origins(r)
	for k, want := range map[string]string{
		"ttl": "default (max(120, 4*target_timeout)) = 120", "shards": "default = 16", "root": "flag --root = \"/r\"",
		"renew_interval": "default (max(0.1, min(30, ttl/3))) = 30", "lock_timeout": "default = 10",
	} {
		if o[k] != want {
			t.Errorf("defaults: %s is %q, want %q\n%s", k, o[k], want, r.out)
		}
	}
	t.Setenv("LEASE_TTL", "300")
	t.Setenv("LEASE_SHARDS", "64")
	r = coreMust(t, 0, "", "config", "--config", file, "--shards", "8")
	o = origins(r)
	for k, want := range map[string]string{
		"owner":          file + ":2 = \"file-owner\"",
		"lock_timeout":   file + ":6 = 3",
		"ttl":            "env LEASE_TTL = 300",
		"shards":         "flag --shards = 8",
		"renew_interval": "default (max(0.1, min(30, ttl/3))) = 30",
		"target_timeout": "default = 30",
	} {
		if o[k] != want {
			t.Errorf("%s is %q, want %q\n%s", k, o[k], want, r.out)
		}
	}
	if !strings.Contains(r.out, "# config file: "+file) {
		t.Errorf("config does not name its file:\n%s", r.out)
	}
	// LEASE_CONFIG, and ./lease.toml when nothing names a file.
	t.Setenv("LEASE_CONFIG", file)
	if o := origins(coreMust(t, 0, "", "config")); o["owner"] != file+":2 = \"file-owner\"" {
		t.Errorf("LEASE_CONFIG: owner %q", o["owner"])
	}
	t.Setenv("LEASE_CONFIG", "")
	os.WriteFile(filepath.Join(dir, "lease.toml"), []byte("ttl = 90\n"), 0o644)
	t.Setenv("LEASE_TTL", "")
	if o := origins(coreMust(t, 0, "", "config")); o["ttl"] != "lease.toml:1 = 90" {
		t.Errorf("./lease.toml: ttl %q", o["ttl"])
	}
	// --json carries values and origins.
	r = coreMust(t, 0, "", "config", "--json", "--ttl", "99")
	var doc map[string]struct {
		Value  any    `json:"value"`
		Origin string `json:"origin"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		// config_file is a plain string; decode the rest leniently.
		var raw map[string]json.RawMessage
		if err2 := json.Unmarshal([]byte(r.out), &raw); err2 != nil {
			t.Fatalf("config --json: %v\n%s", err2, r.out)
		}
		doc = map[string]struct {
			Value  any    `json:"value"`
			Origin string `json:"origin"`
		}{}
		for k, v := range raw {
			var e struct {
				Value  any    `json:"value"`
				Origin string `json:"origin"`
			}
			if json.Unmarshal(v, &e) == nil {
				doc[k] = e
			}
		}
	}
	if doc["ttl"].Value != 99.0 || doc["ttl"].Origin != "flag --ttl" {
		t.Errorf("config --json ttl: %+v", doc["ttl"])
	}
	os.Remove(filepath.Join(dir, "lease.toml"))

	// Bad files: exit 2 naming file:line and key.
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"syntax", "owner = \"a\"\nttl = = 3\n", []string{":2", "ttl"}},
		{"unterminated", "owner = \"a\nttl = 3\n", []string{":1"}},
		{"unknown key", "ttl = 10\n\nbogus_key = 1\n", []string{":3", "bogus_key", "unknown key"}},
		{"nan", "shards = 4\nttl = nan\n", []string{":2", "ttl"}},
		{"infinity", "lock_timeout = inf\n", []string{":1", "lock_timeout"}},
		{"negative ttl", "owner = \"o\"\nttl = -5\n", []string{":2", "ttl"}},
		{"negative shards", "shards = -1\n", []string{":1", "shards"}},
		{"wrong type", "\nshards = \"many\"\n", []string{":2", "shards"}},
		{"float shards", "shards = 1.5\n", []string{":1", "shards"}},
		{"table", "[work]\nshards = 4\n", []string{":1", "work"}},
		{"dotted key", "ttl = 100\nwork.shards = 4\n", []string{":2", "work"}},
		{"quoted key", "ttl = 100\n\"bogus\" = 4\n", []string{":2", "bogus"}},
		{"control owner", "owner = \"a\\u0007b\"\n", []string{"owner"}},
	} {
		bad := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".toml")
		os.WriteFile(bad, []byte(tc.text), 0o644)
		r := coreLease(t, "", "config", "--config", bad)
		if r.code != 2 || r.out != "" {
			t.Errorf("%s: %s\nwant exit 2", tc.name, r)
			continue
		}
		for _, w := range append([]string{bad}, tc.want...) {
			if !strings.Contains(r.errOut, w) {
				t.Errorf("%s: error %q does not name %q", tc.name, r.errOut, w)
			}
		}
	}
	// Bad environment and flags are usage errors too.
	for _, tc := range []struct {
		env, val string
		args     []string
	}{
		{"LEASE_TTL", "NaN", nil}, {"LEASE_TTL", "-1", nil}, {"LEASE_TTL", "abc", nil}, {"LEASE_SHARDS", "0", nil},
		{"", "", []string{"--ttl", "-1"}}, {"", "", []string{"--ttl", "NaN"}}, {"", "", []string{"--ttl", "0"}},
		{"", "", []string{"--lock-timeout", "Inf"}}, {"", "", []string{"--owner", ""}}, {"", "", []string{"--config", filepath.Join(dir, "missing.toml")}},
	} {
		if tc.env != "" {
			t.Setenv(tc.env, tc.val)
		}
		r := coreLease(t, "", append([]string{"config"}, tc.args...)...)
		if r.code != 2 {
			t.Errorf("%s=%q %v: %s\nwant exit 2", tc.env, tc.val, tc.args, r)
		}
		if tc.env != "" {
			t.Setenv(tc.env, "")
		}
	}
}
