// Command lease keeps fenced work leases on a shared POSIX filesystem.
// See README.md and man/man1/lease.1.
package main

import (
	"os"

	"github.com/leasetool/lease/commands"
)

func main() { os.Exit(commands.Main()) }
