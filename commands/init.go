package commands

import (
	"encoding/json"
	"fmt"

	"github.com/urfave/cli/v2"
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
		"fixed when the table is created.",
	Flags:  withJSON(commonFlags(), "print the table's root, shard counts and creation time as one JSON object"),
	Action: runInit,
}

// initManual is the hand-written part of lease-init(1).
var initManual = Manual{
	Examples: []Example{
		{"Create a table with 64 work shards on a shared filesystem:", "lease init --root /scratch/campaign/table --shards 64"},
		{"Check that an existing table has the shard count a script expects (exit 2 if not):", "lease init --shards 64"},
	},
	SeeAlso: []string{"lease-config(1)", "lease-fsck(1)"},
}

func runInit(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErr("init takes no arguments")
	}
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	st, err := e.open(true)
	if err != nil {
		return err
	}
	if e.json {
		return json.NewEncoder(e.out).Encode(map[string]any{"root": st.Root, "work_shards": st.Table.WorkShards,
			"target_shards": st.Table.TargetShards, "created_at": st.Table.CreatedAt})
	}
	fmt.Fprintf(e.out, "lease table at %s: %d work shards, %d target shards\n", st.Root, st.Table.WorkShards, st.Table.TargetShards)
	return nil
}
