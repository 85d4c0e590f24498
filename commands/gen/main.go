// Command gen writes lease's man pages (man/) and shell completions
// (completions/) from the command definitions and their Manuals, with
// internal/docgen: run `go run ./commands/gen` at the repository root
// after changing a command, and check the result in.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/internal/docgen"
)

func main() {
	out := flag.String("o", ".", "repository root to write man/ and completions/ under")
	flag.Parse()
	if _, err := os.Stat(*out + "/go.mod"); err != nil {
		fmt.Fprintf(os.Stderr, "gen: %s is not the repository root (no go.mod); use -o\n", *out)
		os.Exit(2)
	}
	changed, err := docgen.WriteDocs(*out, commands.NewApp())
	for _, p := range changed {
		fmt.Println(p)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
