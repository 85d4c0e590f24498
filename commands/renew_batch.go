package commands

import (
	"github.com/urfave/cli/v2"
)

var renewBatchCommand = &cli.Command{
	Name:      "renew-batch",
	Usage:     "renew held leases with one shard group commit; a filter over ID TOKEN lines",
	ArgsUsage: "[FILE...]",
	Description: "Reads `ID TOKEN` lines from the FILEs or stdin, validates all of them, then renews every\n" +
		"lease whose token is current and live until now + --ttl. Records are written in (shard, ID)\n" +
		"order by a pool of concurrent writers: each record is written to a temp file, fsynced and\n" +
		"renamed over the old one, and each touched shard directory is fsynced once. stdout carries\n" +
		"exactly the lines renewed, in input order, so `lease renew-batch < held > held.new` keeps the\n" +
		"held set current; each other line goes to stderr as `REASON ID TOKEN detail`.",
	Flags:  flags(commonFlags(), batchFlags()),
	Action: runRenewBatch,
}

func runRenewBatch(c *cli.Context) error {
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	lines, err := readInput(c, c.Args().Slice())
	if err != nil {
		return err
	}
	items, err := parseItems(lines, true)
	if err != nil {
		return err
	}
	st, err := e.open(true)
	if err != nil {
		return err
	}
	res := st.Renew(items, e.now, e.set.TTL)
	return e.report("renew-batch", res, e.snapshot(st))
}
