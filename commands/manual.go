package commands

//go:generate go run ./gen -o ..

import (
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/mpi"
)

// The hand-written text of lease's man pages. Each command file holds the
// Manual of its command right after its cli.Command, both named by its
// Descriptor; this file holds the types, the lookup, the text shared by
// several pages and that of the main page lease(1) (format.go holds
// lease-format(5)). internal/docgen renders them, with the command
// definitions of NewApp, into man/ and completions/: run `go run
// ./commands/gen` after changing either.
//
// Text fields are docs markup: paragraphs are separated by blank lines, a
// line starting with a tab is a literal line, a line starting with "- "
// starts a bullet item, and `code` is set in bold.

// Manual is the hand-written part of a command's man page, added to what
// the cli.Command itself says (Usage, ArgsUsage, Description, Flags).
type Manual struct {
	// More is appended to the command's Description (docs markup).
	More string
	// Exit lists the exit statuses; nil means the common ones,
	// MainManual.Exit.
	Exit []Item
	// Env and Files are entries added to the common ones: Env to the
	// variables of the settings the command has flags for (an entry with
	// the tag of one of those adds to its text), Files to
	// MainManual.CommonFiles.
	Env, Files []Item
	// Examples are the page's examples; a command without any gets one
	// that shows --help.
	Examples []Example
	// SeeAlso are the references after lease(1) and lease-format(5).
	SeeAlso []string
	// Args says how shells complete the positional arguments: "ids" (work
	// IDs of the table), "free-ids" (the work IDs a claim can take:
	// released or expired), "targets" (target IDs), "files", "id-cmd" (a
	// free ID, then -- and a command line) or "none"; "" derives it from
	// ArgsUsage.
	Args string
}

// Item is one entry of a tagged list (EXIT STATUS, ENVIRONMENT, FILES):
// Tag in bold, then Text. An empty Tag makes Text a paragraph of its own.
type Item struct{ Tag, Text string }

// Example is one entry of EXAMPLES: Text says what Code, a literal block
// of shell, does.
type Example struct{ Text, Code string }

// Manuals returns the Manual of every command of NewApp, by command name,
// as its page shows it: its Descriptor's, with what it does under a
// launcher.
func Manuals() map[string]Manual {
	out := map[string]Manual{}
	for _, d := range Descriptors() {
		man := d.Manual
		if man.More != "" {
			man.More += "\n\n"
		}
		man.More += launchNote(d.Launch)
		man.Env = append(append([]Item(nil), man.Env...), launchEnv)
		out[d.Command.Name] = man
	}
	return out
}

// launchEnv is the ENVIRONMENT entry of LEASE_MPI, on every page.
var launchEnv = Item{mpi.ModeEnv, "Whether this process is one of the tasks of a launcher: auto (default) " +
	"takes it for one only when it is the program mpirun or srun started (OMPI_COMMAND names it; SLURM_TASK_PID is its pid), " +
	"so that the lease a job script calls runs on its own; on takes any process with a launcher's variables for a task; " +
	"off takes none, and every copy runs on its own."}

// commonExit are the exit statuses of every command but fsck and run
// (docs/design.md#cli).
var commonExit = []Item{
	{exitTag(exitcode.OK), "Success: every line (or ID) succeeded."},
	{exitTag(exitcode.Negative), "A negative answer: a lease was not granted, was lost, or a token was stale."},
	{exitTag(exitcode.Usage), "Usage, configuration or input error; nothing was written."},
	{exitTag(exitcode.Corrupt), "A corrupt record was met and left alone (see lease-fsck(1))."},
	{exitTag(exitcode.IO), "I/O or durability error, also a full or read-only filesystem (the machine's state: a script may retry later); nothing in flight was reported as a success."},
	{exitTag(exitcode.LockTimeout), "A record lock could not be taken within --lock-timeout."},
	{"", "A batch goes on past records that are lost or corrupt and exits with the most serious outcome met: " + exitcode.Order() + "."},
}

// interruptExit is the exit status of a streamed batch (add, claim,
// renew-batch, complete) stopped by a signal.
var interruptExit = Item{"130, 143", "Stopped by SIGINT (130) or SIGTERM (143) after the chunk in flight: what was printed is durable, the rest was not started, and a line on stderr says how far it got."}

// withInterrupt is exits with interruptExit before its closing remark.
func withInterrupt(exits []Item) []Item {
	out := append([]Item(nil), exits...)
	if n := len(out); n > 0 && out[n-1].Tag == "" {
		return append(append(out[:n-1:n-1], interruptExit), out[n-1:]...)
	}
	return append(out, interruptExit)
}

// claimExit are the exit statuses of lease claim: the common ones, with
// what success means for --first.
var claimExit = append([]Item{
	{exitTag(exitcode.OK), "Success: every claim was granted; with --first or --next, at least one was (what failed is still reported on stderr, and what was printed is held)."},
	{exitTag(exitcode.Negative), "A claim was not granted (held, done, released by a later token, ...); with --first, none was; with --next, the queue is empty or busy."},
}, commonExit[2:]...)

// simpleExit are the exit statuses of the commands that read no records
// (config, version, id).
var simpleExit = []Item{
	{exitTag(exitcode.OK), "Success."},
	{exitTag(exitcode.Usage), "Usage, configuration or input error."},
}

// fsckExit are the exit statuses of lease fsck, those of fsck(8).
var fsckExit = []Item{
	{exitTag(exitcode.FsckClean), "The table is clean."},
	{exitTag(exitcode.FsckCorrected), "Errors were found and corrected (--repair)."},
	{exitTag(exitcode.FsckLeft), "Errors were left uncorrected."},
	{exitTag(exitcode.FsckOperational), "Operational error: the table could not be checked."},
	{exitTag(exitcode.FsckUsage), "Usage or configuration error."},
}

// runExit are the exit statuses of lease run: CMD's own, and 124 to 127
// for its own outcomes, as timeout(1) uses them.
var runExit = []Item{
	{"", "The exit status of CMD, when it ran and the lease was held until it exited and then finished (released or completed)."},
	{exitTag(exitcode.RunEmpty), "With --next: nothing left to do, every queued item is done (`empty`); CMD did not run. A loop `while lease run --next ...; do :; done` ends here; a busy queue without --wait is 125."},
	{exitTag(exitcode.RunLost), "The lease was lost while CMD ran (or before it could be finished); CMD was sent SIGTERM and, after --grace seconds, SIGKILL."},
	{exitTag(exitcode.RunFailed), "The lease was not granted (held, also after --wait ran out; done, corrupt, ...) or lease run itself failed (bad ID, configuration, table error, or the lease could not be released or completed after CMD exited 0). CMD did not run, or its status was 0."},
	{exitTag(exitcode.RunCannotRun), "CMD was found but could not be run."},
	{exitTag(exitcode.RunNotFound), "CMD was not found; nothing was claimed."},
	{exitTag(exitcode.RunSignal) + "+n", "CMD was killed by signal n (137 for SIGKILL)."},
}

// exitTag is an exit status as a manual's EXIT STATUS tag.
func exitTag(c int) string { return strconv.Itoa(c) }

// commonFiles are the FILES entries of every page.
var commonFiles = []Item{
	{"ROOT/TABLE", "The table header: schema, shard counts, creation time (see lease-format(5))."},
	{"ROOT/work/SS/ID.json", "One work lease record per ID, in shard directory SS."},
	{"ROOT/work/SS/.lock", "The lock file of shard SS: a byte-range lock per record."},
	{"ROOT/queue/SS/ID", "The queue: one empty file per queued work item that is not done (lease add, claim --next, run --next)."},
	{"./lease.toml, $XDG_CONFIG_HOME/lease/config.toml", "Configuration files, when --config and LEASE_CONFIG name none."},
}

// MainManual is the hand-written part of the main page lease(1), added to
// what NewApp says (Usage, Description, the commands and config.All).
type MainManual struct {
	// Description follows the app's Description (docs markup).
	Description string
	// Flags are the options every command accepts after its name.
	Flags []cli.Flag
	// Exit are the exit statuses of every command but those with their
	// own (Manual.Exit); ExitNote, a paragraph after them, points at
	// those.
	Exit     []Item
	ExitNote string
	// Env are the variables listed after those of the settings.
	Env []Item
	// CommonFiles are the FILES entries of every page; Files are added on
	// lease(1).
	CommonFiles, Files []Item
	// Examples are the examples of lease(1).
	Examples []Example
	// SeeAlso are the references after the command pages.
	SeeAlso []string
}

// MainPage returns the hand-written part of lease(1).
func MainPage() MainManual {
	return MainManual{
		Description: mainDescription + "\n\n" + launchParagraph(),
		Flags:       commonFlags(),
		Exit:        commonExit,
		ExitNote: "`lease fsck` follows fsck(8) (0 clean, 1 corrected, 4 left uncorrected, 8 operational error, 16 usage) " +
			"and `lease run` passes on its command's status (124 lease lost, 125 not granted, 126/127 cannot run); see their pages.",
		Env: []Item{
			{"LEASE_CONFIG", "The TOML configuration file, when --config is not given."},
			{"XDG_CONFIG_HOME", "Where the user configuration file lease/config.toml is looked for (default ~/.config)."},
			{"USER", "The default owner is USER@HOST; USER@HOST/PID (USER@HOST/rank-N/PID under a launcher) for lease run, lease work and the Go API (leases.Open), which tell a host's workers apart."},
			launchEnv,
			{"GOMAXPROCS", "Go's count of threads running Go code at once. A concurrent batch raises it to min(writers, 4 times the CPU count) while it runs, so that writers coming back from fsync and rename find one free; lease work and its supervisor run with 1 between batches (a worker does one item at a time, and many workers on a machine each with a P for every CPU spend CPU on threads spinning for work that is not there); a value set in the environment is left alone."},
		},
		CommonFiles: commonFiles,
		Files: []Item{
			{"ROOT/targets/, ROOT/groups/", "Target lease records and group manifests."},
			{"ROOT/stage/, ROOT/public/", "Results staged by lease holders, and published by lease complete --publish."},
			{"ROOT/lost+found/", "Where lease fsck --repair quarantines what it cannot trust."},
		},
		Examples: mainExamples,
		SeeAlso:  []string{"lease-format(5)", "flock(1)", "fsck(8)"},
	}
}

const mainDescription = "Every batch command is a filter over lines of `ID TOKEN` (whitespace-separated; blank lines and " +
	"# comments skipped), read from FILE arguments or stdin. stdout carries exactly the lines that succeeded, in " +
	"input order, in the same format; each failure goes to stderr as `REASON ID TOKEN detail` with a stable reason " +
	"word: stale-token, expired, held, done, released, missing, exists, corrupt, lock-timeout, io-error. So " +
	"`lease renew-batch --in-place held` keeps the held set current (the longhand `lease renew-batch < held > held.new` " +
	"prints the lines still held even when some were lost, exit 1), and `grep \"^$id \" held | lease complete` " +
	"completes the item a worker finished, only while it is still its own. --json prints one JSON document with full detail and statistics instead (lease status and lease fsck " +
	"stream one JSON object per line). Input is validated whole " +
	"before any write: a malformed line or a duplicate ID is exit 2, nothing written.\n\n" +
	"An ID is exactly 64 lowercase hex characters (a SHA-256 digest). Every claim of an ID gets a token larger than " +
	"any earlier claim of it; a holder proves the lease is still its own with that token (fencing). " +
	"Every record change is locked, validated, written to a temporary file, fsynced, renamed into place, and its " +
	"directory fsynced before success is reported; a batch fsyncs each shard directory once (group commit). " +
	"lease-format(5) describes the table.\n\n" +
	"Settings come from flags, then the environment, then a TOML file (--config FILE, else ./lease.toml, else " +
	"$XDG_CONFIG_HOME/lease/config.toml), then defaults; `lease config` shows each value and its origin. The " +
	"default TTL is max(120, 4 * target_timeout) seconds and the renewal interval max(0.1, min(30, ttl / 3))."

var mainExamples = []Example{
	{"A worker in four lines: take a free item of todo, keep what it holds alive (lost leases drop out of held), and complete item $id once it is finished:",
		"export LEASE_ROOT=/scratch/campaign/table\n" +
			"lease claim --first 1 - < todo >> held\n" +
			"lease renew-batch --in-place held\n" +
			"grep \"^$id \" held | lease complete"},
	{"Make the candidate IDs of a campaign from the names of its inputs:", "ls corpus/ | lease id - > todo"},
	{"The common options may also come before the command:", "lease --root /scratch/campaign/table status --live"},
	{"Hold a lease exactly as long as a fuzzer runs:", "lease run --complete $ID -- ./fuzz.sh"},
	{"After a crash:", "lease fsck --repair"},
}
