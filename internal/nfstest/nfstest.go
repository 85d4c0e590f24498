//go:build linux

// Package nfstest brings up NFS for the tests: an NFS server kernel
// (knfsd exporting a tmpfs) and client kernels, each a User-Mode Linux
// kernel of internal/uml with its own caches, joined by a uml_switch
// reached through a Unix socket (10.77.0.0/24 exists only on that switch:
// nothing reaches this machine's network). The guests' roles are
// scripts/nfs-guest/server and client, the ones scripts/nfs-race.sh boots
// as inits, here sourced as internal/uml setups. Commands run in a client
// through internal/uml's spool, with the NFS mount at Mnt.
package nfstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/internal/uml"
)

// Mnt is where every client kernel mounts the export.
const Mnt = "/tmp/nfs"

// Options says what cluster to bring up.
type Options struct {
	// Vers is the NFS version the clients mount: "3" or "4.2".
	Vers string
	// Clients is the number of client kernels (default 2).
	Clients int
	// LeaseTime is the server's NFSv4 lease and grace time in seconds
	// (default 10: clients wait out the grace period after the server
	// starts, 90 s by default).
	LeaseTime int
	// MountOpts are more mount options of the clients, e.g. "nolock" or
	// "local_lock=all" (comma-separated, no spaces).
	MountOpts string
	// Name tells this cluster's kernels apart (letters, digits, '-').
	Name string
	// Disk, when set, is an ext4 image the server exports instead of a
	// tmpfs, with the server's NFS state (statd's and NFSv4's records of
	// its clients) on it too: a server booted again on it (RestartServer)
	// serves what the one before had made durable.
	Disk string
}

// Cluster is a running NFS server kernel and its client kernels.
type Cluster struct {
	Opts    Options
	Server  *uml.Kernel
	Clients []*uml.Kernel // client i is 10.77.0.(i+2)
	sw      *uml.Switch
	srvCfg  uml.Config
	mu      sync.Mutex // guards Server against Close during RestartServer

	closeOnce sync.Once
	closeErr  error
}

// guestDir is scripts/nfs-guest of the checkout this package was built
// from (the guests read it through their hostfs root).
func guestDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("nfstest: cannot locate the package's source")
	}
	d := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "nfs-guest")
	if _, err := os.Stat(filepath.Join(d, "server")); err != nil {
		return "", fmt.Errorf("nfstest: the guest roles: %w", err)
	}
	return d, nil
}

// Tools are the programs of this machine the guests run (they see its
// root): the switch, knfsd's helpers, the NFS mount and lock helpers.
var Tools = []string{"uml_switch", "rpc.nfsd", "rpc.mountd", "exportfs", "mount.nfs", "rpc.statd", "rpcbind"}

// bootTimeout bounds each kernel's boot with its role: the server's knfsd
// start, a client's mount (which waits out the server's grace period). On
// this 2-core machine with a load of 40 a server took more than 2 minutes.
const bootTimeout = 8 * time.Minute

// Up starts the switch, boots the server and, once it serves, the
// clients (in parallel; each boot returns once mounted). On error nothing
// of it is left running.
func Up(ctx context.Context, o Options) (*Cluster, error) {
	if o.Vers != "3" && o.Vers != "4.2" {
		return nil, fmt.Errorf("nfstest: NFS version %q: 3 or 4.2", o.Vers)
	}
	if o.Clients == 0 {
		o.Clients = 2
	}
	if o.LeaseTime == 0 {
		o.LeaseTime = 10
	}
	if strings.ContainsAny(o.MountOpts, " \t\n") {
		return nil, fmt.Errorf("nfstest: mount options %q: no spaces", o.MountOpts)
	}
	gd, err := guestDir()
	if err != nil {
		return nil, err
	}
	name := "nfs" + strings.ReplaceAll(o.Vers, ".", "")
	if o.Name != "" {
		name += "-" + o.Name
	}
	c := &Cluster{Opts: o}
	if c.sw, err = uml.StartSwitch(ctx, name+"-sw"); err != nil {
		return nil, err
	}
	c.srvCfg = uml.Config{Name: name + "-srv", Mem: "512M", Switch: c.sw.Socket, BootTimeout: bootTimeout,
		Setup: filepath.Join(gd, "server"), Args: []string{"addr=1", "leasetime=" + strconv.Itoa(o.LeaseTime)}}
	if o.Disk != "" {
		c.srvCfg.Disks = []string{o.Disk}
		c.srvCfg.Modules = []string{"ext4"}
		c.srvCfg.Args = append(c.srvCfg.Args, "disk=1")
	}
	c.Server, err = uml.Boot(ctx, c.srvCfg)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("nfstest: the server: %w", err)
	}
	c.Clients = make([]*uml.Kernel, o.Clients)
	errs := make([]error, o.Clients)
	var wg sync.WaitGroup
	for i := range c.Clients {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			args := []string{"addr=" + strconv.Itoa(i+2), "vers=" + o.Vers}
			if o.MountOpts != "" {
				args = append(args, "opts="+o.MountOpts)
			}
			c.Clients[i], errs[i] = uml.Boot(ctx, uml.Config{Name: fmt.Sprintf("%s-c%d", name, i), Mem: "384M", BootTimeout: bootTimeout,
				Switch: c.sw.Socket, Setup: filepath.Join(gd, "client"), Args: args})
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, fmt.Errorf("nfstest: a client: %w", err)
	}
	return c, nil
}

// CutServer cuts the server kernel as a power cut does (every process of
// its session killed at once: uml.Kernel.Kill); the clients' calls to it
// wait (hard mounts) until a server answers at its address again.
func (c *Cluster) CutServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Server.Kill()
}

// RestartServer boots a server again after CutServer, on the same switch
// and address and, with Options.Disk, on the same image; it returns once
// the new server serves.
func (c *Cluster) RestartServer(ctx context.Context) error {
	if c.Opts.Disk == "" {
		return errors.New("nfstest: a server restart needs Options.Disk (the tmpfs export dies with its kernel)")
	}
	c.mu.Lock()
	old := c.Server
	c.mu.Unlock()
	if err := old.Close(); err != nil {
		return err
	}
	k, err := uml.Boot(ctx, c.srvCfg)
	if err != nil {
		return fmt.Errorf("nfstest: the server again: %w", err)
	}
	c.mu.Lock()
	c.Server = k
	c.mu.Unlock()
	return nil
}

// Run runs script with sh in client i (the export mounted at Mnt) and
// returns its output (stdout and stderr together) and exit status.
func (c *Cluster) Run(ctx context.Context, i int, script string) (string, int, error) {
	return c.Clients[i].Run(ctx, script)
}

// Close ends every process of every kernel and of the switch (their
// sessions) and removes their working directories; again, it does nothing
// and returns what the first did.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		var errs []error
		for _, k := range c.Clients {
			if k != nil {
				errs = append(errs, k.Close())
			}
		}
		c.mu.Lock()
		if c.Server != nil {
			errs = append(errs, c.Server.Close())
		}
		c.mu.Unlock()
		if c.sw != nil {
			errs = append(errs, c.sw.Close())
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// Need skips t (fails it under LEASE_TEST_REQUIRE=all or =uml) unless an
// NFS cluster can be brought up here.
func Need(t testing.TB) {
	t.Helper()
	uml.Need(t)
	testenv.NeedTools(t, Tools...)
}

// Context is a context for t's work that ends 2 minutes before go test's
// -timeout would (and when t ends): a test bounded by it fails through
// t.Fatal and its cleanups run, ending its kernels, where the -timeout's
// panic would skip them and leave the kernels running.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := d.Deadline(); ok {
			margin := 2 * time.Minute
			if time.Until(end) < 2*margin {
				margin = time.Until(end) / 4
			}
			ctx, cancel = context.WithDeadline(context.Background(), end.Add(-margin))
		}
	}
	t.Cleanup(cancel)
	return ctx
}

// UpT brings up a cluster for t and ends it (every process of it) when t
// ends, pass or fail.
func UpT(t testing.TB, o Options) *Cluster {
	t.Helper()
	Need(t)
	c, err := Up(Context(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// RestartKnfsd stops knfsd in the server kernel (its threads, with
// lockd's and NFSv4's state, and the exports: scripts/nfs-guest/knfsd
// restart, as nfs-utils' nfs-server.service does), waits down, and starts
// it again; the kernel, rpcbind, statd and mountd keep running. The
// clients' calls wait (hard mounts); a grace period follows, in which
// NFSv4 clients reclaim their state (no sm-notify is run).
func (c *Cluster) RestartKnfsd(ctx context.Context, down time.Duration) error {
	return c.knfsd(ctx, fmt.Sprintf("restart %.1f", down.Seconds()))
}

// StopKnfsd stops knfsd as RestartKnfsd does and leaves it stopped: a
// hard mount's calls wait, a soft mount's fail once their retransmissions
// are spent. StartKnfsd starts it again.
func (c *Cluster) StopKnfsd(ctx context.Context) error { return c.knfsd(ctx, "stop") }

// StartKnfsd exports and starts knfsd again after StopKnfsd.
func (c *Cluster) StartKnfsd(ctx context.Context) error { return c.knfsd(ctx, "up") }

// knfsd runs scripts/nfs-guest/knfsd with args in the server kernel.
func (c *Cluster) knfsd(ctx context.Context, args string) error {
	c.mu.Lock()
	k := c.Server
	c.mu.Unlock()
	out, code, err := k.Run(ctx, `sh "$(dirname "$UML_SETUP")/knfsd" `+args)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d: %s", code, strings.TrimSpace(out))
	}
	if err != nil {
		return fmt.Errorf("nfstest: knfsd %s: %w", args, err)
	}
	return nil
}
