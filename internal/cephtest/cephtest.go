// Package cephtest brings up a real CephFS on this machine for tests: a
// one-machine Ceph cluster (one monitor with auth none, one manager, one
// memstore OSD, one MDS) and its file system mounted by two ceph-fuse
// client processes (client.a and client.b: two "nodes", each with its own
// MDS session, caps and caches).
//
// It runs the project's bring-up scripts, scripts/cephfs-up.sh and
// scripts/cephfs-down.sh, with all state under Base. One Ceph cluster
// serves the machine at a time (the daemons' ports, and a gigabyte or so
// of memory), so Up takes an exclusive lock on Lock that it holds until
// Down: the test binaries of several packages, the cluster in a box on
// CephFS and bench/ceph take turns. GlusterFS (internal/glustertest) has a
// lock of its own: the two filesystems share the machine.
package cephtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/qualify"
)

// Base holds the cluster's configuration, data, sockets, logs and mount
// points.
const Base = "/tmp/lease-ceph"

// Lock is the file whose flock(2) one Ceph cluster of the machine holds.
const Lock = "/tmp/lease-ceph.lock"

// Cluster is a running Ceph cluster with its file system mounted twice.
type Cluster struct {
	// A and B are the mount points of the two ceph-fuse clients
	// (client.a and client.b).
	A, B string
	// Log is what the bring-up scripts printed.
	Log  string
	lock *os.File
}

// Scripts returns the directory of the bring-up scripts (the repository's
// scripts/).
func Scripts() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts")
}

// Prerequisites returns why Ceph cannot be brought up here, or "".
func Prerequisites() string {
	if os.Geteuid() != 0 {
		return "a Ceph cluster needs root (its daemons' data, ceph-fuse mounts)"
	}
	for _, b := range []string{"ceph-mon", "ceph-mgr", "ceph-osd", "ceph-mds", "ceph-fuse", "ceph", "monmaptool", "mountpoint", "bc"} {
		if _, err := exec.LookPath(b); err != nil {
			return b + " not found (apt-get install -y --no-install-recommends ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common bc)"
		}
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return "/dev/fuse missing: ceph-fuse cannot mount"
	}
	return ""
}

// Script runs one of the bring-up scripts with the environment env (after
// the process's own) and returns what it printed.
func Script(ctx context.Context, name string, env []string, args ...string) (string, error) {
	return testenv.RunScript(ctx, filepath.Join(Scripts(), name), append([]string{"CEPH=" + Base}, env...), args...)
}

// TakeLock waits up to wait for the machine's Ceph lock and returns it
// held; closing the file releases it.
func TakeLock(wait time.Duration) (*os.File, error) {
	f, err := os.OpenFile(Lock, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(time.Second) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%s: %w (another Ceph cluster of this machine is up: the cluster in a box, bench/ceph or another test binary)", Lock, err)
		}
	}
}

// Up brings the cluster up from scratch (whatever an earlier run left
// under Base is purged first) with the client options clientOpts
// ("key=value ..." for every client's [client] section, "" for Ceph's
// defaults) and returns it; the caller calls Down. It waits up to 30
// minutes for the machine's Ceph lock, and fails when the prerequisites
// are missing (see Prerequisites) or the bring-up fails.
func Up(clientOpts string) (*Cluster, error) {
	if why := Prerequisites(); why != "" {
		return nil, errors.New(why)
	}
	lock, err := TakeLock(30 * time.Minute)
	if err != nil {
		return nil, err
	}
	c := &Cluster{lock: lock, A: filepath.Join(Base, "mA"), B: filepath.Join(Base, "mB")}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, _ := Script(ctx, "cephfs-down.sh", nil, "--purge")
	c.Log = out
	out, err = Script(ctx, "cephfs-up.sh", []string{"CEPH_CLIENT_OPTS=" + clientOpts})
	c.Log += out
	if err != nil {
		c.Down()
		return nil, fmt.Errorf("cephfs-up.sh: %v\n%s", err, tail(out, 2000))
	}
	return c, nil
}

// Remount unmounts both clients and mounts them again with the client
// options clientOpts ("" for Ceph's defaults); the cluster and its data
// stay.
func (c *Cluster) Remount(clientOpts string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := Script(ctx, "cephfs-down.sh", nil, "--mounts")
	c.Log += out
	if err != nil {
		return fmt.Errorf("cephfs-down.sh --mounts: %v\n%s", err, tail(out, 2000))
	}
	out, err = Script(ctx, "cephfs-up.sh", []string{"CEPH_CLIENT_OPTS=" + clientOpts})
	c.Log += out
	if err != nil {
		return fmt.Errorf("cephfs-up.sh: %v\n%s", err, tail(out, 2000))
	}
	return nil
}

// Down unmounts the clients, stops every daemon Up started and removes the
// cluster's state, then releases the lock.
func (c *Cluster) Down() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := Script(ctx, "cephfs-down.sh", nil, "--purge")
	c.Log += out
	if c.lock != nil {
		c.lock.Close()
		c.lock = nil
	}
	if err != nil {
		return fmt.Errorf("cephfs-down.sh: %v\n%s", err, tail(out, 2000))
	}
	return nil
}

// Need skips t (or fails it under LEASE_TEST_REQUIRE) when c is nil, with
// why as the reason.
func Need(t testing.TB, c *Cluster, why error) {
	t.Helper()
	if c == nil {
		msg := "CephFS is not available"
		if why != nil {
			msg += ": " + why.Error()
		}
		testenv.Missing(t, "ceph", msg)
	}
}

// Socket returns the admin socket of daemon or client name ("mds.a",
// "client.a") of the cluster under base.
func Socket(base, name string) string { return filepath.Join(base, "run", name+".asok") }

// Admin sends one command to the admin socket sock and returns the answer
// (JSON), as `ceph daemon` does (qualify.AdminCommand).
func Admin(sock string, cmd map[string]any) ([]byte, error) { return qualify.AdminCommand(sock, cmd) }

// Requests returns how many requests of each kind the MDS of the cluster
// under base has served since it started ("lookup", "create", "rename",
// "setattr", "setfilelock", ...), from its perf counters.
func Requests(base string) (map[string]int64, error) {
	b, err := Admin(Socket(base, "mds.a"), map[string]any{"prefix": "perf dump", "logger": "mds_server"})
	if err != nil {
		return nil, err
	}
	var doc struct {
		Server map[string]json.RawMessage `json:"mds_server"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for k, v := range doc.Server {
		if !strings.HasPrefix(k, "req_") || !strings.HasSuffix(k, "_latency") {
			continue
		}
		var lat struct {
			N int64 `json:"avgcount"`
		}
		if json.Unmarshal(v, &lat) == nil && lat.N > 0 {
			out[strings.TrimSuffix(strings.TrimPrefix(k, "req_"), "_latency")] = lat.N
		}
	}
	return out, nil
}

// Delta returns after minus before, kind by kind, leaving out zeros.
func Delta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
