//go:build linux

package nfstest

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/powercut"
	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/internal/uml"
)

// TestNFSServerCut cuts the NFS server's power in the middle of a
// campaign: on each of NFSv3 and NFSv4.2 a server exporting an ext4 image
// (its NFS state on it too) and two client kernels (hard mounts, the
// default), each client running internal/powercut's workload (claims,
// renew-batches of a pool of 40 leases, completes, publishes, groups,
// lease work, fsck --repair) on a table of its own on the export, each
// acknowledged operation written to a file of this machine once its
// command returned. At a random moment (seeded; LEASE_NFSCUT_SEED) once
// both have renewed, every process of the server kernel is killed at once;
// a server boots again on the same image. Both workloads must carry on by
// themselves (more acknowledged operations, a renew-batch among them,
// after the restart). Then knfsd alone is stopped for 1 to 5 s in the
// running server kernel and started again (scripts/nfs-guest/knfsd
// restart: its state and exports gone, the kernel up), and both must carry
// on again. Instead of carrying on a command may fail with its error after
// the cut (logged; that client's mount must answer); a failure before the
// cut fails the test. After the workloads and the server are stopped the image,
// mounted here, must hold every acknowledged operation (powercut's
// checker: records, tokens, publishes, no token gone back, fsck, --repair,
// a clean fsck, a lease taken over with a larger token).
// LEASE_NFS_OPTS adds mount options to the clients (e.g.
// soft,timeo=10,retrans=1: the workloads' commands then fail while the
// server is away, and so does the test).
func TestNFSServerCut(t *testing.T) {
	Need(t)
	testenv.NeedTools(t, "mkfs.ext4", "mount", "umount")
	guest, err := uml.BuildGuest(powercut.GuestPackage)
	if err != nil {
		t.Fatal(err)
	}
	seed := time.Now().UnixNano() % 1e9
	if s := os.Getenv("LEASE_NFSCUT_SEED"); s != "" {
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("LEASE_NFSCUT_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (LEASE_NFSCUT_SEED=%d repeats it)", seed, seed)
	eachVersion(t, func(t *testing.T, vers, lease string) { serverCut(t, vers, lease, guest, seed) })
}

func serverCut(t *testing.T, vers, lease, guest string, seed int64) {
	ctx := Context(t)
	rng := rand.New(rand.NewSource(seed))
	dir, err := os.MkdirTemp("/var/tmp", "lease-nfscut-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	img := filepath.Join(dir, "export.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 512<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	c := UpT(t, Options{Vers: vers, Disk: img, Name: "cut", MountOpts: os.Getenv("LEASE_NFS_OPTS")})
	acks := func(i int) []byte {
		b, _ := os.ReadFile(filepath.Join(c.Clients[i].Dir(), "spool", "acks"))
		return b
	}
	for i := range c.Clients {
		// The workload's standard error goes to the spool (Start's
		// NAME.out); its pid to guest.pid for the stop.
		script := fmt.Sprintf("cd / && echo $$ > /run/spool/guest.pid && exec %s -root %s/cut%d -console /run/spool/acks -seed %d -batch 40 -shards 16 -claim-ttl %d -renew-ttl %d",
			guest, Mnt, i, seed*10+int64(i), powercut.ClaimTTL, powercut.RenewTTL)
		if err := c.Clients[i].Start(script); err != nil {
			t.Fatal(err)
		}
	}
	// wait waits until cond holds for every client's acknowledgements; a
	// workload that failed fails the test, unless failedOK: then a client
	// whose workload failed (a command that exited non-zero) is done.
	var before [2]int
	var failed [2]string
	wait := func(what string, failedOK bool, cond func(i int, b []byte) bool) {
		t.Helper()
		for {
			ok := true
			for i := range c.Clients {
				b := acks(i)
				if j := bytes.Index(b, []byte("PCFAIL")); j >= 0 {
					if !failedOK || j < before[i] {
						t.Fatalf("client %d: the workload failed (%s): %s", i, what, firstLine(b[j:]))
					}
					failed[i] = firstLine(b[j:])
					continue
				}
				ok = ok && cond(i, b)
			}
			if ok {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: %v", what, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	wait("both workloads renewing", false, func(_ int, b []byte) bool { return bytes.Contains(b, []byte("ACK renew ")) })
	time.Sleep(time.Duration(rng.Int63n(int64(5 * time.Second))))
	if err := c.CutServer(); err != nil {
		t.Fatal(err)
	}
	for i := range c.Clients {
		before[i] = len(acks(i))
	}
	t.Logf("NFSv%s: the server cut; %d and %d bytes of acknowledgements so far", vers, before[0], before[1])
	t0 := time.Now()
	if err := c.RestartServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("NFSv%s: a server booted again on the image in %.1fs", vers, time.Since(t0).Seconds())
	// The workloads carry on: a renew-batch acknowledged after the
	// restart, and 20 operations; or a command fails, with its error (a
	// call the cut interrupted may not be able to tell that it succeeded;
	// seen on NFSv4.2 before durable.Disk.Put learned it: a renew-batch's
	// rename resent to the new server answered ENOENT, the rename having
	// been made before the cut). Either way no acknowledged operation may
	// be lost (below).
	wait("the workloads after the restart", true, func(i int, b []byte) bool {
		after := b[min(before[i], len(b)):]
		return bytes.Contains(after, []byte("ACK renew ")) && bytes.Count(after, []byte("ACK ")) >= 20
	})
	t.Logf("NFSv%s: the workloads went on or failed %.1fs after the cut", vers, time.Since(t0).Seconds())
	// Then knfsd alone, restarted in the running server kernel (its
	// threads, lockd's and NFSv4's state and the exports gone for 1 to 5
	// s; rpcbind, statd, mountd and the kernel's caches stay): the
	// workloads carry on again.
	var mark [2]int
	for i := range c.Clients {
		mark[i] = len(acks(i))
	}
	down := time.Second + time.Duration(rng.Int63n(int64(4*time.Second)))
	t1 := time.Now()
	if err := c.RestartKnfsd(ctx, down); err != nil {
		t.Fatal(err)
	}
	wait("the workloads after knfsd's restart", true, func(i int, b []byte) bool {
		after := b[min(mark[i], len(b)):]
		return bytes.Contains(after, []byte("ACK renew ")) && bytes.Count(after, []byte("ACK ")) >= 20
	})
	for i := range c.Clients {
		t.Logf("NFSv%s client %d: knfsd down %.1fs; %d acknowledgement lines after its restart", vers, i, down.Seconds(), bytes.Count(acks(i)[mark[i]:], []byte("ACK ")))
	}
	t.Logf("NFSv%s: the workloads went on or failed %.1fs after knfsd's restart began", vers, time.Since(t1).Seconds())
	for i, f := range failed {
		if f == "" {
			continue
		}
		t.Logf("NFSv%s client %d: a command failed after the cut or knfsd's restart (the workload stopped there): %s", vers, i, f)
		// The client itself goes on: its mount answers.
		if out, code, err := c.Run(ctx, i, fmt.Sprintf("cat %s/cut%d/TABLE > /dev/null", Mnt, i)); err != nil || code != 0 {
			t.Errorf("NFSv%s client %d: the table after the restarts: exit %d %v: %s", vers, i, code, err, out)
		}
	}
	// Stop the workloads, then the server (a cut again: the image holds
	// what the server made durable, which the sync export makes of every
	// acknowledged write).
	for i := range c.Clients {
		if out, code, err := c.Run(ctx, i, `kill -9 $(cat /run/spool/guest.pid) 2>/dev/null; true`); err != nil || code != 0 {
			t.Fatalf("client %d: stopping the workload: exit %d %v: %s", i, code, err, out)
		}
	}
	var final [2][]byte
	for i := range c.Clients {
		final[i] = acks(i)
	}
	if err := c.CutServer(); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", "-t", "ext4", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mounting the export's image: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	for i := range c.Clients {
		res := powercut.CheckTable(final[i], filepath.Join(mnt, "export", fmt.Sprintf("cut%d", i)), lease, seed*10+int64(i))
		after := bytes.Count(final[i][before[i]:], []byte("ACK "))
		for _, l := range res.Lost {
			t.Errorf("NFSv%s client %d: lost: %s", vers, i, l)
		}
		for _, v := range res.Violations {
			t.Errorf("NFSv%s client %d: %s", vers, i, v)
		}
		if res.Acked == 0 {
			t.Errorf("NFSv%s client %d: no acknowledged operation", vers, i)
		}
		t.Logf("NFSv%s client %d: %d operations acknowledged (%d acknowledgement lines after the restart), %d lost, %d violations; fsck %d, --repair %d, fsck %d",
			vers, i, res.Acked, after, len(res.Lost), len(res.Violations), res.Fsck, res.Repair, res.After)
	}
}

func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return strings.TrimSpace(string(b))
}
