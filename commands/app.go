// Package commands is the command line of lease: one file per subcommand,
// cmd_NAME.go (cmd_group_claim.go for lease group-claim), each starting
// with its cli.Command and registering its Descriptor (descriptor.go), from
// which NewApp builds the app; the parts of one command are
// cmd_NAME_PART.go (cmd_status_watch.go). Every other file is shared by
// several commands: the batch runner (batch.go, stream.go, spool.go), the
// one reporter (report.go), the environment of a run (env.go), flags,
// input filters, progress. Actions return errors (cli.Exit with a status
// of package exitcode) and never exit.
package commands

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/internal/proctree"
	"github.com/leasetool/lease/leasefmt"
)

// Version is the version of lease, set at build time with -ldflags.
var Version = "0.1.0-dev"

// NewApp returns the lease application with the command of every
// Descriptor, in the order of their ranks.
func NewApp() *cli.App {
	app := &cli.App{
		Name:                 "lease",
		Usage:                "fenced work leases on a shared POSIX filesystem",
		Version:              Version,
		EnableBashCompletion: true,
		Description: "lease keeps one small JSON record per work item in shard directories of a table on a shared\n" +
			"filesystem (local disk, NFS, GlusterFS, CephFS; run lease qualify on any other first). Workers claim work and get a fencing token, keep leases\n" +
			"alive with batched renewals, and publish results only while their token is current.",
	}
	for _, d := range Descriptors() {
		// Each app gets its own copy of the command and of its flags:
		// urfave fills both in while it runs (help flag and subcommand,
		// categories, the flags' defaults), and tests run several apps at
		// once in one process (Run).
		cmd := ownCommand(d.Command)
		app.Commands = append(app.Commands, cmd)
		cmd.OnUsageError = usageHandler(d.usageExit())
		cmd.Before = launchGate(d)
		// FILE and ID arguments are files and IDs, always: without this,
		// urfave gives every command a "help" (alias "h") subcommand, and
		// `lease renew-batch h > h.new` printed the help text.
		cmd.HideHelpCommand = true
	}
	setCLIGlobals.Do(func() {
		cli.FlagStringer = flagString
		// --version prints what lease version prints, as git --version does.
		cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version and whether MPI support is compiled in, as lease version does"}
		cli.VersionPrinter = func(c *cli.Context) { printVersion(c.App.Writer) }
	})
	app.OnUsageError = usageHandler(exitcode.Usage)
	app.CommandNotFound = commandNotFound
	// The common flags are global options too: given before the command's
	// name they are moved after it (hoistGlobalFlags); here they show in
	// lease --help.
	app.Flags = commonFlags()
	return app
}

// parsing is held while an app parses its flags (Run).
var parsing sync.Mutex

// setCLIGlobals sets urfave's package-wide hooks once per process, not
// once per app: apps run side by side in tests.
var setCLIGlobals sync.Once

// ownCommand is a copy of c with copies of its flags, for one app.
func ownCommand(c *cli.Command) *cli.Command {
	own := *c
	own.Flags = make([]cli.Flag, len(c.Flags))
	for i, f := range c.Flags {
		own.Flags[i] = f
		if v := reflect.ValueOf(f); v.Kind() == reflect.Pointer && !v.IsNil() {
			cp := reflect.New(v.Elem().Type())
			cp.Elem().Set(v.Elem())
			own.Flags[i] = cp.Interface().(cli.Flag)
		}
	}
	own.Subcommands = make([]*cli.Command, len(c.Subcommands))
	for i, s := range c.Subcommands {
		own.Subcommands[i] = ownCommand(s)
	}
	return &own
}

// commandName is how messages name the command of c: "lease claim", or
// "lease" itself for the global options.
func commandName(c *cli.Context) string {
	if c == nil || c.Command == nil || c.Command.Name == "" || c.Command.Name == c.App.Name {
		return "lease"
	}
	return "lease " + c.Command.Name
}

// storesKey is the app's Metadata key of the stores its commands opened.
const storesKey = "lease.stores"

// openedStores are the stores one Run's commands opened (env.openWaiting),
// closed when Run returns: the lease binary exits then, which closes them
// anyway, but tests run thousands of commands in one process, and a store
// keeps a descriptor for each shard directory it has used.
type openedStores struct {
	mu sync.Mutex
	l  []*commit.Store
}

func (o *openedStores) add(st *commit.Store) {
	o.mu.Lock()
	o.l = append(o.l, st)
	o.mu.Unlock()
}

func (o *openedStores) closeAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, st := range o.l {
		st.Close()
	}
	o.l = nil
}

// Run runs lease with args and the given standard streams and returns the
// exit status. Tests call it in-process; main calls it with the real ones.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := NewApp()
	app.Reader, app.Writer, app.ErrWriter = stdin, stdout, stderr
	stores := &openedStores{}
	defer stores.closeAll()
	if app.Metadata == nil {
		app.Metadata = map[string]interface{}{}
	}
	app.Metadata[storesKey] = stores
	// urfave's help and version flags are shared by every app, and parsing
	// writes to them (BoolFlag.Apply stores its default): apps parse one at
	// a time, up to the command's Before (after every flag is parsed; help
	// and usage errors come before it), and run side by side after it.
	parsing.Lock()
	var parsed sync.Once
	unlock := func() { parsed.Do(parsing.Unlock) }
	defer unlock()
	for _, cmd := range app.Commands {
		before := cmd.Before
		cmd.Before = func(c *cli.Context) error {
			unlock()
			if before != nil {
				return before(c)
			}
			return nil
		}
	}
	code := exitcode.OK
	exited := false
	app.ExitErrHandler = func(c *cli.Context, err error) {
		if err == nil {
			return
		}
		exited = true
		code = exitcode.Negative
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			code = ec.ExitCode()
		}
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(stderr, leasefmt.Bound(commandName(c)+": "+msg))
		}
	}
	args, ucode, err := prepareArgs(app, args)
	if err != nil {
		fmt.Fprintln(stderr, leasefmt.Bound("lease: usage: "+err.Error()))
		return ucode
	}
	if err := app.Run(args); err != nil && !exited {
		fmt.Fprintln(stderr, leasefmt.Bound("lease: "+err.Error()))
		return exitcode.Usage
	}
	return code
}

// Main is the program: Run with the process's streams.
func Main() int {
	// The lease binary's children are its holders' only: it may adopt a
	// dead supervisor's orphans and kill them (proctree.AdoptOrphans).
	proctree.AdoptOrphans()
	ownProcess = true
	return Run(os.Args, os.Stdin, os.Stdout, os.Stderr)
}
