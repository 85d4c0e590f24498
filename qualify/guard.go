package qualify

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The guard: the cheap, local part of qualify that every command can
// afford (one statfs of the root; the mount's type and options, and what
// its client shows of itself, only on a filesystem a rule names), so that
// a table is never used on a filesystem lease knows is unsafe without a
// word. lease init refuses to create a table there (unless --force), the
// other commands warn once, and batches keep their writers below what
// deadlocks the client.

// Hazard is one thing the guard found wrong with a table's filesystem.
type Hazard struct {
	// Unsafe: two clients can be granted the same lease there (lease
	// qualify fails); lease init refuses the filesystem, every command
	// warns.
	Unsafe bool
	// What says what is wrong and how to fix it, on one line.
	What string
	// Options are the settings that remove the hazard, as the
	// filesystem's administrator names them.
	Options []string
	// MaxWriters, when more than 0, is the most record writers a batch
	// may run at once there: more can deadlock the filesystem's client.
	MaxWriters int
}

// Guard is what the guard found for one table root.
type Guard struct {
	// Mount is the mount holding the root; FSType is "" when no rule
	// needed it read.
	Mount   Mount
	Hazards []Hazard
}

// Unsafe returns the hazards that make the filesystem unsafe.
func (g Guard) Unsafe() []Hazard {
	var out []Hazard
	for _, h := range g.Hazards {
		if h.Unsafe {
			out = append(out, h)
		}
	}
	return out
}

// MaxWriters is the smallest writer bound of the hazards, 0 when none
// bounds the writers.
func (g Guard) MaxWriters() (int, string) {
	n, why := 0, ""
	for _, h := range g.Hazards {
		if h.MaxWriters > 0 && (n == 0 || h.MaxWriters < n) {
			n, why = h.MaxWriters, h.What
		}
	}
	return n, why
}

// guardRule is one filesystem the guard knows.
type guardRule struct {
	// Magic is the statfs f_type of the filesystem: only a root on a
	// filesystem of a rule's magic costs more than the statfs.
	Magic int64
	// FSType is the filesystem type as /proc/self/mountinfo names it.
	FSType string
	// Hazards inspects the mount.
	Hazards func(m Mount) []Hazard
}

// fuseSuperMagic is statfs(2)'s f_type of every FUSE filesystem
// (FUSE_SUPER_MAGIC of linux/magic.h).
const fuseSuperMagic = 0x65735546

// cephSuperMagic is the statfs f_type of the kernel's CephFS client.
const cephSuperMagic = 0x00c36400

// cephHazards is the guard's CephFS rule: the client-caches check of
// qualify (cephCheck: the client's settings from its admin socket, or
// the kernel client's mount options), unsafe when it fails. CephFS's
// caches are kept coherent by the MDS's caps, and its client has no
// deadlock lease knows of: no writer bound.
func cephHazards(m Mount) []Hazard {
	c := cephCheck(m)
	if c.Pass {
		return nil
	}
	opts := strings.Split(unsafeSettings(), ", ")
	if m.FSType == "ceph" {
		opts = []string{cephKernelUnsafe}
	}
	return []Hazard{{Unsafe: true, What: c.Detail, Options: opts}}
}

// guardRules are the filesystems the guard knows, by statfs magic and
// mount type. A rule reads only what is local and cheap: the mount's
// options (Mount.Options) and what the client shows of itself; whatever
// needs a second client or a round of locks is lease qualify's. Add a row
// per filesystem type (a kernel client and a FUSE client are two).
var guardRules = []guardRule{
	{Magic: fuseSuperMagic, FSType: "fuse.glusterfs", Hazards: glusterHazards},
	{Magic: fuseSuperMagic, FSType: "fuse.ceph-fuse", Hazards: cephHazards},
	{Magic: cephSuperMagic, FSType: "ceph", Hazards: cephHazards},
	{Magic: nfsSuperMagic, FSType: "nfs", Hazards: nfsHazards},
	{Magic: nfsSuperMagic, FSType: "nfs4", Hazards: nfsHazards},
}

// nfsSuperMagic is the statfs f_type of the kernel's NFS client, every
// version (NFS_SUPER_MAGIC of linux/magic.h).
const nfsSuperMagic = 0x6969

// nfsOption returns the value of the mount option key (key=value) of an
// NFS mount's options, and whether it is there.
func nfsOption(opts, key string) (string, bool) {
	for _, o := range strings.Split(opts, ",") {
		if k, v, ok := strings.Cut(o, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// nfsHazards is the guard's NFS rule, from the mount's options and this
// client's NFSv4 name. Locks kept local to the client (nolock, local_lock=
// other than none) exclude nothing across clients: unsafe whatever the
// version. On NFSv4 a client is known to the server by its name (the
// hostname, or nfs.nfs4_unique_id): two clients of one name are one client
// to the server, which drops the locks of one when the other mounts (the
// kernel logs "lost N locks") without a word to the processes holding
// them; through two NFSv4.2 clients both named "(none)", 130 of 320
// lock/read/rename rounds wrote a token twice (docs/design.md#nfs). A
// client whose name is a default one (nfsDefaultNames) and has no unique
// ID set is unsafe; the guard cannot see the other clients' names.
// (The stale read NFSv4 also allowed is lease's to prevent, and does:
// commit/seam revalidates a record's directory once its lock is granted.)
func nfsHazards(m Mount) []Hazard {
	var out []Hazard
	vers, _ := nfsOption(m.Options, "vers")
	if m.FSType == "nfs4" || strings.HasPrefix(vers, "4") {
		if vers == "" {
			vers = "4"
		}
		if host, id := nfsIdentity(); id == "" && nfsDefaultNames[host] {
			out = append(out, Hazard{Unsafe: true, Options: []string{"nfs.nfs4_unique_id"},
				What: fmt.Sprintf("NFS mount %s at %s is NFSv%s and this client has no name of its own (hostname %q, no nfs4_unique_id): "+
					"clients of one name are one client to the server, which drops one's locks when another mounts; "+
					"give each client its own hostname or nfs.nfs4_unique_id", m.Source, m.Point, vers, host)})
		}
	}
	local := ""
	if ll, ok := nfsOption(m.Options, "local_lock"); ok && ll != "none" {
		local = "local_lock=" + ll
	}
	for _, o := range strings.Split(m.Options, ",") {
		if o == "nolock" {
			local = "nolock"
		}
	}
	if local != "" {
		out = append(out, Hazard{Unsafe: true, Options: []string{"local_lock=none"},
			What: fmt.Sprintf("NFS mount %s at %s has %s: its locks are local to the client and exclude nothing across "+
				"clients (two holders get one token); remount without nolock, with local_lock=none", m.Source, m.Point, local)})
	}
	return out
}

// nfsDefaultNames are hostnames a machine has when nobody named it: an
// NFSv4 client of such a name shares it with others.
var nfsDefaultNames = map[string]bool{"": true, "(none)": true, "localhost": true, "localhost.localdomain": true}

// nfsIdentity returns this machine's hostname and its NFSv4 client's
// unique ID ("" when none is set: the nfs module's nfs4_unique_id, or the
// network namespace's identifier of Linux 5.18 and later). A variable for
// the tests.
var nfsIdentity = func() (host, id string) {
	read := func(name string) string {
		b, _ := os.ReadFile(name)
		v := strings.TrimSpace(string(b))
		if v == "(null)" {
			return ""
		}
		return v
	}
	id = read("/sys/module/nfs/parameters/nfs4_unique_id")
	if id == "" {
		id = read("/sys/fs/nfs/net/nfs_client/identifier")
	}
	return read("/proc/sys/kernel/hostname"), id
}

// Inspect runs the guard on the filesystem holding root. root need not
// exist yet: its nearest existing ancestor is inspected (lease init checks
// before it makes anything). A filesystem no rule names costs one statfs;
// what cannot be read is no hazard (the guard only reports what it knows).
func Inspect(root string) Guard {
	var g Guard
	abs, err := filepath.Abs(root)
	if err != nil {
		return g
	}
	var st unix.Statfs_t
	for {
		err = unix.Statfs(abs, &st)
		if err == nil || !errors.Is(err, unix.ENOENT) || abs == filepath.Dir(abs) {
			break
		}
		abs = filepath.Dir(abs)
	}
	if err != nil {
		return g
	}
	var rules []guardRule
	for _, r := range guardRules {
		if r.Magic == int64(st.Type) {
			rules = append(rules, r)
		}
	}
	if len(rules) == 0 {
		return g
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return g
	}
	defer f.Close()
	m, ok := FindMount(f, abs)
	if !ok {
		return g
	}
	g.Mount = m
	for _, r := range rules {
		if r.FSType == m.FSType {
			g.Hazards = append(g.Hazards, r.Hazards(m)...)
		}
	}
	return g
}

// glusterVolume is the volume name of a GlusterFS mount's source
// (host:volume or host:/volume).
func glusterVolume(m Mount) string {
	vol := m.Source
	if i := strings.LastIndexByte(vol, ':'); i >= 0 {
		vol = vol[i+1:]
	}
	return strings.TrimPrefix(vol, "/")
}

// glusterHazards are the hazards of a GlusterFS FUSE mount: client
// translators whose caches make records stale across clients (unsafe; the
// translators of glusterUnsafe, read from the client's own graph as
// qualify's client-caches check reads them), and the client's event
// threads, below which the writers of a batch are kept: a process killed
// with as many lock requests in flight as the client has event threads
// deadlocks the client for good (gluster issue 4371).
func glusterHazards(m Mount) []Hazard {
	vol := glusterVolume(m)
	var out []Hazard
	if types, err := GlusterTranslators(m.Point); err == nil {
		var found, opts []string
		for _, t := range types {
			if o, bad := glusterUnsafe[t]; bad {
				found = append(found, strings.TrimPrefix(t, "performance/"))
				opts = append(opts, o)
			}
		}
		if len(found) > 0 {
			sort.Strings(found)
			sort.Strings(opts)
			out = append(out, Hazard{Unsafe: true, Options: opts,
				What: fmt.Sprintf("GlusterFS volume %s at %s: the client loads %s, whose caches serve records stale across clients "+
					"(two holders get one token); turn off %s (gluster volume set %s OPTION off) and remount",
					vol, m.Point, strings.Join(found, ", "), strings.Join(opts, ", "), vol)})
		}
	}
	threads := glusterEventThreads(m.Point)
	out = append(out, Hazard{MaxWriters: max(1, threads-1),
		What: fmt.Sprintf("GlusterFS volume %s at %s: its client has %d event threads (client.event-threads), and a process killed with as many "+
			"lock requests in flight deadlocks it (gluster issue 4371)", vol, m.Point, threads)})
	return out
}

// glusterDefaultEventThreads is client.event-threads when the volume does
// not set it (GlusterFS 10).
const glusterDefaultEventThreads = 2

// glusterEventThreads reads the client's event threads from the volfile of
// its active graph (MOUNT/.meta/graphs/active/volfile): the option
// event-threads of its protocol/client translators, which the volume sets
// from client.event-threads; the default when none says.
func glusterEventThreads(point string) int {
	f, err := os.Open(filepath.Join(point, ".meta", "graphs", "active", "volfile"))
	if err != nil {
		return glusterDefaultEventThreads
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) == 3 && fl[0] == "option" && fl[1] == "event-threads" {
			if v, err := strconv.Atoi(fl[2]); err == nil && v > 0 && (n == 0 || v < n) {
				n = v
			}
		}
	}
	if n == 0 {
		return glusterDefaultEventThreads
	}
	return n
}
