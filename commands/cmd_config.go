package commands

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/config"
)

var configCommand = &cli.Command{
	Name:      "config",
	Usage:     "show the effective settings and where each came from",
	ArgsUsage: " ",
	Description: "Prints every setting as `key = value  # origin`, where origin is the flag, the\n" +
		"environment variable, the FILE:LINE of the TOML configuration, or the default (with the\n" +
		"formula of a derived default). Precedence: flags > environment > file > defaults.\n" +
		"The configuration file is --config FILE, else $LEASE_CONFIG, else ./lease.toml, else\n" +
		"$XDG_CONFIG_HOME/lease/config.toml; its keys are the keys printed here. It must be a regular\n" +
		"file of at most 1 MiB: a FIFO, a device (LEASE_CONFIG=/dev/zero) or a bigger file is a\n" +
		"configuration error naming it (exit 2, at once: it is opened without blocking), in every command.",
	Flags:  flags(withJSON(commonFlags(), "print the settings as one JSON object of {value, origin} by key"), []cli.Flag{settingFlag("writers"), settingFlag("sync"), settingFlag("renew-interval"), settingFlag("mpi-timeout"), settingFlag("grace"), settingFlag("max-wait")}),
	Action: runConfig,
}

// configManual is the hand-written part of lease-config(1).
var configManual = Manual{
	Exit: simpleExit,
	Examples: []Example{
		{"Show the effective settings and where each came from:", "lease config"},
		{"Check a configuration file:", "lease config --config campaign.toml"},
	},
	SeeAlso: []string{"lease-format(5)"},
}

func init() {
	register(&Descriptor{Rank: 150, Command: configCommand, Manual: configManual, Launch: Once})
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
	value := func(key string) any {
		if key == "root" {
			return e.root()
		}
		return s.Value(key)
	}
	if e.json {
		type entry struct {
			Value  any    `json:"value"`
			Origin string `json:"origin"`
		}
		doc := map[string]any{}
		for _, d := range config.All {
			doc[d.Key] = entry{value(d.Key), s.Origin(d.Key)}
		}
		doc["config_file"] = s.File
		return json.NewEncoder(e.out).Encode(doc)
	}
	if s.File != "" {
		fmt.Fprintf(e.out, "# config file: %s\n", s.File)
	}
	for _, d := range config.All {
		var v string
		switch x := value(d.Key).(type) {
		case string:
			v = strconv.Quote(x)
		case float64:
			v = strconv.FormatFloat(x, 'g', -1, 64)
		default:
			v = fmt.Sprint(x)
		}
		fmt.Fprintf(e.out, "%-15s = %-28s # %s\n", d.Key, v, s.Origin(d.Key))
	}
	return nil
}
