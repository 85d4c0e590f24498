package qualify

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cephUnsafe maps the ceph-fuse client settings that break lease's
// fencing to the value that does. A client the MDS evicted (its node was
// cut off longer than the session timeout) loses its fcntl locks there,
// and its process is not told; with the default, the evicted client is
// blocklisted and every later call on its mount fails, so a lease process
// that lost its lock can write nothing more. With client_reconnect_stale
// the client opens a new session by itself and its calls go through
// again: a renew-batch that read a record under the lock it lost renames
// its copy over the record another node has since granted (two holders).
// Measured with ceph 16.2.15 (internal/multiclient, TestCephReconnectStaleIsUnsafe:
// after the eviction the write through the evicted client failed with
// ESHUTDOWN under the defaults, and went through with the setting). The caching
// settings tried (client_oc, client_force_lazyio, client_cache_size,
// fuse_use_invalidate_cb, fuse_disable_pagecache) change nothing for lease:
// ceph-fuse gives the kernel no dentry or attribute timeouts, and lease
// never rewrites a file in place, so no cached copy of an old inode is
// ever read for a record.
var cephUnsafe = map[string]string{
	"client_reconnect_stale": "true",
}

// cephKernelUnsafe is the kernel client's counterpart: recover_session=clean
// reconnects an evicted client by itself. By the kernel's documentation
// (Documentation/filesystems/ceph.rst) its file locks are then stale and
// only the inodes that held one refuse reads and writes; lease writes a
// record through another inode (a temp file renamed over it), so that
// does not stop it. Not tried here: the test machine has no kernel client.
const cephKernelUnsafe = "recover_session=clean"

// CephClient is what qualify learned of the CephFS client of a mount.
type CephClient struct {
	// ID is the client's id in the cluster ("client4148"), from the
	// mount's virtual xattr ceph.client_id (ceph-fuse; "" on the kernel
	// client, which has none).
	ID string
	// From says where Options came from: the client's admin socket (its
	// effective settings), or its command line and configuration files
	// (settings the monitors' configuration database gives it are not
	// there), or the mount options (the kernel client).
	From string
	// Options holds the settings qualify has a rule for, as the client has
	// them; a setting it could not read is absent.
	Options map[string]string
}

// cephCheck is the client-caches check of a CephFS mount: it fails when
// the client has a setting that breaks lease (cephUnsafe), naming it.
func cephCheck(m Mount) Check {
	if m.FSType == "ceph" {
		for _, o := range strings.Split(m.Options, ",") {
			if o == cephKernelUnsafe {
				return Check{Name: "client-caches", Detail: fmt.Sprintf("CephFS kernel client of %s at %s: mounted with %s, which reconnects a client "+
					"the MDS evicted after dropping its locks, so a lease process that lost its lock writes on; remount without it (recover_session=no, the default)",
					m.Source, m.Point, cephKernelUnsafe)}
			}
		}
		return Check{Name: "client-caches", Pass: true, Detail: fmt.Sprintf("CephFS kernel client of %s at %s: no mount option qualify knows to break lease (%s is not set)", m.Source, m.Point, cephKernelUnsafe)}
	}
	c, err := CephFuseClient(m.Point)
	if err != nil {
		return Check{Name: "client-caches", Pass: true, Detail: fmt.Sprintf("CephFS (ceph-fuse) at %s: cannot read the client's settings (%v); make sure it does not run with %s",
			m.Point, err, unsafeSettings())}
	}
	var bad []string
	for k, v := range c.Options {
		if want, ok := cephUnsafe[k]; ok && cephBool(v) == cephBool(want) {
			bad = append(bad, k+"="+v)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return Check{Name: "client-caches", Detail: fmt.Sprintf("CephFS client %s at %s (settings from %s): %s reconnects the client after the MDS evicted it and dropped its locks, "+
			"so a lease process that lost its lock writes on (two holders); unset it and remount", c.ID, m.Point, c.From, strings.Join(bad, ", "))}
	}
	var known []string
	for k := range cephUnsafe {
		if v, ok := c.Options[k]; ok {
			known = append(known, k+"="+v)
		}
	}
	sort.Strings(known)
	return Check{Name: "client-caches", Pass: true, Detail: fmt.Sprintf("CephFS client %s at %s (settings from %s): no setting that breaks lease (%s); its caches are kept coherent by the MDS's caps",
		c.ID, m.Point, c.From, strings.Join(known, ", "))}
}

func unsafeSettings() string {
	var s []string
	for k, v := range cephUnsafe {
		s = append(s, k+"="+v)
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// cephBool reads a Ceph boolean setting as Ceph does.
func cephBool(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "on", "1":
		return true
	}
	return false
}

// cephName is the canonical form of a Ceph setting's name: Ceph takes
// spaces, dashes and underscores alike.
func cephName(k string) string {
	return strings.NewReplacer(" ", "_", "-", "_").Replace(strings.ToLower(strings.TrimSpace(k)))
}

// CephFuseClient finds the ceph-fuse client serving the mount at point and
// reads the settings qualify has rules for: from its admin socket when
// this process may connect to it (the client's effective settings), else
// from its command line and configuration file.
func CephFuseClient(point string) (*CephClient, error) {
	var b [128]byte
	n, err := unix.Getxattr(point, "ceph.client_id", b[:])
	if err != nil {
		return nil, fmt.Errorf("ceph.client_id: %w", err)
	}
	id := string(bytes.TrimRight(b[:n], "\x00"))
	if c, err := fromAdminSocket(id); err == nil {
		return c, nil
	}
	c, err := fromCommandLine(point)
	if err != nil {
		return nil, err
	}
	c.ID = id
	return c, nil
}

// adminSockets lists the listening admin sockets (NAME.asok) of this
// network namespace, from /proc/net/unix.
func adminSockets() []string {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 8 && strings.HasSuffix(fs[7], ".asok") && fs[5] == "01" { // 01: listening
			out = append(out, fs[7])
		}
	}
	return out
}

// fromAdminSocket asks every reachable admin socket for its status until
// one is the client id ("client4148"), and reads that client's settings.
func fromAdminSocket(id string) (*CephClient, error) {
	for _, sock := range adminSockets() {
		st, err := AdminCommand(sock, map[string]any{"prefix": "status"})
		if err != nil {
			continue
		}
		var status struct {
			ID int64 `json:"id"`
		}
		if json.Unmarshal(st, &status) != nil || fmt.Sprintf("client%d", status.ID) != id {
			continue
		}
		c := &CephClient{ID: id, From: "its admin socket " + sock, Options: map[string]string{}}
		for k := range cephUnsafe {
			v, err := AdminCommand(sock, map[string]any{"prefix": "config get", "var": k})
			if err != nil {
				return nil, err
			}
			var got map[string]string
			if json.Unmarshal(v, &got) == nil {
				if val, ok := got[k]; ok {
					c.Options[k] = val
				}
			}
		}
		return c, nil
	}
	return nil, errors.New("no admin socket of this client is reachable")
}

// AdminCommand sends one command to a Ceph admin socket and returns its
// answer (JSON): the protocol of `ceph daemon`, a JSON command ended by a
// NUL, answered by a 4-byte big-endian length and that many bytes.
func AdminCommand(sock string, cmd map[string]any) ([]byte, error) {
	conn, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	req, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(append(req, 0)); err != nil {
		return nil, err
	}
	var n uint32
	if err := binary.Read(conn, binary.BigEndian, &n); err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", sock, err)
	}
	if n > 64<<20 {
		return nil, fmt.Errorf("admin socket %s: an answer of %d bytes", sock, n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", sock, err)
	}
	return buf, nil
}

// fromCommandLine finds the ceph-fuse process whose mount point is point
// and reads the settings from its command line (--name value,
// --name=value) and from its configuration file (-c/--conf, else
// /etc/ceph/ceph.conf): the sections global, client and client.ID.
func fromCommandLine(point string) (*CephClient, error) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(raw, []byte("ceph-fuse")) {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(args[0]) != "ceph-fuse" {
			continue
		}
		conf, id, cli, mnt := "/etc/ceph/ceph.conf", "admin", map[string]string{}, ""
		for i := 1; i < len(args); i++ {
			a := args[i]
			val := func() string {
				if i+1 < len(args) {
					i++
					return args[i]
				}
				return ""
			}
			switch {
			case a == "-c" || a == "--conf":
				conf = val()
			case strings.HasPrefix(a, "--conf="):
				conf = strings.TrimPrefix(a, "--conf=")
			case a == "-i" || a == "--id":
				id = val()
			case strings.HasPrefix(a, "--id="):
				id = strings.TrimPrefix(a, "--id=")
			case a == "-n" || a == "--name":
				id = strings.TrimPrefix(val(), "client.")
			case a == "-o" || a == "-m" || a == "-r" || a == "--client_mountpoint":
				val()
			case strings.HasPrefix(a, "--"):
				k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				k = cephName(k)
				if _, rule := cephUnsafe[k]; rule {
					if !ok {
						v = "true" // a boolean given alone
						if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && (cephBool(args[i+1]) || strings.EqualFold(args[i+1], "false")) {
							v = val()
						}
					}
					cli[k] = v
				}
			case !strings.HasPrefix(a, "-"):
				mnt = a
			}
		}
		if mnt == "" || !samePath(mnt, point) {
			continue
		}
		c := &CephClient{From: "its command line and " + conf, Options: map[string]string{}}
		if f, err := os.Open(conf); err == nil {
			for k, v := range confSettings(f, id) {
				c.Options[k] = v
			}
			f.Close()
		} else {
			c.From = "its command line (" + conf + ": " + err.Error() + ")"
		}
		for k, v := range cli {
			c.Options[k] = v
		}
		return c, nil
	}
	return nil, fmt.Errorf("no ceph-fuse process of %s is visible, and no admin socket of it is reachable", point)
}

func samePath(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

// confSettings reads the settings qualify has rules for from a Ceph
// configuration file, for client id: a later section overrides an
// earlier one in the order global, client, client.ID.
func confSettings(r io.Reader, id string) map[string]string {
	rank := map[string]int{"global": 1, "client": 2, "client." + id: 3}
	best := map[string]int{}
	out := map[string]string{}
	section := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = rank[strings.TrimSpace(line[1:len(line)-1])]
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == 0 {
			continue
		}
		k = cephName(k)
		if _, rule := cephUnsafe[k]; rule && section >= best[k] {
			best[k] = section
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}
