package commands

// Usage errors and global options: the flags every command accepts may
// also come before the command's name (`lease --root DIR status`, as git,
// etcdctl and consul take them), and a misspelled flag is named as it is
// typed (--frist, not -frist) with the flag that was probably meant.

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/internal/suggest"
	"github.com/leasetool/lease/leasefmt"
)

// hoistGlobalFlags moves the common flags given before the command's name
// to just after it: `lease --root X status -v` runs as `lease status --root
// X -v`, so a flag after the name still wins. Anything else before the name
// (--help, --version, a flag no command has) is left where it is for the
// app to handle; so is everything when no command name follows.
//
// A flag the command does not take is an error with the command's usage
// exit status (its Descriptor's UsageExit).
func hoistGlobalFlags(app *cli.App, args []string) ([]string, int, error) {
	if len(args) < 2 {
		return args, 0, nil
	}
	common := map[string]cli.Flag{}
	for _, f := range commonFlags() {
		for _, n := range f.Names() {
			common[n] = f
		}
	}
	var hoisted []string
	i := 1
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f, ok := common[name]
		if !ok {
			return args, 0, nil // --help, --version, or a usage error for the app to report
		}
		hoisted = append(hoisted, a)
		if takesValue(f) && !hasValue {
			if i+1 >= len(args) {
				return args, 0, nil // "flag needs an argument", from the app
			}
			i++
			hoisted = append(hoisted, args[i])
		}
	}
	if len(hoisted) == 0 || i >= len(args) || args[i] == "--" {
		return args, 0, nil
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		return args, 0, nil // not a command: the app says so
	}
	for j := 0; j < len(hoisted); j++ {
		name, _, _ := strings.Cut(strings.TrimLeft(hoisted[j], "-"), "=")
		if !hasFlag(cmd, name) {
			return nil, descriptorOf(cmd.Name).usageExit(), fmt.Errorf("lease %s takes no %s (given before the command's name)", cmd.Name, dashed(name))
		}
		if f := common[name]; takesValue(f) && !strings.Contains(hoisted[j], "=") {
			j++
		}
	}
	out := make([]string, 0, len(args))
	out = append(out, args[0], args[i])
	out = append(out, hoisted...)
	return append(out, args[i+1:]...), 0, nil
}

// prepareArgs is what Run does to the command line before the app parses
// it: the global flags moved after the command's name (hoistGlobalFlags).
func prepareArgs(app *cli.App, args []string) ([]string, int, error) {
	return hoistGlobalFlags(app, args)
}

func takesValue(f cli.Flag) bool {
	d, ok := f.(cli.DocGenerationFlag)
	return ok && d.TakesValue()
}

func hasFlag(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// flagNames are the names of flags as typed: --long, -s.
func flagNames(fl []cli.Flag) []string {
	var out []string
	for _, f := range fl {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		for _, n := range f.Names() {
			out = append(out, dashed(n))
		}
	}
	return append(out, "--help")
}

func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// usageText rewrites an error of Go's flag parser for people: the flag as
// it was typed (--frist, not -frist), and the flag probably meant.
func usageText(err error, fl []cli.Flag) string {
	msg := err.Error()
	for _, prefix := range []string{"flag provided but not defined: -", "flag needs an argument: -"} {
		rest, ok := strings.CutPrefix(msg, prefix)
		if !ok {
			continue
		}
		name := strings.TrimPrefix(rest, "-")
		typed := dashed(name)
		if strings.HasPrefix(prefix, "flag needs") {
			return "flag " + typed + " needs a value"
		}
		out := "unknown flag " + typed
		if s := suggest.Closest(typed, flagNames(fl)); s != "" {
			out += "; did you mean " + s + "?"
		}
		return out
	}
	// invalid value "x" for flag -ttl: parse error; invalid boolean value
	// "x" for -wait: ... (a flag whose value is optional, as --wait's)
	for _, mid := range []string{" for flag -", " for -"} {
		if i := strings.Index(msg, mid); i >= 0 && strings.HasPrefix(msg, "invalid ") {
			rest := msg[i+len(mid):]
			name, tail, _ := strings.Cut(rest, ":")
			msg = strings.Replace(msg[:i], "invalid boolean value", "invalid value", 1) + " for flag " + dashed(name) + ":" + tail
			break
		}
	}
	return msg
}

func usageHandler(code int) cli.OnUsageErrorFunc {
	return func(c *cli.Context, err error, isSubcommand bool) error {
		var fl []cli.Flag
		if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
			fl = c.Command.Flags
		} else {
			fl = c.App.Flags
		}
		return cli.Exit(leasefmt.Bound(fmt.Sprintf("usage: %s (see %s --help)", usageText(err, fl), commandName(c))), code)
	}
}

// commandNotFound says that name is no command, and which one was meant.
func commandNotFound(c *cli.Context, name string) {
	var names []string
	for _, cmd := range c.App.Commands {
		if !cmd.Hidden {
			names = append(names, cmd.Names()...)
		}
	}
	msg := fmt.Sprintf("lease: %s is not a lease command", leasefmt.Quote(name))
	if s := suggest.Closest(name, names); s != "" {
		msg += "; did you mean lease " + s + "?"
	}
	fmt.Fprintln(c.App.ErrWriter, msg+" (see lease --help)")
	// Through the app's handler (Run's), not cli.HandleExitCoder: that
	// calls the process-wide cli.OsExiter.
	if h := c.App.ExitErrHandler; h != nil {
		h(c, cli.Exit("", exitcode.Usage))
		return
	}
	cli.HandleExitCoder(cli.Exit("", exitcode.Usage))
}
