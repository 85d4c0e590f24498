package commands

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/cluster"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/mpi"
	"github.com/leasetool/lease/qualify"
)

var qualifyCommand = &cli.Command{
	Name:      "qualify",
	Usage:     "prove the table's filesystem (and, under mpirun, the cluster) fit for leases",
	ArgsUsage: " ",
	Description: "Runs, in a scratch directory ROOT/.qualify.<nonce> removed afterwards, the checks a lease\n" +
		"table depends on: what the mount tells (the filesystem, from /proc/self/mountinfo; on a\n" +
		"GlusterFS FUSE mount the client translators whose caches serve stale records across clients, on\n" +
		"CephFS the client settings that let an evicted client write on, on NFS the version and whether\n" +
		"locks reach the server), the inodes left (statfs: free\n" +
		"of total and the items they hold, two each: a queue entry and a record; fails only when none is\n" +
		"free), O_EXCL create, atomic rename-over, file fsync, directory fsync, fcntl lock\n" +
		"exclusion against a real second process, lock release when that holder is killed, and the\n" +
		"clock skew between this host and the filesystem's timestamps (mtime of a fresh file).\n" +
		"Under mpirun (built with -tags mpi) it also gathers the membership (rank, host), runs\n" +
		"--rounds rounds in which one rank holds the qualification lock while every other rank must\n" +
		"fail to take it (contention) and must read the holder's identity record (identity), then the\n" +
		"holder releases and the next rank must acquire it (release), times the slowest read of the\n" +
		"holder's record by another rank (cross-client-read: reported, never failed), and measures the\n" +
		"clock skew between ranks. It prints a verdict line per check (ok or FAIL, the check, what it measured)\n" +
		"and a summary line: `qualified: N of N checks passed` or `NOT qualified: ...`. With --json it\n" +
		"prints instead the JSON proof (rank 0 prints it; every rank agrees on it):\n" +
		"{members, clean, verified, rounds, contention, release, identity, max_clock_skew_s, checks, error}.\n" +
		"A proof with fewer members than the tasks the launcher started is not verified.\n" +
		"Exit 0 only when verified; 1 when a check failed.",
	Flags: flags(withJSON(commonFlags(), "print the JSON proof (identical on every rank) instead of the report"), []cli.Flag{
		&cli.IntFlag{Name: "rounds", Value: 4, Usage: "lock rounds across ranks under mpirun"},
		&cli.Float64Flag{Name: "max-skew", Value: 2, Usage: "largest clock skew in seconds that still qualifies"},
		settingFlag("mpi-timeout"),
		settingFlag("sync"),
		&cli.StringFlag{Name: "hold-lock", Hidden: true, Usage: "internal: hold the lock of byte 0 of FILE until killed"},
	}),
	Action: runQualify,
}

// qualifyManual is the hand-written part of lease-qualify(1).
var qualifyManual = Manual{
	More: `A filesystem whose client caches serve a record that another client replaced, even under the
record's lock, lets two holders get the same token, and no check on one node sees it: only ranks on
different nodes (mpirun with ranks on two clients) read the stale records. So on a GlusterFS FUSE
mount qualify also reads the client's active translator graph (MOUNT/.meta/graphs/active) and fails
the ` + "`client-caches`" + ` check when open-behind, quick-read, md-cache, io-cache or nl-cache is loaded,
naming the ` + "`gluster volume set`" + ` commands that remove them; remount the clients afterwards.
On CephFS the same check reads the client's settings (ceph-fuse: from its admin socket when qualify
may connect to it, else from its command line and ceph.conf; the kernel client: its mount options)
and fails on client_reconnect_stale=true (ceph-fuse) or recover_session=clean (kernel): a client the
MDS evicted then reconnects by itself, and a lease process that lost its lock with the eviction writes
on.

What qualify found on each filesystem tried (Linux 6.18, this project's tests):

- ext4 (the root filesystem and loop-mounted) and xfs (loop-mounted): verified.

- FUSE (lease-faultfs, the stand-in for a network filesystem): verified; with its locks broken on
purpose, lock-exclusion fails.

- GlusterFS 10.3, 2 x 2 distributed-replicate, two FUSE clients, default options: not qualified.
client-caches fails on every rank (open-behind, quick-read and md-cache are loaded); under mpirun with
two ranks on each client, identity was 13 of 24 (stale reads of the holder's record). lease itself,
on those defaults, granted the same token twice in 6 of 6 expiry sequences through the two clients
and 17 times in 5 race rounds of 8 processes over 32 IDs: do not run a table there.

- GlusterFS 10.3, the same volume with performance.open-behind, performance.stat-prefetch and
performance.quick-read off: verified on each client and under mpirun with ranks on both (contention,
identity and release all complete); 30 race rounds of 8 processes through both clients, 0 double
grants, 0 token regressions.

- GlusterFS 10.3, either options: a lease process killed (kill -9, a job's time limit) while more of its
lock requests were in flight than the client has event threads (client.event-threads, 2 by default)
deadlocked that client for good: every later call on the mount hung, until the client process was killed
and the volume remounted (gluster issue 4371: each interrupted lock request holds an event thread until
an answer that needs a free one; 10.3 has no --fuse-setlk-handle-interrupt=no). A renew-batch with 64
writers killed part way hung the mount in 1 of 2 runs here; with --writers 1 it never did (5 of 5).
On a GlusterFS FUSE mount lease therefore runs batches with fewer writers than the client's event threads
(client.event-threads - 1, read from the client's volfile) unless --writers or LEASE_WRITERS sets them
(raising client.event-threads above the writers should also avoid it, by the issue's analysis; not tried
here). lease init refuses a volume whose client loads the caching translators above (--force overrides it,
recorded in TABLE), and every command warns once on a table there: see lease-init(1), UNSAFE FILESYSTEMS.

- CephFS (Ceph 16.2.15, one MDS, one memstore OSD, two ceph-fuse clients on one machine), default
settings: verified through either client and under mpirun with two ranks on each client (contention,
identity and release all complete); 30 race rounds of 8 processes through both clients, 0 double grants,
0 token regressions; a campaign of 8 lease run --next workers on both clients with two worker trees
killed, every item done once. The settings that cache more or invalidate less change nothing for lease
(client_force_lazyio, client_cache_size, client_caps_release_delay, fuse_use_invalidate_cb=false: 10 race
rounds each, 0 double grants): ceph-fuse gives the kernel no dentry or attribute timeouts and lease never
rewrites a file in place. client_reconnect_stale=true is unsafe: after ` + "`ceph tell mds.* client evict`" + ` of
one client, the other got the lock and the evicted one's next write and rename still went through (with
the default it failed with ESHUTDOWN); client-caches fails there. recover_session=clean, the kernel
client's counterpart, is flagged by its documentation (no kernel client here to try it).

- CephFS, speed: the MDS answers most requests before their journal entry is written and writes its
journal when something waits for it or at its tick (mds_tick_interval, 5 s). A record that one client
wrote last is read through another only after the MDS took the first client's caps back and journaled
that: until the next tick. lease asks the MDS to write its journal now when a read is still in flight a
few milliseconds in (a touch and fsync of the table root: a setattr at the MDS). A renew-batch of 1,024
leases through one client right after the other renewed them took 276 s before, and 10.1 s after against
6.7 s for the same batch repeated through one client (bench/ceph, K = 16); a claim through one client of an
ID the other had just released, 3.2 s before and 49 ms after. cross-client-read shows the slowest such read.
No client setting shortens the wait (client_caps_release_delay=0 did not); mds_tick_interval on the MDS does
(at 0.5 s the lease before the kick renewed 256 leases through the other client in 3.7 s against 1.0 s),
and it is what programs other than lease need, since they still wait up to the tick to read a file another
client has just renamed into place (a result in public/).

- NFS (Linux 6.1 knfsd exporting a tmpfs, two Linux 6.1 clients, User-Mode Linux kernels on one
machine; scripts/nfs-race.sh, 4 processes locking, reading and rewriting one record through both
clients): NFSv3 wrote no token twice. On NFSv4.2 a plain open under the lock read a renamed-over
record 4 and 5 times in 320 writes (the client opens a cached name by its old file handle); lease
makes the client revalidate the record's directory once its lock is granted: 0 of 320 and 0 of 640.
Two NFSv4 clients of one name (both "(none)") are one client to the server, which dropped one's locks
("lost N locks"): 130 of 320 tokens written twice. client-caches fails on an NFSv4 client with a
default hostname and no nfs.nfs4_unique_id, and on a mount whose locks stay in the client (nolock,
local_lock= other than none), and lease init refuses such a filesystem. Measured with a second mount of
the export in each client: on NFSv3 with nolock a lock held through one client was granted through the
other, and qualify through each client failed client-caches (exit 1); on NFSv4.2 the client ignores
local_lock=all (the mount shows local_lock=none), the locks exclude across clients and qualify verifies.
A file removed while a process of its client has it open becomes .nfs and hex digits until closed:
lease fsck reports it as an nfs-silly-rename notice and leaves it. Through a soft mount
(soft,timeo=10,retrans=2) with knfsd stopped for about 2 minutes, every lease command that failed
exited 4 (NFSv3 and NFSv4.2), none reported a success that was not on the server, and lease fsck
--repair settled what the failures left (temp files); but on NFSv3 a command holding a record's lock
when the server went away waited in the kernel's unlock (NLM, sent until the server answers, soft or
not). qualify does not fail a soft mount, but hard (the default) waits for the server where soft turns
its restart into failed commands to retry. See docs/safety.md (NFS).

- Lustre: not tried here; qualify reports the mount but has no client-cache rule for it, so run it
under mpirun with ranks on different clients.`,
	Examples: []Example{
		{"Check that the filesystem holding the table is fit (exit 1 when it is not):", "lease qualify --root /scratch/campaign/table"},
		{"Keep the proof for the campaign's records:", "lease qualify --json > proof.json"},
		{"Check a whole cluster before a campaign (built with MPI support):", "mpirun -np 16 --map-by node lease qualify --rounds 8 --json > proof.json"},
		{"Make a GlusterFS volume fit, then remount its clients and qualify again:", "gluster volume set VOL performance.open-behind off\ngluster volume set VOL performance.stat-prefetch off\ngluster volume set VOL performance.quick-read off"},
	},
	SeeAlso: []string{"lease-format(5)"},
}

func init() {
	register(&Descriptor{Rank: 160, Command: qualifyCommand, Manual: qualifyManual, Launch: Distributed})
}

func runQualify(c *cli.Context) error {
	if p := c.String("hold-lock"); p != "" {
		if err := qualify.HoldLock(c.Context, p, c.App.Writer); err != nil {
			return cli.Exit(leasefmt.Bound(err.Error()), exitcode.LockTimeout)
		}
		return nil
	}
	rounds := c.Int("rounds")
	if rounds < 1 || rounds > 10000 {
		return usageErr("--rounds %d: want 1 to 10000", rounds)
	}
	maxSkew := c.Float64("max-skew")
	if err := leasefmt.CheckTime("--max-skew", maxSkew); err != nil {
		return usageErr("%v", err)
	}
	e, w, setErr, err := joinWorld(c)
	if err != nil {
		return err
	}
	defer w.Finalize()
	if err := cluster.Agree(w, setErr, exitOf); err != nil {
		return ranked(c, w, err)
	}
	p := qualify.Run(e.ctx(), w, e.root(), qualify.Options{Rounds: rounds, MaxSkew: maxSkew, Holder: lockHolder, Sync: e.set.Sync})
	shortOfMembers(&p, launch())
	doc, _ := json.Marshal(p)
	// Rank 0's proof is the proof: broadcast it so every rank agrees on
	// the verdict; rank 0 alone prints it (the others' stdout is
	// discarded), so that `mpirun lease qualify --json > proof.json`
	// writes one document.
	if out, err := w.Bcast(0, doc); err == nil {
		doc = out
	}
	var agreed qualify.Proof
	decoded := json.Unmarshal(doc, &agreed) == nil
	if !decoded {
		agreed = p
	}
	printProof(e.out, agreed, doc, e.json, e.root())
	if !decoded || !agreed.Verified {
		return cli.Exit("", exitcode.Negative)
	}
	return nil
}

// lockHolder is the second process of qualify's lock checks: this lease
// binary, as a plain single process, running qualify --hold-lock FILE.
func lockHolder(file string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, "qualify", "--hold-lock", file)
	cmd.Env = withoutLauncher(os.Environ())
	return cmd
}

// withoutLauncher drops the launcher's variables so that a helper process
// runs as a plain single process.
func withoutLauncher(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "OMPI_") || strings.HasPrefix(kv, "PMIX_") || strings.HasPrefix(kv, "PMI_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// shortOfMembers fails a proof that has fewer members than the tasks the
// launcher started: a proof of some of them is not a proof of the job.
func shortOfMembers(p *qualify.Proof, l mpi.Launch) {
	if !l.Started || l.Size <= len(p.Members) {
		return
	}
	p.Verified = false
	msg := fmt.Sprintf("%d members, but %s started %d %s", len(p.Members), l.Launcher, l.Size, l.Unit())
	if l.Mode == "off" {
		msg += " (" + mpi.ModeEnv + "=off: every task qualified on its own)"
	}
	if p.Error != "" {
		msg = p.Error + "; " + msg
	}
	p.Error = leasefmt.Bound(msg)
}
