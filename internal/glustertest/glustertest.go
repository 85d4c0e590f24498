// Package glustertest brings up a real GlusterFS on this machine for tests:
// one glusterd, and two 2 x 2 distributed-replicate volumes, each mounted by
// two separate FUSE client processes (two "nodes", each with its own
// caches): one volume with GlusterFS's default options and one with the
// client caches that make lease unsafe turned off (GL_SAFE=1:
// performance.open-behind, performance.stat-prefetch and
// performance.quick-read off).
//
// It runs the project's bring-up scripts, scripts/gluster-up.sh and
// scripts/gluster-down.sh, with all state under Base. Only one glusterd can
// serve a machine (brick processes fetch their volfiles from port 24007),
// so Up takes an exclusive lock on Base.lock that it holds until Down: test
// binaries of several packages, or several `go test` runs, take turns.
package glustertest

import (
	"context"
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
)

// Base holds glusterd's state, the bricks, the logs and the mount points.
const Base = "/tmp/lease-gluster"

// Volume is one GlusterFS volume and its two client mounts.
type Volume struct {
	Name string
	// Safe: the volume has open-behind, stat-prefetch and quick-read off.
	Safe bool
	// A and B are the mount points of its two FUSE clients.
	A, B string
}

// Cluster is a running GlusterFS with its two volumes.
type Cluster struct {
	Default, Safe Volume
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

// Prerequisites returns why GlusterFS cannot be brought up here, or "".
func Prerequisites() string {
	if os.Geteuid() != 0 {
		return "GlusterFS needs root (glusterd sets trusted.* xattrs on the bricks; FUSE mounts)"
	}
	for _, b := range []string{"glusterd", "gluster", "glusterfs", "mountpoint", "bc", "getent"} {
		if _, err := exec.LookPath(b); err != nil {
			return b + " not found (apt-get install -y glusterfs-server glusterfs-client bc)"
		}
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return "/dev/fuse missing: the GlusterFS FUSE client cannot mount"
	}
	return ""
}

func script(ctx context.Context, name string, env []string, args ...string) (string, error) {
	return testenv.RunScript(ctx, filepath.Join(Scripts(), name), append([]string{"GL=" + Base}, env...), args...)
}

var allMounts = "GL_MOUNTS=defA defB safeA safeB"

// Up brings GlusterFS up with both volumes, from scratch (whatever an
// earlier run left under Base is purged first), and returns it; the caller
// calls Down. It fails when the prerequisites are missing (see
// Prerequisites) or the bring-up fails.
func Up() (*Cluster, error) {
	if why := Prerequisites(); why != "" {
		return nil, errors.New(why)
	}
	if err := os.MkdirAll(filepath.Dir(Base), 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(Base+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		return nil, err
	}
	c := &Cluster{lock: lock,
		Default: Volume{Name: "leasedef", A: filepath.Join(Base, "defA"), B: filepath.Join(Base, "defB")},
		Safe:    Volume{Name: "leasesafe", Safe: true, A: filepath.Join(Base, "safeA"), B: filepath.Join(Base, "safeB")},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var log strings.Builder
	out, _ := script(ctx, "gluster-down.sh", []string{allMounts}, "--purge")
	log.WriteString(out)
	for _, v := range []struct {
		vol    Volume
		mounts string
	}{{c.Default, "defA defB"}, {c.Safe, "safeA safeB"}} {
		env := []string{"GL_VOL=" + v.vol.Name, "GL_MOUNTS=" + v.mounts}
		if v.vol.Safe {
			env = append(env, "GL_SAFE=1")
		}
		out, err := script(ctx, "gluster-up.sh", env)
		log.WriteString(out)
		if err != nil {
			c.Log = log.String()
			c.Down()
			return nil, fmt.Errorf("gluster-up.sh %s: %v\n%s", v.vol.Name, err, tail(out, 2000))
		}
	}
	c.Log = log.String()
	return c, nil
}

// Down unmounts the clients, stops every GlusterFS process Up started and
// removes the volumes and their state, then releases the lock.
func (c *Cluster) Down() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := script(ctx, "gluster-down.sh", []string{allMounts}, "--purge")
	c.Log += out
	if c.lock != nil {
		c.lock.Close()
		c.lock = nil
	}
	if err != nil {
		return fmt.Errorf("gluster-down.sh: %v\n%s", err, tail(out, 2000))
	}
	return nil
}

// Need skips t (or fails it under LEASE_TEST_REQUIRE) when c is nil, with
// why as the reason.
func Need(t testing.TB, c *Cluster, why error) {
	t.Helper()
	if c == nil {
		msg := "GlusterFS is not available"
		if why != nil {
			msg += ": " + why.Error()
		}
		testenv.Missing(t, "gluster", msg)
	}
}

// Volumes returns the volumes of c, default options first.
func (c *Cluster) Volumes() []Volume { return []Volume{c.Default, c.Safe} }

// Client returns the pid of the FUSE client process serving mount point
// mnt (from the pid file gluster-up.sh wrote), or 0.
func Client(mnt string) int {
	b, err := os.ReadFile(filepath.Join(Base, "run", filepath.Base(mnt)+".pid"))
	if err != nil {
		return 0
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	return pid
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
