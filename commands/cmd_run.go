package commands

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/config"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/internal/proctree"
	"github.com/leasetool/lease/internal/slack"
	"github.com/leasetool/lease/keepalive"
	"github.com/leasetool/lease/leasefmt"
)

var runCommand = &cli.Command{
	Name:      "run",
	Usage:     "hold a work lease exactly as long as a command runs",
	ArgsUsage: "ID|--next [--wait [SECONDS]] -- CMD [ARG...]",
	Description: "Claims ID (with --next: the next free item of the table's queue, see lease-claim(1) --next;\n" +
		"or, with --token, adopts the lease ID already held with that token), then runs\n" +
		"CMD with LEASE_ID, LEASE_TOKEN, LEASE_ROOT, LEASE_STAGE and LEASE_INPUT in its environment and renews\n" +
		"the lease every renewal interval while CMD runs. CMD runs under a supervisor, in its own process\n" +
		"group; SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to lease run are forwarded to\n" +
		"that group. No process CMD starts outlives it: when the lease is lost (a renewal or check finds\n" +
		"the token stale or the lease released or revoked, or no renewal succeeded before expires_at -\n" +
		"clock_skew), every process of CMD's tree (setsid or not) gets SIGTERM and, --grace seconds later,\n" +
		"SIGKILL, and lease run exits 124; what CMD leaves running when it exits, and the whole tree when\n" +
		"lease run itself dies (kill -9 included), get the same. When CMD exits, the lease is released,\n" +
		"or with --complete and status 0 marked done; a lease that CMD itself completed with its LEASE_TOKEN\n" +
		"counts as finished. Renewals take at most ttl - interval - clock_skew for a record lock, so a\n" +
		"renewal that waits cannot arrive after the lease counts as lost. CMD's standard streams are\n" +
		"lease run's own; lease run writes only to stderr.",
	Flags: flags(withJSON(commonFlags(), "print a JSON summary on stderr when lease run ends (stdout is CMD's)"), []cli.Flag{
		&cli.BoolFlag{Name: "complete", Usage: "when CMD exits 0, complete the lease (done) instead of releasing it"},
		settingFlag("grace"),
		settingFlag("renew-interval"),
		&cli.StringFlag{Name: "token", Usage: "adopt the lease ID already held with token `N` (from lease claim) instead of claiming it"},
		&cli.BoolFlag{Name: "next", Usage: "claim the next free item of the table's queue (lease add) instead of a named ID; exit 123 when the queue is empty"},
		waitFlag("ID is held by another lease, or the queue is busy (--next)"),
		settingFlag("max-attempts"),
		settingFlag("max-wait"),
	}),
	Action: runRun,
}

// runManual is the hand-written part of lease-run(1).
var runManual = Manual{
	More: "With --next, lease run takes its item from the queue (lease add) as lease claim --next 1 does, without " +
		"a candidate list, and CMD finds it in LEASE_ID. When the queue is empty (every queued item is done) it exits " +
		"123 without running CMD; when every remaining item is held it exits 125, or with --wait waits for one (with " +
		"backoff; --wait=SECONDS at most that long). With --complete, CMD's status 0 marks the item done and removes " +
		"its queue entry; any other status releases it, so that another worker takes it again.\n\n" +
		"With --complete, what CMD left in LEASE_STAGE when it exits 0 is the item's result: it is published " +
		"whole, once, as ROOT/public/ID/ (lease complete --publish . : every file fsynced, then one rename " +
		"that never replaces), and the item is done only when that publish succeeded. A result that cannot be " +
		"published (it holds a symbolic link, or ROOT/public/ID/ exists) leaves the item not done: it is " +
		"released with an attempt counted, LEASE_STAGE stays for lease fsck (moved to lost+found/, never " +
		"deleted), and lease run exits 125. An empty LEASE_STAGE publishes nothing.\n\n" +
		"Attempts: with --complete, a CMD that exits non-zero (not stopped by a signal sent to lease run, " +
		"and with its lease not lost) is a failed run: the release counts an attempt in the record, with " +
		"CMD's exit status and the end of its standard error (which lease run then copies through a pipe); " +
		"when the attempts reach max_attempts (--max-attempts, LEASE_MAX_ATTEMPTS; default 3, 0 for no " +
		"limit) the item becomes failed, which claims refuse until lease retry puts it back. A CMD that fails " +
		"while the table's filesystem has no room (no free inode, or less free than 1% of its size, at least 1 " +
		"MiB, at most 256 MiB) is the machine's failure, not the item's: the item is released with no attempt " +
		"counted, and lease run says so; lease run --next --wait claims nothing while there is no room, waiting " +
		"as for a table that cannot be written (see lease-work(1), No room).\n\n" +
		"LEASE_INPUT is the path of the item's content, ROOT/input/SS/ID, when it was added with lease add " +
		"--content; empty when the item has none.\n\n" +
		"Without --token, the ID must be free (missing, released or expired): lease run claims it with a " +
		"new, larger token. With --token N it adopts a lease claimed earlier (e.g. by `lease claim --first`): " +
		"it renews it once with that token, and refuses (exit 125) when the token is not current and live.\n\n" +
		"With --wait [SECONDS], an ID held by another lease is waited for, as flock -w and consul lock wait: the " +
		"claim is tried again with exponential backoff (50 ms doubling to at most 2 s, with jitter, and woken when " +
		"the lease can be taken over and, on a local filesystem (ext4, XFS, btrfs, tmpfs: inotify), when a holder " +
		"on this machine releases or finishes an item) until it is granted, or until SECONDS have passed (--wait=SECONDS or --wait " +
		"SECONDS ID; tried once more then), which is exit 125 with CMD not run. Without SECONDS it waits for as long " +
		"as it takes; SIGINT or SIGTERM end the wait (exit 125, nothing claimed). What waiting cannot change (done, " +
		"a corrupt record, an I/O error) ends it at once. --wait is refused with --token.\n\n" +
		"A table that cannot be written when CMD has exited (a full or read-only filesystem, EIO, ESTALE): the " +
		"release or completion of the item is waited out as lease work waits (lease-work(1)): said once on stderr, " +
		"tried again after 1 s doubling to 30 s, for at most --max-wait (max_wait; 0, the default: as long as it " +
		"takes), then exit 125 as before; a signal ends the wait (128+n). The exit status is then what it would " +
		"have been at once; a lease that ran out meanwhile (a read-only table takes no renewal) is lost, 124.\n\n" +
		"CMD stages its results in LEASE_STAGE, the staging directory ROOT/stage/ID.TOKEN/ of this token, made " +
		"before CMD starts and removed when CMD leaves it empty; only results staged there can be published with " +
		"this token (fenced staging, see lease-complete(1)). CMD may itself complete the lease with its LEASE_TOKEN, " +
		"e.g. `lease complete --publish NAME` as its last step: renewals then stop (done is final), and lease run " +
		"exits with CMD's status, also when lease run itself was stopped (SIGSTOP) until past the lease's expiry " +
		"meanwhile: a stop point found long past is checked against the record first, and a lease done is not lost. A lease that is released or revoked while CMD runs (lease release, lease " +
		"revoke, by anyone, CMD included) is lost: lease run checks the record, read-only, about every second " +
		"between renewals and stops CMD at once (SIGTERM, then SIGKILL after --grace; exit 124), since the item " +
		"can be claimed again from then on. If lease run is killed, the supervisor notices at once (the end of " +
		"a pipe, not a signal the kernel ties to a thread) and every process of CMD's tree gets SIGTERM, then " +
		"SIGKILL after --grace; the lease expires after its TTL. The supervisor is a child subreaper " +
		"(PR_SET_CHILD_SUBREAPER): a process that leaves CMD's process group or session is still below it, " +
		"and stopped with the rest. If the supervisor itself is killed, CMD dies with it (its parent-death signal), " +
		"a sentinel process that leads CMD's process group kills that group, and lease run, a child subreaper too, " +
		"kills every orphan that came to it; then it releases the item with no attempt counted (the worker's " +
		"failure, not the item's) and exits 125. See lease-work(1), Kills, for what remains possible. In a PID " +
		"namespace whose /proc is not its own (unshare --pid --fork without --mount-proc) lease run refuses to start, " +
		"exit 125 before anything is claimed: see lease-work(1), PID namespaces.\n\n" +
		"Timing: a renewal without --ttl keeps the lease's own duration D (expires_at - renewed_at). The lease " +
		"counts as lost at expires_at - clock_skew, by the local monotonic clock counted from before the write " +
		"that last extended it (after --wait, the claim that granted it: the time spent waiting counts for nothing). When renewals keep failing, CMD gets SIGTERM at that point less the grace and " +
		"SIGKILL at that point, so CMD is gone before any claimer may take the lease over (expires_at + " +
		"clock_skew on a clock up to clock_skew ahead). The grace is --grace, shortened to (D - clock_skew - " +
		"interval) / 2 when it does not fit, so that renewals are retried first.\n\n" +
		"Owner: unless --owner, LEASE_OWNER or a file names one, the lease carries USER@HOST/PID (USER@HOST/rank-N/PID " +
		"under a launcher's task: OMPI_COMM_WORLD_RANK, PMIX_RANK, SLURM_PROCID or PMI_RANK), so that the workers of " +
		"one host are told apart in the records and in lease status.\n\n" +
		"lease run writes only to stderr; with --json it prints one JSON summary there when it ends: id, token, " +
		"exit, child_status, child_signal, lost, lost_reason, finish (released, done, failed, publish-refused, " +
		"by-command-done, by-command-released, lost) and stats, whose lost is 1 when the lease was lost and 0 " +
		"otherwise, as lost says.",
	Exit: runExit,
	Env: []Item{
		{"LEASE_ID", "Set for CMD: the ID held."},
		{"LEASE_TOKEN", "Set for CMD: the fencing token of the lease; pass it to lease complete --publish or lease verify."},
		{"LEASE_ROOT", "Set for CMD: the absolute table root, so that lease commands run by CMD use the same table."},
		{"LEASE_STAGE", "Set for CMD: its staging directory ROOT/stage/ID.TOKEN/, where results for lease complete --publish go; with --complete, what is left there is published as ROOT/public/ID/."},
		{"LEASE_INPUT", "Set for CMD: the path of the item's stored content, ROOT/input/SS/ID (lease add --content), or empty."},
	},
	Examples: []Example{
		{"Fuzz one item for as long as it takes, keeping the lease alive every 10 s; mark it done when the fuzzer exits 0:",
			"lease run --complete --ttl 30 --interval 10 $ID -- ./fuzz.sh"},
		{"The one-line worker: take the next free item of the queue, fuzz it, mark it done; wait while every item is held, stop when all are done (exit 123):",
			"while lease run --next --wait --complete -- ./fuzz-one.sh; do :; done"},
		{"Wait up to 10 minutes for an item another worker holds, then fuzz it:",
			"lease run --wait=600 --complete $ID -- ./fuzz.sh"},
		{"Adopt a lease claimed earlier from a candidate list:",
			"held=$(lease claim --first 1 - < todo) || exit 1   # \"ID TOKEN\"\nset -- $held\nlease run --token \"$2\" \"$1\" -- ./fuzz.sh"},
		{"Publish from inside the command, fenced by its token, exactly once:",
			"lease run $ID -- sh -c 'make-result > \"$LEASE_STAGE/$LEASE_ID.out\" &&\n  echo \"$LEASE_ID $LEASE_TOKEN\" | lease complete --publish \"$LEASE_ID.out\"'"},
	},
	SeeAlso: []string{"lease-claim(1)", "lease-complete(1)", "flock(1)", "timeout(1)"},
	Args:    "id-cmd",
}

func init() {
	register(&Descriptor{Rank: 120, Command: runCommand, Manual: runManual, Launch: Alone, UsageExit: exitcode.RunFailed, Worker: true})
}

// forwardedSignals are passed on to CMD's process group.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// toolFailed turns an error of lease run's own into exit 125, keeping its
// text: a usage or table error must not be mistaken for CMD's status.
func toolFailed(err error) error {
	if err == nil {
		return nil
	}
	return cli.Exit(err.Error(), exitcode.RunFailed)
}

// splitRunArgs splits `ID -- CMD ARG...` (the "--" is optional, and may
// already have been consumed by the flag parser when it came first).
func splitRunArgs(args []string) (leasefmt.ID, []string, error) {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return "", nil, fmt.Errorf("want ID -- CMD [ARG...]")
	}
	id, err := leasefmt.ParseID(args[0])
	if err != nil {
		return "", nil, err
	}
	cmd := args[1:]
	if len(cmd) > 0 && cmd[0] == "--" {
		cmd = cmd[1:]
	}
	if len(cmd) == 0 {
		return "", nil, fmt.Errorf("no command to run after %s (want ID -- CMD [ARG...])", id)
	}
	return id, cmd, nil
}

// args0 is the first of args, "" when there is none.
func args0(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// splitNextArgs takes `-- CMD ARG...` (the "--" optional) of run --next.
func splitNextArgs(args []string) ([]string, error) {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("no command to run (want --next -- CMD [ARG...])")
	}
	if _, err := leasefmt.ParseID(args[0]); err == nil && len(args) > 1 && args[1] == "--" {
		return nil, fmt.Errorf("--next claims from the queue: give no ID (got %s)", args[0])
	}
	return args, nil
}

// lookCommand resolves CMD before anything is claimed, so that a typo
// costs no token: exit 127 when it is not found, 126 when it cannot run.
func lookCommand(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	switch {
	case errors.Is(err, exec.ErrDot):
		return "", cli.Exit(leasefmt.Bound(fmt.Sprintf("%s resolves to the current directory; name it ./%s", leasefmt.Quote(name), name)), exitcode.RunNotFound)
	case errors.Is(err, fs.ErrPermission):
		return "", cli.Exit(leasefmt.Bound(fmt.Sprintf("cannot run %s: %v", leasefmt.Quote(name), err)), exitcode.RunCannotRun)
	}
	return "", cli.Exit(leasefmt.Bound(fmt.Sprintf("cannot run %s: command not found", leasefmt.Quote(name))), exitcode.RunNotFound)
}

// renewLockTimeout bounds the lock wait of a renewal (keepalive.LockWait).
func renewLockTimeout(set *config.Settings) time.Duration {
	return keepalive.LockWait(set.LockTimeout, set.TTL, set.RenewInterval, set.ClockSkew)
}

// childEnv is the environment of CMD: lease run's own with LEASE_ID,
// LEASE_TOKEN, LEASE_ROOT, LEASE_STAGE and LEASE_INPUT set (LEASE_INPUT
// empty when the item has no stored input, so that one inherited from an
// outer lease run never names another item's).
func childEnv(id leasefmt.ID, token int64, root, stage, input string) []string {
	set := map[string]string{"LEASE_ID": string(id), "LEASE_TOKEN": strconv.FormatInt(token, 10), "LEASE_ROOT": root, "LEASE_STAGE": stage, "LEASE_INPUT": input}
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "LEASE_") {
			if _, ours := set[k]; ours || k == slack.Env {
				continue // slack.Env: lease work's, not CMD's
			}
		}
		out = append(out, kv)
	}
	for _, k := range []string{"LEASE_ID", "LEASE_TOKEN", "LEASE_ROOT", "LEASE_STAGE", "LEASE_INPUT"} {
		out = append(out, k+"="+set[k])
	}
	return out
}

// runSummary is what lease run prints with --json (on stderr: stdout
// belongs to CMD).
type runSummary struct {
	Command     string          `json:"command"`
	ID          string          `json:"id"`
	Token       int64           `json:"token"`
	Exit        int             `json:"exit"`
	ChildStatus *int            `json:"child_status"`
	ChildSignal string          `json:"child_signal,omitempty"`
	Lost        bool            `json:"lost"`
	LostReason  string          `json:"lost_reason,omitempty"`
	Finish      string          `json:"finish"`
	Stats       commit.Snapshot `json:"stats"`
}

func runRun(c *cli.Context) error {
	e, err := newEnv(c)
	if err != nil {
		return toolFailed(err)
	}
	if c.IsSet("now") {
		return cli.Exit("--now: lease run keeps time with the system clock while CMD runs", exitcode.RunFailed)
	}
	if !e.set.Explicit("owner") {
		e.set.Owner = config.WorkerOwner(getenv)
	}
	if err := e.set.CheckRenewInterval(); err != nil {
		return toolFailed(err)
	}
	args := c.Args().Slice()
	next := c.Bool("next")
	// A number right after a bare --wait is its value: before the "--" of
	// --next, or before the ID (which is never a number: IDs are 64 hex
	// digits, and may all be digits).
	takeNumber := len(args) > 1 && args[1] == "--"
	if !next {
		_, first := leasefmt.ParseID(args0(args))
		takeNumber = len(args) > 2 && first != nil && args[2] == "--"
	}
	wait, deadline, args, err := waiting(c, args, takeNumber)
	if err != nil {
		return toolFailed(err)
	}
	waitSpan := time.Until(deadline) // for the message of a wait that ran out
	var id leasefmt.ID
	var argv []string
	if next {
		if c.IsSet("token") {
			return cli.Exit("usage: --next claims a new lease; --token adopts a held one: give one of them (see lease run --help)", exitcode.RunFailed)
		}
		argv, err = splitNextArgs(args)
	} else {
		id, argv, err = splitRunArgs(args)
	}
	if err != nil {
		return cli.Exit(leasefmt.Bound("usage: "+err.Error()+" (see lease run --help)"), exitcode.RunFailed)
	}
	var adopt int64
	if c.IsSet("token") {
		if adopt, err = leasefmt.ParseToken(c.String("token")); err != nil {
			return cli.Exit(leasefmt.Bound("--token: "+err.Error()), exitcode.RunFailed)
		}
	}
	if wait && adopt != 0 {
		return cli.Exit("usage: --wait and --token exclude each other: a lease adopted is held already (see lease run --help)", exitcode.RunFailed)
	}
	path, err := lookCommand(argv[0])
	if err != nil {
		return err
	}
	if err := proctree.CheckProc(); err != nil {
		return cli.Exit(leasefmt.Bound(err.Error()), exitcode.RunFailed)
	}
	st, err := e.open(false)
	if err != nil {
		return toolFailed(err)
	}

	// Claim (or adopt) the lease.
	item := commit.Item{ID: id, Token: adopt}
	start := time.Now()
	var res []commit.Result
	switch {
	case next:
		nx := claimNext(c.Context, e, st, 1, wait, deadline)
		switch {
		case nx.Answer == commit.Empty:
			return cli.Exit(answerLine(st, nx)+"; "+leasefmt.Quote(argv[0])+" not run", exitcode.RunEmpty)
		case nx.Answer != commit.Granted:
			for _, r := range nx.Results {
				fmt.Fprintln(e.errw, failLine(r))
			}
			msg := answerLine(st, nx)
			if msg == "" {
				msg = "blocked: no queued item could be claimed"
			}
			return cli.Exit(leasefmt.Bound(msg+"; "+leasefmt.Quote(argv[0])+" not run"), exitcode.RunFailed)
		}
		for _, r := range nx.Results {
			if r.Outcome == commit.OK {
				res = []commit.Result{r}
			} else { // errors met on the way (a corrupt record)
				fmt.Fprintln(e.errw, failLine(r))
			}
		}
		id, item.ID = res[0].ID, res[0].ID
		// As for a named ID below: the local deadline counts from the
		// start of the try that granted the lease, not from before the
		// wait for a busy queue.
		start = nx.started
	case adopt != 0:
		res = st.Renew(e.ctx(), []commit.Item{item}, e.renewTTL())
	case wait:
		// start is that of the last try: the local deadline counts from
		// before the write that granted the lease.
		if res, start, err = claimWaiting(c.Context, e, st, item, deadline); err != nil {
			return cli.Exit(leasefmt.Bound(fmt.Sprintf("%s not claimed: %v; %s not run", id, err, leasefmt.Quote(argv[0]))), exitcode.RunFailed)
		}
	default:
		res = st.Claim(e.ctx(), []commit.Item{item}, e.set.Owner, e.set.TTL)
	}
	if r := res[0]; r.Outcome != commit.OK {
		fmt.Fprintln(e.errw, failLine(r))
		verb := "claimed"
		if adopt != 0 {
			verb = "adopted"
		}
		how := ""
		if wait && !deadline.IsZero() && r.Outcome == commit.Held {
			how = fmt.Sprintf(" within --wait %s", formatSeconds(max(0, waitSpan.Seconds())))
		}
		return cli.Exit(leasefmt.Bound(fmt.Sprintf("%s not %s%s: %s; %s not run", id, verb, how, r.Outcome.Reason(), leasefmt.Quote(argv[0]))), exitcode.RunFailed)
	}
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, forwardedSignals...)
	defer stopNotify(sigc)
	spec := itemSpec{who: "lease run", path: path, argv: argv, complete: c.Bool("complete"), chatty: e.verbose,
		stdin: c.App.Reader, stdout: c.App.Writer, stderr: c.App.ErrWriter, sigc: sigc}
	ir, err := holdItem(e, st, spec, res[0], start)
	if err != nil {
		return err
	}
	h, code, status := ir.h, ir.code, ir.status
	code = waitOutFinish(e, h, code)
	item.Token = h.item.Token
	if e.json {
		// stats.lost counts the leases lost, as lost says: the store's own
		// count also has the checks and the finish that found the lease
		// done or released by CMD itself, which lost nothing.
		snap := e.snapshot(st)
		snap.Lost = 0
		if h.lost {
			snap.Lost = 1
		}
		sum := runSummary{Command: "run", ID: string(id), Token: item.Token, Exit: code, ChildStatus: status.code,
			ChildSignal: status.signal, Lost: h.lost, LostReason: h.lostReason, Finish: h.finish, Stats: snap}
		json.NewEncoder(e.errw).Encode(sum)
	} else if e.verbose {
		s := e.snapshot(st)
		fmt.Fprintf(e.errw, "lease run: %s token %d: renewals=%d lost=%t finish=%s exit=%d duration=%.3fs\n",
			id, item.Token, h.renewals, h.lost, h.finish, code, s.DurationS)
	}
	if code != exitcode.OK {
		return cli.Exit("", code)
	}
	return nil
}

// waitOutFinish: when lease run's finish of its item failed for the
// machine's sake (a full or read-only filesystem, an I/O error, ESTALE),
// it waits that out as lease work does (worker.Outage: the lease stays
// held, tries after 1 s doubling to 30 s, --max-wait bounds it) and
// finishes the item again; the exit status is then what it would have
// been had the finish worked at once. Past --max-wait it is code, the
// failed finish's (125); a stop signal ends the wait with 128+n.
func waitOutFinish(e *env, h *holder, code int) int {
	cause := h.finished.Cause()
	if cause == nil {
		return code
	}
	stopc := make(chan os.Signal, 1)
	signal.Notify(stopc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(stopc)
	ctx, stop := onSignal(e.ctx(), stopc)
	defer stop()
	o := e.outage("lease run")
	fc := code
	for cause != nil {
		if !o.Wait(ctx, cause) {
			if s, ok := stoppedBy(ctx).(syscall.Signal); ok {
				return exitcode.RunSignal + int(s)
			}
			return code
		}
		fc = h.finishAgain()
		cause = h.finished.Cause()
	}
	o.Over()
	switch {
	case h.lost:
		return exitcode.RunLost
	case fc != exitcode.OK && h.fin.exit == exitcode.OK:
		return fc
	}
	return h.fin.exit
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// formatSeconds renders a number of seconds for people: 30s, 333ms, 2m0s.
func formatSeconds(s float64) string {
	return seconds(s).Round(time.Millisecond).String()
}
