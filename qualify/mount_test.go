package qualify

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const mountinfo = `22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 253:0 / / rw,relatime - ext4 /dev/vda rw
90 27 0:50 / /tmp/gl/mA rw,relatime - fuse.glusterfs vm:leasevol rw,user_id=0,group_id=0,default_permissions,allow_other,max_read=131072
91 27 0:51 / /tmp/gl/mA\040b rw,relatime shared:5 - fuse.glusterfs vm:/other rw,user_id=0
92 27 0:52 / /scratch rw - nfs4 srv:/export rw,vers=4.2,local_lock=none
`

func TestFindMount(t *testing.T) {
	for _, tc := range []struct{ path, point, typ, src string }{
		{"/tmp/gl/mA/table/.qualify.x", "/tmp/gl/mA", "fuse.glusterfs", "vm:leasevol"},
		{"/tmp/gl/mA", "/tmp/gl/mA", "fuse.glusterfs", "vm:leasevol"},
		{"/tmp/gl/mA b/t", "/tmp/gl/mA b", "fuse.glusterfs", "vm:/other"},
		{"/tmp/gl/mAx", "/", "ext4", "/dev/vda"},
		{"/scratch/c", "/scratch", "nfs4", "srv:/export"},
	} {
		m, ok := FindMount(strings.NewReader(mountinfo), tc.path)
		if !ok || m.Point != tc.point || m.FSType != tc.typ || m.Source != tc.src {
			t.Errorf("FindMount(%q) = %+v, %v; want %s %s at %s", tc.path, m, ok, tc.typ, tc.src, tc.point)
		}
	}
	if _, ok := FindMount(strings.NewReader("garbage\n"), "/x"); ok {
		t.Error("a mount found in garbage")
	}
}

// fakeGraph lays out a GlusterFS client's .meta/graphs/active as the meta
// translator shows it: one directory per translator holding its type.
func fakeGraph(t *testing.T, types map[string]string) string {
	t.Helper()
	point := t.TempDir()
	for name, typ := range types {
		dir := filepath.Join(point, ".meta", "graphs", "active", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "type"), []byte(typ+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return point
}

func TestGlusterCheck(t *testing.T) {
	base := map[string]string{"v-client-0": "protocol/client", "v-dht": "cluster/distribute", "v-write-behind": "performance/write-behind", "v": "debug/io-stats"}
	defaults := map[string]string{"v-open-behind": "performance/open-behind", "v-quick-read": "performance/quick-read", "v-md-cache": "performance/md-cache"}
	for k, v := range base {
		defaults[k] = v
	}
	ch := glusterCheck(Mount{Point: fakeGraph(t, defaults), FSType: "fuse.glusterfs", Source: "host:v"})
	if ch.Pass {
		t.Fatalf("client graph with open-behind, quick-read and md-cache passed: %s", ch.Detail)
	}
	for _, want := range []string{"gluster volume set v performance.open-behind off", "gluster volume set v performance.quick-read off",
		"gluster volume set v performance.stat-prefetch off", "md-cache, open-behind, quick-read"} {
		if !strings.Contains(ch.Detail, want) {
			t.Errorf("detail %q lacks %q", ch.Detail, want)
		}
	}
	if len(ch.Detail) > 512 {
		t.Errorf("detail is %d bytes, over the 512 of a bounded message", len(ch.Detail))
	}
	if ch := glusterCheck(Mount{Point: fakeGraph(t, base), Source: "host:/v"}); !ch.Pass {
		t.Errorf("client graph without caching translators failed: %s", ch.Detail)
	}
	ch = glusterCheck(Mount{Point: t.TempDir(), Source: "host:v"})
	if ch.Pass || !strings.Contains(ch.Detail, "cannot read the client's translator graph") || !strings.Contains(ch.Detail, "performance.nl-cache") {
		t.Errorf("unreadable graph: pass=%v %s; want a failure naming every option", ch.Pass, ch.Detail)
	}
	if len(ch.Detail) > 512 {
		t.Errorf("detail is %d bytes, over the 512 of a bounded message", len(ch.Detail))
	}
}

// TestGlusterHazards: the guard's rule for GlusterFS FUSE mounts finds the
// caching translators of the client graph (unsafe, naming the options)
// and bounds the writers below the client's event threads, read from its
// volfile (2, GlusterFS's default, when the volfile does not say).
func TestGlusterHazards(t *testing.T) {
	types := map[string]string{"v-client-0": "protocol/client", "v-open-behind": "performance/open-behind",
		"v-quick-read": "performance/quick-read", "v-md-cache": "performance/md-cache", "v": "debug/io-stats"}
	point := fakeGraph(t, types)
	hz := glusterHazards(Mount{Point: point, FSType: "fuse.glusterfs", Source: "host:v"})
	g := Guard{Hazards: hz}
	unsafe := g.Unsafe()
	if len(unsafe) != 1 || strings.Join(unsafe[0].Options, ",") != "performance.open-behind,performance.quick-read,performance.stat-prefetch" {
		t.Fatalf("unsafe hazards %+v, want one naming the three options", unsafe)
	}
	if len(unsafe[0].What) > 400 {
		t.Errorf("the hazard's text is %d bytes: it must fit a bounded message with its context", len(unsafe[0].What))
	}
	if n, _ := g.MaxWriters(); n != 1 {
		t.Errorf("writers bounded at %d with the default 2 event threads, want 1", n)
	}
	volfile := "volume v-client-0\n    type protocol/client\n    option event-threads 6\nend-volume\n" +
		"volume v-client-1\n    type protocol/client\n    option event-threads 5\nend-volume\n"
	if err := os.WriteFile(filepath.Join(point, ".meta", "graphs", "active", "volfile"), []byte(volfile), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, _ := (Guard{Hazards: glusterHazards(Mount{Point: point, Source: "host:v"})}).MaxWriters(); n != 4 {
		t.Errorf("writers bounded at %d with 5 event threads, want 4", n)
	}
	safe := fakeGraph(t, map[string]string{"v-client-0": "protocol/client", "v": "debug/io-stats"})
	if u := (Guard{Hazards: glusterHazards(Mount{Point: safe, Source: "host:v"})}).Unsafe(); len(u) != 0 {
		t.Errorf("a client graph without caching translators is unsafe: %+v", u)
	}
	// A graph that cannot be read is not known to be unsafe.
	if u := (Guard{Hazards: glusterHazards(Mount{Point: t.TempDir(), Source: "host:v"})}).Unsafe(); len(u) != 0 {
		t.Errorf("an unreadable graph is reported unsafe: %+v", u)
	}
	// A root on a filesystem no rule names costs a statfs and finds nothing.
	if g := Inspect(filepath.Join(t.TempDir(), "not", "yet")); len(g.Hazards) != 0 || g.Mount.FSType != "" {
		t.Errorf("Inspect of a local directory: %+v", g)
	}
}

// namedNFSClient makes the guard see this client's NFSv4 name as host
// with unique ID id, for the test's duration.
func namedNFSClient(t *testing.T, host, id string) {
	old := nfsIdentity
	nfsIdentity = func() (string, string) { return host, id }
	t.Cleanup(func() { nfsIdentity = old })
}

func TestNFSHazards(t *testing.T) {
	namedNFSClient(t, "node17", "")
	const (
		v3     = "rw,vers=3,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,mountaddr=10.77.0.1,mountvers=3,mountport=20048,mountproto=udp,local_lock=none,addr=10.77.0.1"
		v3nl   = "rw,vers=3,rsize=1048576,wsize=1048576,namlen=255,hard,nolock,proto=tcp,timeo=600,retrans=2,sec=sys,mountaddr=10.77.0.1,mountvers=3,mountport=20048,mountproto=udp,local_lock=all,addr=10.77.0.1"
		v3fl   = "rw,vers=3,hard,proto=tcp,sec=sys,local_lock=flock,addr=10.77.0.1"
		v42    = "rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.77.0.2,local_lock=none,addr=10.77.0.1"
		v41pos = "rw,vers=4.1,hard,proto=tcp,sec=sys,clientaddr=10.77.0.2,local_lock=posix,addr=10.77.0.1"
	)
	for _, tc := range []struct {
		name, typ, src, opts string
		unsafe               []string // each hazard's Options
		mention              []string // in the hazards' What
	}{
		{"v3", "nfs", "srv:/export", v3, nil, nil},
		{"v3 nolock", "nfs", "srv:/export", v3nl, []string{"local_lock=none"}, []string{"nolock", "/scratch"}},
		{"v3 local flock", "nfs", "srv:/export", v3fl, []string{"local_lock=none"}, []string{"local_lock=flock"}},
		{"v4.2", "nfs4", "srv:/", v42, nil, nil},
		{"v4.1 local posix", "nfs4", "srv:/", v41pos, []string{"local_lock=none"}, []string{"local_lock=posix"}},
		{"vers=4 typed nfs", "nfs", "srv:/", "rw,vers=4.0,local_lock=none", nil, nil},
	} {
		line := "41 25 0:38 / /scratch rw,relatime shared:20 - " + tc.typ + " " + tc.src + " " + tc.opts + "\n"
		m, ok := FindMount(strings.NewReader(line), "/scratch/table")
		if !ok || m.FSType != tc.typ {
			t.Fatalf("%s: FindMount = %+v, %v", tc.name, m, ok)
		}
		var rule *guardRule
		for i, r := range guardRules {
			if r.FSType == m.FSType && r.Magic == 0x6969 {
				rule = &guardRules[i]
			}
		}
		if rule == nil {
			t.Fatalf("%s: no guard rule for NFS type %s", tc.name, m.FSType)
		}
		g := Guard{Mount: m, Hazards: rule.Hazards(m)}
		u := g.Unsafe()
		var got []string
		what := ""
		for _, h := range u {
			got = append(got, strings.Join(h.Options, ","))
			what += h.What + "\n"
			if len(h.What) > 400 {
				t.Errorf("%s: the hazard's text is %d bytes: it must fit a bounded message with its context", tc.name, len(h.What))
			}
		}
		if strings.Join(got, ";") != strings.Join(tc.unsafe, ";") {
			t.Errorf("%s: unsafe hazards %q, want %q:\n%s", tc.name, got, tc.unsafe, what)
		}
		for _, w := range tc.mention {
			if !strings.Contains(what, w) {
				t.Errorf("%s: the hazards do not say %q:\n%s", tc.name, w, what)
			}
		}
		if n, _ := g.MaxWriters(); n != 0 {
			t.Errorf("%s: NFS bounds the writers at %d", tc.name, n)
		}
	}
}

// A client without a name of its own: NFSv4 is unsafe there (the server
// takes clients of one name for one), NFSv3 is not; a unique ID names it.
func TestNFSUnnamedClient(t *testing.T) {
	line := "41 25 0:38 / /scratch rw,relatime shared:20 - nfs4 srv:/ rw,vers=4.2,hard,proto=tcp,local_lock=none,addr=10.77.0.1\n"
	v3 := "41 25 0:38 / /scratch rw,relatime shared:20 - nfs srv:/export rw,vers=3,hard,proto=tcp,local_lock=none,addr=10.77.0.1\n"
	for _, tc := range []struct {
		host, id, line string
		unsafe         bool
	}{
		{"(none)", "", line, true},
		{"localhost", "", line, true},
		{"", "", line, true},
		{"(none)", "4a8e2b1c-node", line, false},
		{"node17", "", line, false},
		{"(none)", "", v3, false},
	} {
		namedNFSClient(t, tc.host, tc.id)
		m, ok := FindMount(strings.NewReader(tc.line), "/scratch/table")
		if !ok {
			t.Fatalf("FindMount %q", tc.line)
		}
		g := Guard{Mount: m, Hazards: nfsHazards(m)}
		u := g.Unsafe()
		if (len(u) > 0) != tc.unsafe {
			t.Errorf("%s, host %q id %q: unsafe hazards %+v, want unsafe=%v", m.FSType, tc.host, tc.id, u, tc.unsafe)
		}
		if tc.unsafe && (!strings.Contains(u[0].What, "nfs4_unique_id") || !strings.Contains(u[0].What, fmt.Sprintf("%q", tc.host))) {
			t.Errorf("host %q: the hazard does not name the hostname and the fix: %s", tc.host, u[0].What)
		}
		if c := nfsCheck(m); c.Pass == tc.unsafe {
			t.Errorf("host %q id %q %s: client-caches pass=%v", tc.host, tc.id, m.FSType, c.Pass)
		}
	}
}

func TestNFSCheck(t *testing.T) {
	namedNFSClient(t, "node17", "")
	for _, tc := range []struct {
		opts, typ string
		pass      bool
	}{
		{"rw,vers=3,hard,proto=tcp,local_lock=none,addr=10.77.0.1", "nfs", true},
		{"rw,vers=3,hard,nolock,proto=tcp,local_lock=all,addr=10.77.0.1", "nfs", false},
		{"rw,vers=4.2,hard,proto=tcp,local_lock=none,addr=10.77.0.1", "nfs4", true},
		{"rw,vers=4.2,hard,proto=tcp,local_lock=posix,addr=10.77.0.1", "nfs4", false},
	} {
		c, ok := clientCheck(Mount{Point: "/scratch", FSType: tc.typ, Source: "srv:/export", Options: tc.opts})
		if !ok || c.Name != "client-caches" || c.Pass != tc.pass {
			t.Errorf("%s %s: check %+v (%v), want pass=%v", tc.typ, tc.opts, c, ok, tc.pass)
		}
	}
}
