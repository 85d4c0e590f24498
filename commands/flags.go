package commands

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/config"
)

// settingFlag is the flag of a setting of config.All, with its help and
// default from that table (written once, there).
func settingFlag(name string) cli.Flag {
	d, ok := config.Lookup(name)
	if !ok {
		panic(fmt.Sprintf("commands: no setting has the flag --%s", name))
	}
	usage := d.Usage + " (env " + d.Env + ")"
	aliases := config.FlagAliases[d.Flag]
	switch d.Kind {
	case config.Float:
		return &cli.Float64Flag{Name: d.Flag, Aliases: aliases, Usage: usage, DefaultText: d.Default}
	case config.Int:
		return &cli.IntFlag{Name: d.Flag, Aliases: aliases, Usage: usage, DefaultText: d.Default}
	}
	return &cli.StringFlag{Name: d.Flag, Aliases: aliases, Usage: usage, DefaultText: d.Default, TakesFile: d.Flag == "root"}
}

// commonFlags are accepted by every subcommand after its name (SPEC §7).
func commonFlags() []cli.Flag {
	return []cli.Flag{
		settingFlag("root"),
		&cli.StringFlag{Name: "config", Usage: "TOML configuration file (env LEASE_CONFIG, else ./lease.toml, else $XDG_CONFIG_HOME/lease/config.toml)", TakesFile: true},
		settingFlag("owner"),
		settingFlag("ttl"),
		&cli.Float64Flag{Name: "now", Usage: "use this clock (seconds since the epoch, finite, >= 0) instead of the system's", DefaultText: "the system clock"},
		settingFlag("lock-timeout"),
		&cli.BoolFlag{Name: "json", Usage: "print JSON with full detail and statistics instead of text (see the command's OUTPUT)"},
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "print statistics on stderr"},
		settingFlag("shards"),
		settingFlag("target-shards"),
		settingFlag("target-timeout"),
		settingFlag("clock-skew"),
	}
}

// batchFlags are the flags of commands that write batches.
func batchFlags() []cli.Flag {
	return []cli.Flag{
		settingFlag("writers"),
		settingFlag("mpi-timeout"),
		&cli.StringFlag{Name: "strategy", Hidden: true, Usage: "commit strategy for benchmarks: concurrent, sequential, one-at-a-time, nosync"},
	}
}

func flags(sets ...[]cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}
