package multiclient

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// warnings counts the warnings of a table on an unsafe filesystem in a
// command's stderr.
func warnings(errs string) int {
	return strings.Count(errs, "is on a filesystem lease knows is unsafe")
}

// TestInitRefusesDefaultOptions: on the volume with GlusterFS's default
// options lease init refuses to create a table, naming the options to
// turn off, and creates nothing; --force creates it and records that in
// TABLE; then every command warns once on stderr (through both mounts),
// and batches run one writer (the client has 2 event threads, gluster
// issue 4371) unless --writers says otherwise. On the volume with the
// caches off, init and the commands say nothing, and only the writers are
// capped.
func TestInitRefusesDefaultOptions(t *testing.T) {
	gd, gs := glusterDefault(), glusterSafe()
	need(t, gd)
	need(t, gs)
	name := "guard-" + strings.ReplaceAll(t.Name(), "/", "-")
	a, b := filepath.Join(gd.A, name), filepath.Join(gd.B, name)
	r := lease(t, "", "init", "--root", a)
	if r.code != 2 || !strings.Contains(r.errs, "refusing to create a table at "+a) {
		t.Fatalf("init on the default options: %s\nwant exit 2 and a refusal", r)
	}
	for _, opt := range []string{"performance.open-behind", "performance.quick-read", "performance.stat-prefetch", "--force"} {
		if !strings.Contains(r.errs, opt) {
			t.Errorf("the refusal does not name %s: %s", opt, r.errs)
		}
	}
	if _, err := os.Lstat(a); !os.IsNotExist(err) {
		t.Errorf("the refused init made %s (%v)", a, err)
	}
	r = lease(t, "", "init", "--root", a, "--force", "--shards", "4")
	if r.code != 0 || warnings(r.errs) != 1 {
		t.Fatalf("init --force: %s\nwant exit 0 and one warning", r)
	}
	hdr, err := os.ReadFile(filepath.Join(b, "TABLE"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"unsafe_filesystem":{"fstype":"fuse.glusterfs","options":["performance.open-behind","performance.quick-read","performance.stat-prefetch"]`, `"accepted_by":"lease init --force"`} {
		if !strings.Contains(string(hdr), want) {
			t.Errorf("TABLE %s lacks %s", hdr, want)
		}
	}
	id := ids(t.Name(), 1)[0]
	for _, step := range []struct {
		stdin string
		args  []string
	}{
		{id + "\n", []string{"add", "--root", a}},
		{"", []string{"claim", "--root", b, "--next", "1", "--now", "1000", "--ttl", "100"}},
		{id + " 1\n", []string{"verify", "--root", a, "--now", "1001"}},
		{"", []string{"status", "--root", b}},
		{"", []string{"status", "--summary", "--root", a}},
		{"", []string{"fsck", "--root", a}},
	} {
		r := lease(t, step.stdin, step.args...)
		if r.code != 0 || warnings(r.errs) != 1 {
			t.Errorf("%s\nwant exit 0 and the warning once", r)
		}
		if step.args[0] != "fsck" && !strings.Contains(r.errs, "lease init --force accepted it") {
			t.Errorf("lease %s: the warning does not say the table was forced: %s", step.args[0], r.errs)
		}
	}
	more := ids(t.Name()+"/more", 3)
	r = lease(t, strings.Join(more, "\n")+"\n", "claim", "-v", "--root", a, "--now", "1000", "--ttl", "100", "-")
	if r.code != 0 || !strings.Contains(r.errs, "writers capped at 1") || !strings.Contains(r.errs, "2 event threads") {
		t.Errorf("claim -v on GlusterFS: %s\nwant the writers capped at 1 (2 event threads)", r)
	}
	r = lease(t, r.out, "renew-batch", "-v", "--writers", "8", "--root", a, "--now", "1001")
	if r.code != 1 && r.code != 0 || strings.Contains(r.errs, "writers capped") {
		t.Errorf("renew-batch --writers 8: %s\nwant the explicit writers kept", r)
	}

	safe := filepath.Join(gs.A, name)
	r = lease(t, "", "init", "--root", safe, "--shards", "4")
	if r.code != 0 || r.errs != "" {
		t.Errorf("init on the safe options: %s\nwant exit 0, nothing on stderr", r)
	}
	if hdr, _ := os.ReadFile(filepath.Join(safe, "TABLE")); strings.Contains(string(hdr), "unsafe_filesystem") {
		t.Errorf("TABLE of the safe volume records an unsafe filesystem: %s", hdr)
	}
	r = lease(t, id+"\n", "claim", "-v", "--root", filepath.Join(gs.B, name), "--now", "1000", "-")
	if r.code != 0 || warnings(r.errs) != 0 || !strings.Contains(r.errs, "writers capped at 1") {
		t.Errorf("claim -v on the safe volume: %s\nwant no warning, the writers capped", r)
	}
}
