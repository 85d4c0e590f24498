package commands

import (
	"fmt"
	"strings"

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

// commonFlags are accepted by every subcommand after its name (docs/design.md#cli).
func commonFlags() []cli.Flag {
	return []cli.Flag{
		settingFlag("root"),
		&cli.StringFlag{Name: "config", Usage: "TOML configuration file (env LEASE_CONFIG, else ./lease.toml, else $XDG_CONFIG_HOME/lease/config.toml)", TakesFile: true},
		settingFlag("owner"),
		settingFlag("ttl"),
		&cli.Float64Flag{Name: "now", Usage: "use this clock (seconds since the epoch, finite, >= 0) instead of the system's", DefaultText: "the system clock"},
		settingFlag("lock-timeout"),
		&cli.BoolFlag{Name: "json", Usage: "print one JSON document with every result, the counts and the statistics instead of text"},
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
		settingFlag("sync"),
		settingFlag("mpi-timeout"),
	}
}

func flags(sets ...[]cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}

// withJSON is fl with the usage of --json replaced: for the commands whose
// JSON is not one document of results (status and fsck stream lines,
// qualify prints its proof, run a summary on stderr).
func withJSON(fl []cli.Flag, usage string) []cli.Flag {
	out := make([]cli.Flag, len(fl))
	for i, f := range fl {
		out[i] = f
		if f.Names()[0] == "json" {
			out[i] = &cli.BoolFlag{Name: "json", Usage: usage}
		}
	}
	return out
}

// placeholders name the values of flags whose usage has no `placeholder`,
// in --help and in the man pages alike.
var placeholders = map[string]string{
	"root": "DIR", "config": "FILE", "owner": "NAME", "ttl": "SECONDS", "now": "SECONDS",
	"lock-timeout": "SECONDS", "target-timeout": "SECONDS", "renew-interval": "SECONDS", "grace": "SECONDS",
	"mpi-timeout": "SECONDS", "shards": "N", "target-shards": "N", "writers": "N", "sync": "auto|record|syncfs", "clock-skew": "SECONDS", "max-attempts": "N", "max-wait": "SECONDS", "failed": "[STATUS]",
	"rounds": "N", "max-skew": "SECONDS", "progress": "WHEN", "wait": "[SECONDS]", "output": "FILE",
}

// FlagPlaceholder is the name of the value of the flag named name ("DIR"
// for root), "" when its usage names it or it has none.
func FlagPlaceholder(name string) string { return placeholders[name] }

// urfaveFlagString is urfave's rendering of a flag in --help.
var urfaveFlagString = cli.FlagStringer

// flagString renders a flag in --help as the man pages do: its value
// named (--root DIR, not --root value), and no "(default: false)" on a
// switch.
func flagString(f cli.Flag) string {
	s := urfaveFlagString(f)
	names, usage, ok := strings.Cut(s, "\t")
	if !ok {
		return s
	}
	if ph := FlagPlaceholder(f.Names()[0]); ph != "" {
		names = strings.ReplaceAll(names, " value", " "+ph)
	}
	if _, isBool := f.(*cli.BoolFlag); isBool {
		usage = strings.TrimSuffix(usage, " (default: false)")
	}
	return names + "\t" + usage
}

// flagValues are the values of flags that take one of a few words, for the
// shell completions.
var flagValues = map[string][]string{
	"progress": {"auto", "always", "never"},
	"sort":     {"id", "expires", "owner", "status"},
	"state":    {"queued", "leased", "committing", "released", "done", "failed"},
	"output":   {"table", "wide", "id", "id-token", "json"},
	"shared":   {"group", "all", "0660", "0664"},
}

// FlagValues are the words the value of the flag named name is one of,
// nil when it is free.
func FlagValues(name string) []string { return flagValues[name] }
