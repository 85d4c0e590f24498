package docgen

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/config"
)

// flagDoc is what pages and completions need of one flag.
type flagDoc struct {
	Long  string
	Short []string
	// Aliases are the other long names (--interval for --renew-interval).
	Aliases []string
	// Values are the words the value is one of (--progress auto|always|never).
	Values []string
	Value  string // placeholder; "" for a switch
	Usage  string
	Kind   string // "dir", "file" or "" (what the value completes to)
	Hidden bool
}

// Names are the flag's names as typed: short ones first.
func (f flagDoc) Names() []string {
	var out []string
	for _, s := range f.Short {
		out = append(out, "-"+s)
	}
	if f.Long != "" {
		out = append(out, "--"+f.Long)
	}
	for _, a := range f.Aliases {
		out = append(out, "--"+a)
	}
	return out
}

func flagDocs(fl []cli.Flag) []flagDoc {
	var out []flagDoc
	for _, f := range fl {
		if f == cli.HelpFlag {
			continue // urfave adds it to a command the first time the command runs
		}
		d := flagDoc{}
		for _, n := range f.Names() {
			if len(n) == 1 {
				d.Short = append(d.Short, n)
			} else if d.Long == "" {
				d.Long = n
			} else {
				d.Aliases = append(d.Aliases, n)
			}
		}
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			d.Hidden = true
		}
		takesFile := false
		switch x := f.(type) {
		case *cli.StringFlag:
			takesFile = x.TakesFile
		case *cli.PathFlag:
			takesFile = x.TakesFile
		case *cli.StringSliceFlag:
			takesFile = x.TakesFile
		case *cli.GenericFlag:
			takesFile = x.TakesFile
		}
		if g, ok := f.(cli.DocGenerationFlag); ok {
			d.Usage = g.GetUsage()
			if g.TakesValue() {
				name, usage := unquoteUsage(d.Usage)
				d.Usage = usage
				switch {
				case name != "":
					d.Value = name
				case commands.FlagPlaceholder(d.Long) != "":
					d.Value = commands.FlagPlaceholder(d.Long)
				default:
					d.Value = "VALUE"
					switch f.(type) {
					case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
						d.Value = "N"
					case *cli.Float64Flag:
						d.Value = "NUMBER"
					}
				}
			}
		}
		d.Values = commands.FlagValues(d.Long)
		switch {
		case d.Value == "DIR":
			d.Kind = "dir"
		case takesFile || d.Value == "FILE" || d.Value == "PATH":
			d.Kind = "file"
		}
		out = append(out, d)
	}
	return out
}

// unquoteUsage takes the `placeholder` out of a flag's usage, as urfave
// does for its help.
func unquoteUsage(usage string) (string, string) {
	i := strings.IndexByte(usage, '`')
	if i < 0 {
		return "", usage
	}
	j := strings.IndexByte(usage[i+1:], '`')
	if j < 0 {
		return "", usage
	}
	name := usage[i+1 : i+1+j]
	return name, usage[:i] + name + usage[i+2+j:]
}

// ValueWords are the Values joined by spaces, for the completions.
func (f flagDoc) ValueWords() string { return strings.Join(f.Values, " ") }

// argKind says how a command's positional arguments complete (see
// commands.Manual.Args).
func (s *site) argKind(c *cli.Command) string {
	if k := s.manuals[c.Name].Args; k != "" {
		return k
	}
	u := c.ArgsUsage
	switch {
	case strings.Contains(u, "CMD"):
		return "id-cmd"
	case strings.Contains(u, "TARGET"):
		return "targets"
	case strings.HasPrefix(strings.TrimLeft(u, "["), "ID"):
		return "ids"
	case strings.Contains(u, "FILE"):
		return "files"
	}
	return "none"
}

// settingEnv is the ENVIRONMENT entry of a setting of config.All.
func settingEnv(d config.Setting) commands.Item {
	return commands.Item{Tag: d.Env, Text: sentence(fmt.Sprintf("%s (setting %s, flag --%s, default %s)", d.Usage, d.Key, d.Flag, d.Default))}
}

// envDocs lists the environment variables of the settings a command has
// flags for.
func envDocs(fl []flagDoc) []commands.Item {
	has := map[string]bool{}
	for _, f := range fl {
		has[f.Long] = true
	}
	var out []commands.Item
	for _, d := range config.All {
		if has[d.Flag] {
			out = append(out, settingEnv(d))
		}
	}
	if has["config"] {
		out = append(out, commands.Item{Tag: "LEASE_CONFIG", Text: "The TOML configuration file, when --config is not given."},
			commands.Item{Tag: "XDG_CONFIG_HOME", Text: "The configuration file $XDG_CONFIG_HOME/lease/config.toml is read when neither --config, LEASE_CONFIG nor ./lease.toml names one (default ~/.config)."})
	}
	if has["owner"] {
		out = append(out, commands.Item{Tag: "USER", Text: "The default owner is USER@HOST; USER@HOST/PID (USER@HOST/rank-N/PID under a launcher) for lease run, lease work and the Go API (leases.Open), which tell a host's workers apart."})
	}
	return out
}

// mergeItems appends more to list, joining the text of an entry whose tag
// is already there.
func mergeItems(list, more []commands.Item) []commands.Item {
	out := append([]commands.Item(nil), list...)
next:
	for _, m := range more {
		for i := range out {
			if out[i].Tag == m.Tag {
				out[i].Text += " " + m.Text
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}
