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
		"and changes nothing. Every other writing command creates the table the same way on first use.",
	Flags:  commonFlags(),
	Action: runInit,
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
