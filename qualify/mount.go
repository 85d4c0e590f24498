package qualify

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Mount is the mount that holds a table root, as /proc/self/mountinfo
// describes it.
type Mount struct {
	Point   string // mount point
	FSType  string // e.g. ext4, nfs4, fuse.glusterfs
	Source  string // e.g. /dev/sda1, server:/export, host:volume
	Options string // the superblock's options
}

// FindMount returns the mount holding path (the longest mount point that
// contains it) from a mountinfo listing.
func FindMount(mountinfo io.Reader, path string) (Mount, bool) {
	var best Mount
	found := false
	sc := bufio.NewScanner(mountinfo)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - type source superoptions
		f := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
			continue
		}
		point := unescapeMount(f[4])
		if !within(path, point) || found && len(point) < len(best.Point) {
			continue
		}
		best = Mount{Point: point, FSType: f[sep+1], Source: unescapeMount(f[sep+2])}
		if sep+3 < len(f) {
			best.Options = f[sep+3]
		}
		found = true
	}
	return best, found
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// glusterUnsafe maps the GlusterFS client translators that serve a record
// replaced through another client from this client's own caches, even
// under the record's lock, to the volume option that removes each from the
// client graph. Measured with GlusterFS 10.3 (2 x 2 volume, two FUSE
// clients, README): with open-behind, quick-read and md-cache loaded (the
// defaults) a claim through one mount granted a token the other mount had
// just granted, and a read after a successful open failed with ENOENT;
// with the three off, 0 double grants over every race round. io-cache and
// nl-cache (off by default) cache data and negative lookups across opens
// in the same way.
var glusterUnsafe = map[string]string{
	"performance/open-behind": "performance.open-behind",
	"performance/quick-read":  "performance.quick-read",
	"performance/md-cache":    "performance.stat-prefetch",
	"performance/io-cache":    "performance.io-cache",
	"performance/nl-cache":    "performance.nl-cache",
}

// GlusterTranslators lists the types of the translators of the active
// client graph of a GlusterFS FUSE mount, from the meta translator's
// virtual directory MOUNT/.meta/graphs/active/<name>/type.
func GlusterTranslators(point string) ([]string, error) {
	dir := filepath.Join(point, ".meta", "graphs", "active")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var types []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "type"))
		if err != nil {
			continue
		}
		types = append(types, strings.TrimSpace(string(b)))
	}
	if len(types) == 0 {
		return nil, fmt.Errorf("%s lists no translators", dir)
	}
	return types, nil
}

// mountChecks are the checks of what the mount of root tells: which
// filesystem it is (always passes; for the record) and, on GlusterFS,
// CephFS and NFS, whether the client is set up in a way that makes lease unsafe
// across clients (client-caches: fails, naming the options to set).
func mountChecks(root string) []Check {
	abs, err := filepath.Abs(root)
	if err == nil {
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			abs = r
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return []Check{{Name: "filesystem", Pass: true, Detail: "cannot tell the filesystem: " + err.Error()}}
	}
	defer f.Close()
	m, ok := FindMount(f, abs)
	if !ok {
		return []Check{{Name: "filesystem", Pass: true, Detail: "no mount found for " + abs}}
	}
	out := []Check{{Name: "filesystem", Pass: true, Detail: fmt.Sprintf("%s %s mounted at %s", m.FSType, m.Source, m.Point)}}
	if c, ok := clientCheck(m); ok {
		out = append(out, c)
	}
	return out
}

// clientCheck is the client-caches check of the filesystems qualify has
// rules for (GlusterFS, CephFS and NFS): whether its client is set up in a way
// that makes lease unsafe across clients.
func clientCheck(m Mount) (Check, bool) {
	switch m.FSType {
	case "fuse.glusterfs":
		return glusterCheck(m), true
	case "fuse.ceph-fuse", "ceph":
		return cephCheck(m), true
	case "nfs", "nfs4":
		return nfsCheck(m), true
	}
	return Check{}, false
}

// nfsCheck is the client-caches check of an NFS mount: the guard's NFS
// rule (nfsHazards) as a check, failing on locks local to the client and on
// an NFSv4 client without a name of its own.
func nfsCheck(m Mount) Check {
	var what []string
	for _, h := range nfsHazards(m) {
		if h.Unsafe {
			what = append(what, h.What)
		}
	}
	if len(what) > 0 {
		return Check{Name: "client-caches", Detail: strings.Join(what, "; ")}
	}
	return Check{Name: "client-caches", Pass: true, Detail: fmt.Sprintf("NFS mount %s at %s: locks at the server (%s)", m.Source, m.Point, m.Options)}
}

// glusterCheck fails when the GlusterFS client graph of m caches records
// across opens, or when the graph cannot be read.
func glusterCheck(m Mount) Check {
	vol := m.Source
	if i := strings.LastIndexByte(vol, ':'); i >= 0 {
		vol = vol[i+1:]
	}
	vol = strings.TrimPrefix(vol, "/")
	types, err := GlusterTranslators(m.Point)
	if err != nil {
		return Check{Name: "client-caches", Detail: fmt.Sprintf("GlusterFS volume %s at %s: cannot read the client's translator graph (%v), so cannot tell whether "+
			"its caches are safe; make sure %s are off (gluster volume set %s OPTION off)", vol, m.Point, err, strings.Join(sortedOptions(), ", "), vol)}
	}
	var found, opts []string
	for _, t := range types {
		if o, bad := glusterUnsafe[t]; bad {
			found = append(found, strings.TrimPrefix(t, "performance/"))
			opts = append(opts, o)
		}
	}
	if len(found) == 0 {
		return Check{Name: "client-caches", Pass: true, Detail: fmt.Sprintf("GlusterFS volume %s at %s: no client translator that caches records across opens (open-behind, quick-read, md-cache, io-cache, nl-cache are off)", vol, m.Point)}
	}
	sort.Strings(found)
	sort.Strings(opts)
	return Check{Name: "client-caches", Detail: fmt.Sprintf("GlusterFS volume %s at %s: the client loads %s, whose caches serve a record replaced through another client "+
		"from this client's copy even under the record's lock (two holders get the same token); turn them off and remount: %s",
		vol, m.Point, strings.Join(found, ", "), setCommands(vol, opts))}
}

func sortedOptions() []string {
	var o []string
	for _, v := range glusterUnsafe {
		o = append(o, v)
	}
	sort.Strings(o)
	return o
}

func setCommands(vol string, opts []string) string {
	cmds := make([]string, len(opts))
	for i, o := range opts {
		cmds[i] = fmt.Sprintf("gluster volume set %s %s off", vol, o)
	}
	return strings.Join(cmds, "; ")
}
