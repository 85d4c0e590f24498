package commands

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"
)

var configCommand = &cli.Command{
	Name:      "config",
	Usage:     "show the effective settings and where each came from",
	ArgsUsage: " ",
	Description: "Prints every setting as `key = value  # origin`, where origin is the flag, the\n" +
		"environment variable, the FILE:LINE of the TOML configuration, or the default (with the\n" +
		"formula of a derived default). Precedence: flags > environment > file > defaults.\n" +
		"The configuration file is --config FILE, else $LEASE_CONFIG, else ./lease.toml, else\n" +
		"$XDG_CONFIG_HOME/lease/config.toml; its keys are the keys printed here.",
	Flags:  flags(commonFlags(), batchFlags()[:1], []cli.Flag{&cli.Float64Flag{Name: "interval"}, &cli.Float64Flag{Name: "mpi-timeout"}, &cli.Float64Flag{Name: "grace"}}),
	Action: runConfig,
}

func runConfig(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErr("config takes no arguments")
	}
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	s := e.set
	values := map[string]any{
		"root": e.root(), "owner": s.Owner, "ttl": s.TTL, "target_timeout": s.TargetTimeout,
		"renew_interval": s.RenewInterval, "shards": s.Shards, "target_shards": s.TargetShards,
		"lock_timeout": s.LockTimeout, "writers": s.Writers, "mpi_timeout": s.MPITimeout, "grace": s.Grace,
	}
	if e.json {
		type entry struct {
			Value  any    `json:"value"`
			Origin string `json:"origin"`
		}
		doc := map[string]any{}
		for _, d := range settingDefs {
			doc[d.key] = entry{values[d.key], s.Origin(d.key)}
		}
		doc["config_file"] = s.ConfigFile
		return json.NewEncoder(e.out).Encode(doc)
	}
	if s.ConfigFile != "" {
		fmt.Fprintf(e.out, "# config file: %s\n", s.ConfigFile)
	}
	for _, d := range settingDefs {
		var v string
		switch x := values[d.key].(type) {
		case string:
			v = strconv.Quote(x)
		case float64:
			v = strconv.FormatFloat(x, 'g', -1, 64)
		default:
			v = fmt.Sprint(x)
		}
		fmt.Fprintf(e.out, "%-15s = %-28s # %s\n", d.key, v, s.Origin(d.key))
	}
	return nil
}
