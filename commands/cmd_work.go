package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/config"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/internal/proctree"
	"github.com/leasetool/lease/internal/slack"
	"github.com/leasetool/lease/internal/worker"
	"github.com/leasetool/lease/leasefmt"
)

var workCommand = &cli.Command{
	Name:      "work",
	Usage:     "a long-lived worker: run a command for each item of the queue until the campaign is done",
	ArgsUsage: "[--max-items N] -- CMD [ARG...]",
	Description: "Claims the next free item of the table's queue (as lease run --next --wait does), runs CMD for it\n" +
		"with the lease held and kept alive, finishes the item when CMD exits, and goes on with the next,\n" +
		"in one process, until the queue is empty (exit 0), --max-items items were run, a signal stops it,\n" +
		"or the table fails. Each item is run exactly as lease run --next --complete runs it: under a\n" +
		"supervisor that leaves no process of CMD's tree behind, with LEASE_ID, LEASE_TOKEN, LEASE_ROOT,\n" +
		"LEASE_STAGE and LEASE_INPUT set, renewed every renewal interval, stopped when the lease is lost.\n" +
		"CMD exiting 0 publishes what it left in LEASE_STAGE as ROOT/public/ID/ and marks the item done;\n" +
		"any other end releases it with an attempt counted, so that another worker tries it again, and\n" +
		"after max_attempts it is failed. No item stops the worker: not one that fails, is poisoned, is\n" +
		"lost, or whose result cannot be published. CMD's standard streams are lease work's own; lease\n" +
		"work writes only to stderr.",
	Flags: flags(withJSON(commonFlags(), "print one JSON object per item, and one when lease work ends, on stderr (stdout is CMD's)"), []cli.Flag{
		&cli.IntFlag{Name: "max-items", Usage: "stop after running `N` items (0: until the queue is empty)", DefaultText: "0, no limit"},
		settingFlag("grace"),
		settingFlag("renew-interval"),
		settingFlag("max-attempts"),
		settingFlag("max-wait"),
	}),
	Action: runWork,
}

// workManual is the hand-written part of lease-work(1).
var workManual = Manual{
	More: "lease work is the campaign's worker: start one per core of every node (a job script, a job array, or " +
		"`mpirun -np 64 worker.sh` whose script runs lease work), and each goes on until there is nothing left to do. " +
		"It is the loop `while lease run --next --wait --complete -- CMD; do :; done` in one process, without its " +
		"faults: that loop ends at the first item whose CMD fails, and its claims start a process each.\n\n" +
		"The queue: lease work claims as lease claim --next 1 does. While every item left is held by another " +
		"worker it waits, with backoff (50 ms doubling to 2 s, with jitter, woken when the first held lease can be " +
		"taken over and, on a local filesystem (ext4, XFS, btrfs, tmpfs: inotify), when a holder on this machine " +
		"releases or finishes an item), for as long as it takes; the lease it then gets counts from the claim that granted it, " +
		"so waiting never costs it its lease. When every queued item is done (or failed) it exits 0. Items that " +
		"other workers add while it runs (lease add, from CMD too) are found by its next claim.\n\n" +
		"An item: CMD runs as under lease run --next --complete (see lease-run(1): the supervision, the keep-alive, " +
		"the lost point, the grace), except that lease work supervises every item's CMD itself where CMD gets a " +
		"cgroup (see cgroups below), and elsewhere one supervisor, started once, runs every item's CMD in turn (a " +
		"CMD costs its own fork and exec, not a supervisor's too); if it is killed, the next item gets a new one. Exit status 0 publishes what CMD left in LEASE_STAGE whole, once, as " +
		"ROOT/public/ID/, and the item is done only when that publish succeeded; an empty LEASE_STAGE publishes " +
		"nothing. A result that cannot be published (ROOT/public/ID exists, a symbolic link in it, a file with more " +
		"than one link or one not owned by the worker's account) leaves the item " +
		"not done: released with an attempt counted, LEASE_STAGE kept for lease fsck. " +
		"LEASE_STAGE is made fresh for each item and belongs to the worker's account: on a shared table (lease " +
		"init --shared) it is mode 0700 while CMD runs, so that no other member can plant anything in it, and " +
		"publication gives every file and directory of the result the group's modes, whatever CMD's umask (see " +
		"lease-complete(1)); a directory already at its name was made by someone else and is never used: it is " +
		"moved to lost+found/ and a new one made, or, where stage/ is sticky and only its maker or root may move " +
		"it, the lease is released with no attempt counted and lease work goes on with the next claim (the " +
		"item's next token names a directory of its own). A CMD that exits non-zero, " +
		"or is killed by a signal lease work did not send, is a failed run: the release counts an attempt, with " +
		"CMD's exit status and the end of its standard error; at max_attempts (--max-attempts, LEASE_MAX_ATTEMPTS; " +
		"default 3, 0 for no limit) the item becomes failed, which claims refuse until lease retry puts it back. A " +
		"CMD stopped because its lease was lost (exit 124 under lease run), or because lease work was told to stop, " +
		"is not an attempt. A CMD that completes or releases its own lease with its LEASE_TOKEN has finished it.\n\n" +
		"Stopping: SIGINT, SIGTERM, SIGHUP or SIGQUIT stops the worker as flock(1) and consul lock stop theirs: the " +
		"signal is forwarded to CMD's process group, every process of CMD's tree gets SIGKILL --grace seconds " +
		"later if it is still there, the item is released with no attempt counted, and lease work exits 128+n. " +
		"A signal while it waits for a busy queue ends the wait at once (nothing is held). SIGUSR1 and SIGUSR2 are " +
		"forwarded to CMD and do not stop the worker. kill -9 of lease work stops CMD's whole tree as well (the " +
		"sentinel, or the supervisor, sees its holder die); the lease then expires after its TTL and another worker takes the item " +
		"over, no attempt counted.\n\n" +
		"Kills: lease work starts a sentinel, a small process that leads the process group every CMD runs in, " +
		"ignores the signals it can and, when whoever supervises CMD (lease work itself, or its supervisor) is " +
		"gone, sends SIGKILL to that group and writes cgroup.kill of CMD's cgroup; lease work is a child subreaper " +
		"(PR_SET_CHILD_SUBREAPER), as the supervisor is, so that orphans of CMD's tree come to it, not to PID 1; " +
		"and CMD dies with its parent (its parent-death signal, SIGKILL). Where lease work supervises CMD itself: " +
		"kill -9 of lease work kills CMD (its parent-death signal), its group and its cgroup (the sentinel), " +
		"setsid(2) or a double fork included; kill -9 of CMD: lease work stops the rest of the tree, and the run " +
		"is an attempt (a signal lease work did not send). With a supervisor: kill -9 of the supervisor kills CMD " +
		"and its group; lease work kills every orphan left, waits until none runs, and only then releases the " +
		"item, with no attempt counted (the worker's failure, not the item's); the next item gets a new " +
		"supervisor. kill -9 of CMD: the supervisor stops the rest of the tree, and the run is an attempt. kill -9 " +
		"of lease work and its supervisor together: the sentinel kills CMD's group, and CMD's cgroup where there " +
		"is one.\n\n" +
		"cgroups: where the machine delegates cgroup v2 to lease work (a cgroup2 mount, the cgroup of lease work " +
		"in /proc/self/cgroup writable by its user: root, or a subtree delegated to the user, e.g. by systemd's " +
		"Delegate=; Linux 5.14 or later for cgroup.kill), each CMD runs in a cgroup of its own: lease work makes " +
		"a fresh directory lease-PID-RANDOM in its cgroup (never one it did not make) and a child cmd-N, which CMD " +
		"is started in by the kernel (CLONE_INTO_CGROUP), where no other process is: once CMD's tree is gone from it " +
		"the next item's CMD runs in it, unless it got cgroup.kill, a process is still in it or CMD made a cgroup " +
		"below it (it is then removed, with the cgroups below it, and the next CMD gets a new cmd-N); all are removed " +
		"when lease work ends. Ending the " +
		"tree then also writes 1 to cgroup.kill, which reaches every process of it, one that left CMD's process " +
		"group and whose parents are gone included; the sentinel does so when lease work (or the supervisor) " +
		"dies. There lease work needs no supervisor process: CMD is its child, and the kernel keeps the tree " +
		"(LEASE_SUPERVISOR=process asks for a supervisor anyway). " +
		"Where there is none (cgroup v1 only, a user without a delegated cgroup, an older kernel, or a kernel that " +
		"refuses to start CMD there, as in a cgroup with controllers enabled for its children: the \"no internal " +
		"processes\" rule), lease work runs a supervisor and uses the process groups, subreapers and sentinel above, " +
		"silently. What " +
		"remains possible without cgroups: a process that left CMD's process group (setsid, setpgid) survives " +
		"when lease work and its supervisor are killed together; with or without them, anything of the tree " +
		"survives when every lease process, the sentinel too, is killed at once (its cgroup is then left, with " +
		"those processes in it; once they are gone, the next lease work started in the same cgroup removes " +
		"such a lease-PID-RANDOM whose PID runs no process and that no lease work keeps locked: each keeps an flock(2) " +
		"on its own group's directory while it lives, so a lease work in another PID namespace sharing the cgroup, whose " +
		"PID means nothing here, keeps its group; nothing else is removed). Such a process is still fenced: its LEASE_TOKEN is no longer current " +
		"once the lease ran out or another worker took the item over, so it cannot complete, renew or publish " +
		"(a result staged under its token is never moved to ROOT/public/ID/; lease fsck moves it aside).\n\n" +
		"PID namespaces: CMD's tree is read from /proc, which must be a proc of the namespace lease work runs in. " +
		"One mounted outside it (unshare --pid --fork without --mount-proc; bwrap --unshare-pid with the machine's " +
		"/proc bound) numbers processes as another namespace does, so the tree read there is not CMD's and a signal " +
		"sent by its IDs would reach whatever process has them inside, a bystander or another worker's CMD: lease " +
		"work refuses to start there (exit 2, nothing claimed) and says how to mount one (unshare --mount-proc, " +
		"bwrap --proc /proc); lease run refuses too (exit 125). With a proc of its own (a container runtime mounts " +
		"one) lease work runs as anywhere, PID 1 included.\n\n" +
		"A table that cannot be written: when its filesystem is full (ENOSPC), read-only (EROFS), failing (EIO) " +
		"or its NFS handle stale (ESTALE), a claim or an item's finish fails, and lease work waits that out rather " +
		"than ending: the lease it holds stays held (renewals use the table's reserve), it claims nothing, says once " +
		"on stderr that it waits (and every minute how long it has waited), tries again after 1 s doubling to 30 s, " +
		"and goes on when the table takes writes again, with a finish that failed tried again. --max-wait SECONDS " +
		"(LEASE_MAX_WAIT, max_wait) bounds the wait: past it lease work exits 4, as it did at once before; 0, the " +
		"default, waits for as long as it takes. A signal ends the wait (128+n). A lease that ran out meanwhile is " +
		"another worker's to take over, no attempt counted. lease run --next --wait and lease claim --next --wait " +
		"wait so too.\n\n" +
		"No room: a CMD that cannot write fails through no fault of its item. When CMD fails (exits non-zero, or " +
		"dies of a signal lease work did not send) while the table's filesystem has no room, the item is released " +
		"with no attempt counted, and lease work says so (\"ID: CMD (exit N) failed while ROOT's filesystem has no " +
		"room: ...: released, no attempt counted\"); and while there is no room lease work claims nothing: it " +
		"waits as for a table that cannot be written (says so once, 1 s doubling to 30 s, bounded by --max-wait). " +
		"No room is what statfs(2) of the table says: no free inode, or less space free to users (f_bavail) than " +
		"the floor, 1% of the filesystem's size, at least 1 MiB and at most 256 MiB: enough for a run to write " +
		"its findings, small enough not to idle a large filesystem that is only well used (a filesystem whose statfs " +
		"reports no size or no fixed number of inodes is not judged on them; a quota, EDQUOT, is not seen). Without the rule a full " +
		"disk counted an attempt for every run it broke, and good items ended failed. Only the table's filesystem " +
		"is checked: a CMD whose own scratch space is elsewhere and full fails as usual. A CMD that fills the " +
		"table's filesystem itself is released each time with no attempt, and the workers wait for an operator " +
		"(or --max-wait) to end it.\n\n" +
		"Timer slack: lease work runs its own threads with a timer slack of 4 ms (prctl(2), PR_SET_TIMERSLACK; it " +
		"executes itself again as it starts to get it, with the same arguments, PID and name), so that the kernel " +
		"wakes the Go runtime's monitor thread less often while an item's syncs and CMD run: with trivial items, " +
		"about a fifth less CPU an item and a tenth more items/s. A timed wait of lease work's own (a lock poll, a " +
		"backoff, the grace) may end up to 4 ms late; signals and CMD's exit are not timed waits. CMD, and all it " +
		"starts, gets the timer slack lease work was started with. A worker started with a slack of 4 ms or more " +
		"(systemd's TimerSlackNSec=) keeps its own, and LEASE_CMD_TIMERSLACK=0 keeps the one it was started with.\n\n" +
		"The store's lock wait: claims wait for a record's lock up to --lock-timeout; the release or completion " +
		"after CMD waits no longer than a renewal would (keepalive's bound), and the next claim again up to " +
		"--lock-timeout.\n\n" +
		"Owner: unless --owner, LEASE_OWNER or a file names one, each worker's leases carry USER@HOST/PID, with " +
		"the rank of a launcher's task when one started it (USER@HOST/rank-N/PID, from OMPI_COMM_WORLD_RANK, " +
		"PMIX_RANK, SLURM_PROCID or PMI_RANK), so that the workers of one host are told apart in lease status. " +
		"lease run does the same.\n\n" +
		"Output: stdout and stdin are CMD's. lease work writes only to stderr: its messages (an attempt counted, " +
		"a lost lease), with -v one line per item (its ID, token, CMD's status, how it was finished, the time), " +
		"and with --json one JSON object per item (command, item, id, token, child_status, child_signal, lost, " +
		"lost_reason, finish, attempts, duration_s; finish is done, released, failed, publish-refused, lost, " +
		"by-command-done, by-command-released, or the reason word of a table error) and, when it ends, one " +
		"object with end (empty, max-items, signal, error, cannot-run), exit, items, finishes (a count per finish " +
		"word) and stats, whose lost counts the leases lost, as the items' lost say.",
	Exit: []Item{
		{exitTag(exitcode.OK), "The queue is empty (every queued item is done or failed), or --max-items items were run."},
		{exitTag(exitcode.Usage), "Usage or configuration error; nothing was claimed."},
		{exitTag(exitcode.Corrupt), "Only items with corrupt records are left to claim (lease fsck repairs them), or a record turned corrupt as an item was finished."},
		{exitTag(exitcode.IO), "An I/O error of the table that is no outage, or an outage (a full or read-only filesystem, EIO, ESTALE) longer than --max-wait: a claim, the staging directory, or the release or completion of an item failed."},
		{exitTag(exitcode.LockTimeout), "An item could not be finished within the lock wait."},
		{exitTag(exitcode.RunCannotRun), "CMD was found but could not be run."},
		{exitTag(exitcode.RunNotFound), "CMD was not found; nothing was claimed."},
		{exitTag(exitcode.RunSignal) + "+n", "Signal n stopped the worker (SIGINT 130, SIGTERM 143); the item it held was released with no attempt counted."},
	},
	Env: append(runManual.Env[:len(runManual.Env):len(runManual.Env)],
		Item{"LEASE_SUPERVISOR", "auto (the default): lease work supervises CMD itself where CMD gets a cgroup of its own, and starts a supervisor process elsewhere; process: a supervisor process everywhere, as where there is no cgroup. Anything else is an error."},
		Item{"LEASE_CMD_TIMERSLACK", "Set by lease work for itself (and its supervisor process): the timer slack, in nanoseconds, it was started with, which CMD gets; never in CMD's environment. 0 keeps lease work from raising its own (see Timer slack above)."}),
	Examples: []Example{
		{"A campaign: the seeds with their content, then one worker per core on every node until every item is done or failed:",
			"lease add --content corpus/* > /dev/null\nlease work -- ./fuzz-one.sh"},
		{"64 workers under mpirun: the launcher starts a script (each lease work is one process, not a rank):",
			"cat > worker.sh <<'EOF'\n#!/bin/sh\nexec lease work -- ./fuzz-one.sh\nEOF\nchmod +x worker.sh\nmpirun -np 64 ./worker.sh"},
		{"Run at most 10 items, print one JSON object per item on stderr:",
			"lease work --max-items 10 --json -- ./fuzz-one.sh 2> items.jsonl"},
		{"Put the items that failed max_attempts times back, after fixing the harness:",
			"lease retry --failed && lease work -- ./fuzz-one.sh"},
	},
	SeeAlso: []string{"lease-run(1)", "lease-add(1)", "lease-retry(1)", "lease-claim(1)", "flock(1)"},
	Args:    "cmd",
}

func init() {
	register(&Descriptor{Rank: 115, Command: workCommand, Manual: workManual, Launch: Alone, Worker: true})
}

// stopSignals stop lease work; the others it forwards are CMD's alone.
func stopSignal(s os.Signal) bool {
	switch s {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		return true
	}
	return false
}

// workItemJSON is the --json object of one item.
type workItemJSON struct {
	Command     string  `json:"command"`
	Item        int     `json:"item"`
	ID          string  `json:"id"`
	Token       int64   `json:"token"`
	ChildStatus *int    `json:"child_status"`
	ChildSignal string  `json:"child_signal,omitempty"`
	Lost        bool    `json:"lost"`
	LostReason  string  `json:"lost_reason,omitempty"`
	Finish      string  `json:"finish"`
	Attempts    int64   `json:"attempts,omitempty"`
	DurationS   float64 `json:"duration_s"`
}

// workEndJSON is the --json object of the worker's end.
type workEndJSON struct {
	Command  string          `json:"command"`
	End      string          `json:"end"`
	Exit     int             `json:"exit"`
	Items    int             `json:"items"`
	Finishes map[string]int  `json:"finishes"`
	Stats    commit.Snapshot `json:"stats"`
}

func runWork(c *cli.Context) error {
	// Before anything is read or started: this may execute lease work
	// again, with a coarser timer slack for its own threads; only as the
	// lease process (Main), never in a program that runs commands in its
	// own process (Run), which would start over.
	if ownProcess {
		slack.Raise()
	}
	oneProc()
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	if c.IsSet("now") {
		return usageErr("--now: lease work keeps time with the system clock while CMD runs")
	}
	if err := e.set.CheckRenewInterval(); err != nil {
		return cli.Exit(err.Error(), exitcode.Usage)
	}
	if !e.set.Explicit("owner") {
		e.set.Owner = config.WorkerOwner(getenv)
	}
	maxItems := c.Int("max-items")
	if maxItems < 0 {
		return usageErr("--max-items %d: want 0 (no limit) or more", maxItems)
	}
	args := c.Args().Slice()
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return usageErr("no command to run (want lease work [--max-items N] -- CMD [ARG...]; see lease work --help)")
	}
	if _, err := leasefmt.ParseID(args[0]); err == nil && len(args) > 1 && args[1] == "--" {
		return usageErr("lease work claims from the queue: give no ID (got %s)", args[0])
	}
	if err := proctree.CheckMode(); err != nil {
		return usageErr("%v", err)
	}
	if err := proctree.CheckProc(); err != nil {
		return usageErr("%v", err)
	}
	argv := args
	path, err := lookCommand(argv[0])
	if err != nil {
		return err
	}
	st, err := e.open(false)
	if err != nil {
		return err
	}

	// One dispatcher for the worker's whole life: the first stopping
	// signal cancels ctx (which ends a wait for the queue, and stops the
	// current CMD through the holder); every other signal is CMD's.
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, forwardedSignals...)
	defer stopNotify(sigc)
	parent := c.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	cmdSig := make(chan os.Signal, 8)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		stopping := false
		for {
			select {
			case s := <-sigc:
				if stopSignal(s) && !stopping {
					stopping = true
					cancel(signalled{s})
					continue
				}
				select {
				case cmdSig <- s:
				default:
				}
			case <-quit:
				return
			}
		}
	}()

	out := e.outage("lease work")
	out.Room = st.Root() // no claim while the table's filesystem has no room (worker.NoRoom)
	spec := itemSpec{who: "lease work", path: path, argv: argv, complete: true,
		stdin: c.App.Reader, stdout: c.App.Writer, stderr: c.App.ErrWriter, sigc: cmdSig, stop: ctx}
	var cur itemRun // the item being run (Run, then Done)
	defer func() {
		if spec.sup != nil {
			spec.sup.Close()
		}
	}()
	l := &worker.Loop{Store: st, Owner: e.set.Owner, Timing: e.timing(), MaxItems: maxItems, MaxAttempts: e.set.MaxAttempts, Outage: out,
		Start: func() error {
			if spec.sup != nil && !spec.sup.Gone() {
				return nil
			}
			// One supervisor for the worker's items (a CMD costs its own
			// fork and exec only); again if it was killed.
			sup, err := proctree.StartSupervisor(seconds(e.set.Grace))
			if err != nil {
				return err
			}
			if spec.sup != nil {
				spec.sup.Close()
			}
			spec.sup = sup
			return nil
		},
		Run: func(_ context.Context, held worker.Held, finish func(worker.End) worker.Finished) worker.Ran {
			for _, r := range held.Met {
				fmt.Fprintln(e.errw, failLine(r)) // errors met on the way (a corrupt record)
			}
			h := newHolder(e, st, spec, held)
			h.finisher = finish
			cur = runHeld(h, spec)
			ran := worker.Ran{Finished: h.finished, Again: func() worker.Finished { h.finishAgain(); return h.finished }}
			if h.notStarted {
				ran.Stop = errors.New("CMD could not be started")
			}
			return ran
		},
		Done: func(d worker.Ended) {
			ir := cur
			cur = itemRun{}
			reportItem(e, d, ir)
			if d.Err == nil {
				return
			}
			msg := leasefmt.Bound(fmt.Sprintf("lease work: %v; lease released, %s not run", d.Err, leasefmt.Quote(argv[0])))
			switch {
			case worker.OutageErrno(d.Err):
				// The table could not be written for CMD's staging
				// directory or input: the next claim waits it out.
				fmt.Fprintln(e.errw, msg)
			case errors.Is(d.Err, commit.ErrStageTaken):
				// Another account took the staging directory's name: the
				// lease was released, no attempt counted.
				fmt.Fprintln(e.errw, msg+"; going on")
			default:
				fmt.Fprintln(e.errw, msg+"; stopping")
			}
		},
	}
	stop := l.Work(ctx)
	code := workExit(e, stop, cur)
	if s := stoppedBy(ctx); s != nil && stop.How == worker.EndSignal {
		if sig, ok := s.(syscall.Signal); ok {
			code = exitcode.RunSignal + int(sig)
		}
	}
	if e.json {
		snap := e.snapshot(st)
		snap.Lost = int64(stop.Finishes[worker.HowLost])
		json.NewEncoder(e.errw).Encode(workEndJSON{Command: "work", End: stop.How, Exit: code, Items: stop.Items, Finishes: stop.Finishes, Stats: snap})
	} else if e.verbose {
		fmt.Fprintf(e.errw, "lease work: %s after %d items: %s; exit %d\n", stop.How, stop.Items, formatFinishes(stop.Finishes), code)
	}
	if code != exitcode.OK {
		return cli.Exit("", code)
	}
	return nil
}

// workExit is lease work's exit status for how its loop stopped (the
// last item run: ir), saying on stderr why the table stopped it.
func workExit(e *env, stop worker.Stopped, ir itemRun) int {
	switch stop.How {
	case worker.EndEmpty, worker.EndMaxItems:
		return exitcode.OK
	case worker.EndSignal:
		return exitcode.RunFailed // 128+n below, for the signal that stopped it
	case worker.EndCannotRun:
		return ir.code
	}
	switch {
	case stop.Blocked != nil:
		bad := exitcode.OK
		for _, r := range stop.Blocked.Results {
			if r.Outcome != commit.OK {
				fmt.Fprintln(e.errw, failLine(r))
				bad = exitcode.Worse(bad, exitcode.Of(r.Outcome))
			}
		}
		fmt.Fprintln(e.errw, leasefmt.Bound("lease work: no queued item can be claimed: "+blockedWhy(stop.Blocked.Results)+"; stopping"))
		if bad == exitcode.OK {
			bad = exitcode.IO
		}
		return bad
	case stop.Starting:
		fmt.Fprintln(e.errw, leasefmt.Bound("lease work: "+stop.Err.Error()+"; stopping"))
		return exitcode.RunFailed
	case stop.Trouble != nil && stop.Trouble.Cause() == nil:
		o, _ := stop.Trouble.Trouble()
		fmt.Fprintln(e.errw, leasefmt.Bound(fmt.Sprintf("lease work: %s token %d could not be finished (%s); stopping", stop.Held.ID, stop.Held.Token, o.Reason())))
		return exitcode.Of(o)
	}
	// An outage longer than max_wait, or a table error of an item's
	// staging directory or input (said as the item was reported).
	return exitcode.IO
}

// blockedWhy names the reasons of the results that blocked a claim.
func blockedWhy(res []commit.Result) string {
	seen := map[string]bool{}
	why := ""
	for _, r := range res {
		if w := r.Outcome.Reason(); !seen[w] {
			seen[w] = true
			if why != "" {
				why += ", "
			}
			why += w
		}
	}
	if why == "" {
		return "the queue could not be read"
	}
	return why
}

// reportItem prints what -v and --json say of one item (ir: how its CMD
// ran, zero when it did not).
func reportItem(e *env, d worker.Ended, ir itemRun) {
	f := d.Finished
	var attempts int64
	if rec := f.Result.Record; rec != nil {
		attempts = rec.Attempts
	}
	lost, lostReason := f.How == worker.HowLost, ""
	if lost {
		lostReason = failLine(f.Result)
	}
	if ir.h != nil {
		lost, lostReason = ir.h.lost, ir.h.lostReason
	}
	switch {
	case e.json:
		json.NewEncoder(e.errw).Encode(workItemJSON{Command: "work", Item: d.N, ID: string(d.Held.ID), Token: d.Held.Token,
			ChildStatus: ir.status.code, ChildSignal: ir.status.signal, Lost: lost, LostReason: lostReason,
			Finish: f.How, Attempts: attempts, DurationS: d.Took.Seconds()})
	case e.verbose:
		status := "not run"
		switch {
		case ir.status.signal != "":
			status = "killed by " + ir.status.signal
		case ir.status.code != nil:
			status = fmt.Sprintf("exit %d", *ir.status.code)
		}
		more := ""
		if f.Published {
			more = " (published public/" + string(d.Held.ID) + "/)"
		}
		if attempts > 0 && f.Attempt {
			more += fmt.Sprintf(" (attempt %d)", attempts)
		}
		fmt.Fprintf(e.errw, "lease work: item %d: %s token %d: %s, %s%s, %s\n", d.N, d.Held.ID, d.Held.Token, status, f.How, more, formatSeconds(d.Took.Seconds()))
	}
}

// formatFinishes renders the counts per finish word: "done 3, failed 1".
func formatFinishes(m map[string]int) string {
	out := ""
	for _, k := range []string{worker.HowDone, worker.HowFailed, worker.HowReleased, worker.HowPublishRefused, worker.HowLost, worker.HowByHolderDone, worker.HowByHolderReleased} {
		if m[k] > 0 {
			if out != "" {
				out += ", "
			}
			out += fmt.Sprintf("%s %d", k, m[k])
		}
	}
	for k, v := range m {
		switch k {
		case worker.HowDone, worker.HowFailed, worker.HowReleased, worker.HowPublishRefused, worker.HowLost, worker.HowByHolderDone, worker.HowByHolderReleased:
			continue
		}
		if out != "" {
			out += ", "
		}
		out += fmt.Sprintf("%s %d", k, v)
	}
	if out == "" {
		return "nothing run"
	}
	return out
}
