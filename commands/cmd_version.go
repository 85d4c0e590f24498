package commands

import (
	"fmt"
	"io"
	"runtime"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/mpi"
)

var versionCommand = &cli.Command{
	Name:      "version",
	Usage:     "print the version and whether MPI support is compiled in",
	ArgsUsage: " ",
	Action: func(c *cli.Context) error {
		printVersion(c.App.Writer)
		return nil
	},
}

// versionManual is the hand-written part of lease-version(1).
var versionManual = Manual{
	Exit:     simpleExit,
	Examples: []Example{{"Print the version:", "lease version"}},
}

func init() {
	register(&Descriptor{Rank: 170, Command: versionCommand, Manual: versionManual, Launch: Once})
}

func printVersion(w io.Writer) {
	support := "without MPI support (build with -tags mpi for mpirun)"
	if mpi.Compiled {
		support = "with MPI support (Open MPI)"
	}
	fmt.Fprintf(w, "lease %s %s/%s %s, %s\n", Version, runtime.GOOS, runtime.GOARCH, runtime.Version(), support)
}
