package commands

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/exitcode"
)

// A command is one Descriptor, registered by the command's own file: its
// cli.Command, the hand-written part of its man page, what it does under a
// launcher and how its errors exit. NewApp, the man pages and completions
// (internal/docgen), the launch gate and the usage errors all read the
// descriptors, so adding a command touches only its file:
//
//	func init() {
//		register(&Descriptor{Rank: 115, Command: workCommand, Manual: workManual, Launch: Alone, Worker: true})
//	}

// Descriptor is everything lease knows of one command.
type Descriptor struct {
	// Rank places the command in lease --help, lease(1) and the
	// completions: lower first (the commands of today are 10 apart, so a
	// new one fits between two).
	Rank int
	// Command is its definition: name, flags, usage, action.
	Command *cli.Command
	// Manual is the hand-written part of its man page.
	Manual Manual
	// Launch is what it does as one of several tasks of mpirun or srun.
	Launch LaunchPolicy
	// UsageExit is the exit status of its usage errors; 0 means
	// exitcode.Usage. lease fsck's follow fsck(8), lease run's leave the
	// low statuses to its command.
	UsageExit int
	// Records is what -v calls the records its statistics count ("claims",
	// "releases"); "" is "renewals", the JSON's name.
	Records string
	// NotDone is the word of what it did not do to a record, in the one
	// line that counts the records a full filesystem stopped ("granted":
	// "12 of 300 IDs not granted"); "" is "done".
	NotDone string
	// Worker: a worker runs it once per item. Refused under a launcher, it
	// suggests a script that calls lease instead of running lease itself.
	Worker bool
}

// usageExit is the exit status of d's usage errors.
func (d *Descriptor) usageExit() int {
	if d.UsageExit != 0 {
		return d.UsageExit
	}
	return exitcode.Usage
}

// descriptors are the registered commands, by name.
var descriptors = map[string]*Descriptor{}

// register adds the command of d. It runs from the init of the command's
// file; a descriptor that is incomplete or names a command twice stops
// the program at once, before any command can run.
func register(d *Descriptor) {
	switch {
	case d.Command == nil || d.Command.Name == "":
		panic("commands: a descriptor without a command")
	case descriptors[d.Command.Name] != nil:
		panic(fmt.Sprintf("commands: lease %s is registered twice", d.Command.Name))
	case d.Launch == launchUnset:
		panic(fmt.Sprintf("commands: lease %s has no launch policy", d.Command.Name))
	case d.Rank <= 0:
		panic(fmt.Sprintf("commands: lease %s has no rank", d.Command.Name))
	}
	descriptors[d.Command.Name] = d
}

// Descriptors returns every command's descriptor, in the order of Rank (of
// two with one rank, by name).
func Descriptors() []*Descriptor {
	out := make([]*Descriptor, 0, len(descriptors))
	for _, d := range descriptors {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *Descriptor) int {
		if a.Rank != b.Rank {
			return a.Rank - b.Rank
		}
		return strings.Compare(a.Command.Name, b.Command.Name)
	})
	return out
}

// descriptorOf is the descriptor of command name, nil when there is none.
func descriptorOf(name string) *Descriptor { return descriptors[name] }
