package commands

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

var initCommand = &cli.Command{
	Name:      "init",
	Usage:     "create the lease table",
	ArgsUsage: " ",
	Description: "Creates the table at --root durably: the shard directories with their lock files,\n" +
		"stage/, public/, lost+found/, and last the TABLE header with the shard counts from the\n" +
		"configuration. Running it on an existing table checks that explicit shard counts agree\n" +
		"and changes nothing. Only init creates a table: every other command refuses a root without TABLE\n" +
		"(exit 2) and creates nothing there, so a mistyped --root or an unset LEASE_ROOT cannot start a\n" +
		"second, empty campaign.\n\n" +
		"Choosing --shards: on NFS, Lustre and FUSE the client holds a directory's lock for the round trip of\n" +
		"every create and rename in it, so the creates and renames in one shard happen one at a time however\n" +
		"many writers a batch has. Use at least 16 shards there (the default), more for tables of many\n" +
		"thousands of leases: renewing 16384 leases with 2 ms round trips took 85-90 s in 1 shard, 6.9-7.0 s\n" +
		"in 16 and 6.8 s in 64 (two runs: bench/results/matrix.md, matrix-dff086d.md). The shard count is\n" +
		"fixed when the table is created.\n\n" +
		"A new table also gets its reserve, ROOT/reserve/: 256 spare files of 4 KiB, written and fsynced\n" +
		"(1 MiB, 256 inodes), through which holders renew and complete their leases while the filesystem\n" +
		"is full (lease-format(5), DURABILITY). lease fsck --repair tops it up; a table without one works,\n" +
		"without that protection.",
	Flags: flags(withJSON(commonFlags(), "print the table's root, shard counts and creation time as one JSON object"), []cli.Flag{
		&cli.StringFlag{Name: "shared", Usage: "share the table with the accounts of a group: `MODE` group, all or an octal file mode such as 0660 (see SHARED TABLES)"},
		&cli.BoolFlag{Name: "force", Usage: "create the table even on a filesystem lease knows is unsafe (recorded in TABLE; see UNSAFE FILESYSTEMS)"},
	}),
	Action: runInit,
}

// initManual is the hand-written part of lease-init(1).
var initManual = Manual{
	More: "SHARED TABLES: a campaign whose workers run under several accounts needs a table they can all write: " +
		"fcntl locks need the shard lock files open for writing, and every record change creates a file in its " +
		"shard directory. `lease init --shared group` makes such a table, as `git init --shared=group` makes a " +
		"repository: the root and every directory are setgid (what is made in them gets the root's group) and " +
		"readable, writable and searchable by the group, the root and stage/ sticky (as /tmp: a member cannot rename " +
		"another's entries there, such as TABLE or a live staging directory; lease fsck --repair gives a shared table " +
		"made before this the sticky bit), lock files are writable by the group, and records and " +
		"published results readable by it. TABLE records it (\"shared\":\"group\"), so every later command, " +
		"of any account and under any umask, creates what it creates with those modes. --shared all also lets " +
		"everyone read; --shared 0660 (an octal mode) gives every file exactly that mode and every directory that " +
		"mode with x where it has r. The group is the root's: make the root in a directory of the campaign's group, " +
		"or chgrp it, before lease init. The commands of CMD under lease run keep their own umask; use umask 007 " +
		"there for staged files that others must read before they are published. The sharing is fixed when the table " +
		"is created; lease fsck checks the modes of a shared table and --repair restores them.\n\n" +
		"Without --shared a table is its owner's: another account's command that must write it stops with exit 2 " +
		"before writing anything, naming the file it cannot open and the fix.\n\n" +
		"WHO MAY DO WHAT: the owner (who ran lease init and owns the root) chooses the sharing; only the owner or root can " +
		"change the root's mode. Members of the group write the table: a member can always delete, revoke or corrupt entries " +
		"(fencing tokens, lease verify and lease fsck make it visible), and can deny service (fill the filesystem, hold the " +
		"shard locks), but nothing a member writes makes another member's lease (or root's) read, write, chmod, chown, rename " +
		"or delete anything outside the table, nor widens the table's permissions: the sharing TABLE records is bounded by the " +
		"root's mode (a member can replace TABLE, not the root's mode), never lets others write, and lease fsck reports a TABLE " +
		"that asks for more. Others get at most read access (--shared all), never a lock file: lock files are readable only by " +
		"those who may write them (0600, or 0660 when shared), so no stranger's read lock can make a writer wait. " +
		"docs/safety.md#threats has the whole account.\n\n" +
		"UNSAFE FILESYSTEMS: before it creates a table, lease init runs the cheap local checks of lease qualify on the " +
		"filesystem that would hold it (its type and mount options, and what its client shows of itself: on a GlusterFS " +
		"FUSE mount, the client's translators) and refuses a filesystem lease knows is unsafe (exit 2, nothing made), " +
		"naming the options to change: GlusterFS with open-behind, quick-read, md-cache (performance.stat-prefetch), " +
		"io-cache or nl-cache in the client, whose caches let two clients be granted the same lease; NFSv4 on a client " +
		"with no name of its own (hostname (none) or localhost and no nfs.nfs4_unique_id: the server takes clients of one " +
		"name for one client and drops the locks of one when another mounts); NFS with locks local to the client (nolock, " +
		"local_lock= other than none). --force creates the " +
		"table anyway and records it in TABLE (\"unsafe_filesystem\", see lease-format(5)); every command that opens a " +
		"table on such a filesystem warns once on stderr, forced or not. On a GlusterFS FUSE mount batches run at most " +
		"client.event-threads - 1 record writers (1 with GlusterFS's default of 2): a process killed with as many lock " +
		"requests in flight as the client has event threads deadlocks the client for good (gluster issue 4371); " +
		"--writers, LEASE_WRITERS or writers in the configuration file sets them anyway (-v says when they were capped). " +
		"lease qualify remains the proof that a filesystem is fit: the guard knows only what it can see locally.",
	Examples: []Example{
		{"Create a table with 64 work shards on a shared filesystem:", "lease init --root /scratch/campaign/table --shards 64"},
		{"Check that an existing table has the shard count a script expects (exit 2 if not):", "lease init --shards 64"},
		{"A table for the accounts of the group fuzzers:", "mkdir /scratch/campaign/table && chgrp fuzzers /scratch/campaign/table\nlease init --root /scratch/campaign/table --shared group"},
	},
	SeeAlso: []string{"lease-config(1)", "lease-fsck(1)"},
}

func init() {
	register(&Descriptor{Rank: 10, Command: initCommand, Manual: initManual, Launch: Alone})
}

func runInit(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErr("init takes no arguments")
	}
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	if c.IsSet("shared") {
		sh, err := seam.ParseSharing(c.String("shared"))
		if err != nil {
			return usageErr("%v", err)
		}
		e.share = &sh
	}
	if e.extra, err = e.initGuard(c.Bool("force")); err != nil {
		return err
	}
	_, statErr := os.Lstat(filepath.Join(e.root(), layout.TableFile))
	st, err := e.open(true)
	if err != nil {
		return err
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// A new table gets its reserve (docs/design.md#durability); an
		// existing one is left as it is.
		if _, err := st.TopUpReserve(durable.DefaultSpares); err != nil {
			return cli.Exit(leasefmt.Bound(fmt.Sprintf("table %s: cannot make the reserve of spares %s: %v", st.Root(),
				filepath.Join(st.Root(), durable.ReserveDir), durable.Describe(err))), exitcode.IO)
		}
	}
	shared := ""
	if st.Sharing() != nil {
		shared = st.Sharing().Name
	}
	if e.json {
		doc := map[string]any{"root": st.Root(), "work_shards": st.Table().WorkShards,
			"target_shards": st.Table().TargetShards, "created_at": st.Table().CreatedAt}
		if shared != "" {
			doc["shared"] = shared
		}
		return json.NewEncoder(e.out).Encode(doc)
	}
	how := ""
	if shared != "" {
		how = fmt.Sprintf(", shared (%s) by group %s", shared, groupOf(st.Root()))
	}
	fmt.Fprintf(e.out, "lease table at %s: %d work shards, %d target shards%s\n", st.Root(), st.Table().WorkShards, st.Table().TargetShards, how)
	return nil
}

// groupOf is the name of the group of path (its gid when it has no name).
func groupOf(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "?"
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "?"
	}
	gid := strconv.Itoa(int(st.Gid))
	if g, err := user.LookupGroupId(gid); err == nil {
		return g.Name
	}
	return gid
}
