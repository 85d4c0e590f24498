package qualify

import (
	"strings"
	"testing"
)

func TestConfSettings(t *testing.T) {
	conf := `# a cluster's ceph.conf
[global]
    fsid = 1234
    client reconnect stale = false   ; the default
[client]
    client-reconnect-stale = true
[client.b]
    client_reconnect_stale = false
[mds]
    client_reconnect_stale = true
`
	for _, tc := range []struct{ id, want string }{
		{"a", "true"},  // [client] over [global]
		{"b", "false"}, // [client.b] over [client]
	} {
		got := confSettings(strings.NewReader(conf), tc.id)["client_reconnect_stale"]
		if got != tc.want {
			t.Errorf("client.%s: client_reconnect_stale %q, want %q", tc.id, got, tc.want)
		}
	}
	if got := confSettings(strings.NewReader("[mds]\nclient_reconnect_stale = true\n"), "a"); len(got) != 0 {
		t.Errorf("a setting of the [mds] section counted for a client: %v", got)
	}
	for _, v := range []string{"true", "TRUE", "yes", "on", "1"} {
		if !cephBool(v) {
			t.Errorf("cephBool(%q) = false", v)
		}
	}
	for _, v := range []string{"false", "0", "no", ""} {
		if cephBool(v) {
			t.Errorf("cephBool(%q) = true", v)
		}
	}
}

// TestCephKernelCheck: the kernel client's mount options say whether it
// reconnects an evicted session by itself (recover_session=clean).
func TestCephKernelCheck(t *testing.T) {
	m := Mount{Point: "/mnt/cephfs", FSType: "ceph", Source: "admin@1234.leasefs=/", Options: "rw,name=admin,secret=<hidden>,acl,recover_session=clean"}
	ch, ok := clientCheck(m)
	if !ok || ch.Name != "client-caches" || ch.Pass || !strings.Contains(ch.Detail, "recover_session=clean") {
		t.Errorf("recover_session=clean: %+v, %v; want a failed client-caches check naming it", ch, ok)
	}
	m.Options = "rw,name=admin,secret=<hidden>,acl"
	if ch, ok := clientCheck(m); !ok || !ch.Pass {
		t.Errorf("the kernel client's defaults: %+v, %v; want a pass", ch, ok)
	}
	if len(ch.Detail) > 512 {
		t.Errorf("detail is %d bytes, over the 512 of a bounded message", len(ch.Detail))
	}
	if _, ok := clientCheck(Mount{FSType: "ext4"}); ok {
		t.Error("a client-caches check for ext4")
	}
}

// TestCephFuseCheckUnreadable: a ceph-fuse mount whose client qualify
// cannot find passes (CephFS's defaults are safe), saying what it could
// not read and which setting to keep off.
func TestCephFuseCheckUnreadable(t *testing.T) {
	ch, ok := clientCheck(Mount{Point: t.TempDir(), FSType: "fuse.ceph-fuse", Source: "ceph-fuse"})
	if !ok || !ch.Pass || !strings.Contains(ch.Detail, "cannot read the client's settings") || !strings.Contains(ch.Detail, "client_reconnect_stale=true") {
		t.Errorf("unreadable client: %+v, %v", ch, ok)
	}
}

func TestGuardLocal(t *testing.T) {
	if g := Inspect(t.TempDir()); len(g.Hazards) != 0 {
		t.Errorf("the guard on a local directory: %+v", g)
	}
}
