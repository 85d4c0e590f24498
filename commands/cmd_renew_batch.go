package commands

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

var renewBatchCommand = &cli.Command{
	Name:      "renew-batch",
	Usage:     "renew held leases with one shard group commit; a filter over ID TOKEN lines",
	ArgsUsage: "[FILE...]",
	Description: "Reads `ID TOKEN` lines from the FILEs or stdin, validates all of them, then renews every\n" +
		"lease whose token is current and live (not within clock_skew of its expiry) until now + --ttl,\n" +
		"or, without --ttl, for the lease's own duration (expires_at - renewed_at), the clock read\n" +
		"while each record's lock is held. A renewal whose lease is over by the time it is durable is\n" +
		"reported `expired`. Records are written in (shard, ID)\n" +
		"order by a pool of concurrent writers: each record is written to a temp file, fsynced and\n" +
		"renamed over the old one, and each touched shard directory is fsynced once. stdout carries\n" +
		"exactly the lines renewed, in input order, so `lease renew-batch < held > held.new` keeps the\n" +
		"held set current (exit 1 when some lease was lost: its line is simply left out), and --in-place\n" +
		"FILE does it in one step, replacing FILE durably unless nothing could be renewed (exit 2 or 4);\n" +
		"each other line goes to stderr as `REASON ID TOKEN detail`. The input is validated whole into\n" +
		"a temporary file, then renewed in chunks of 16384 leases, each chunk one group commit whose\n" +
		"lines are printed once it is durable, so memory does not grow with the input; SIGINT or\n" +
		"SIGTERM stops it after the chunk in flight, with a line on stderr saying how far it got (exit\n" +
		"130 or 143). When it runs longer than a second a progress bar goes to stderr if stderr is a\n" +
		"terminal, and is cleared at the end (--progress always|never overrides; no bar with --watch\n" +
		"or under mpirun, where the batch runs in one piece).\n" +
		"\n" +
		"With --watch it keeps the leases alive like `etcdctl lease keep-alive`: one round every\n" +
		"renewal interval (--interval) until SIGINT, SIGTERM, SIGHUP or SIGUSR1. Each round re-reads\n" +
		"the FILEs, so a wrapper can append `ID TOKEN` lines for new claims (stdin is read once); a\n" +
		"last line without its newline is taken once it is whole and unchanged for a round. A lease\n" +
		"that is lost (stale token, expired, released, done, missing) is reported on stderr as it\n" +
		"happens and dropped from later rounds; a failure that may pass (lock timeout, I/O error,\n" +
		"corrupt record) is reported and retried until the lease's own expiry. Nothing is printed on\n" +
		"stdout while it runs. A signal makes it report at once, without waiting for the round in\n" +
		"progress (a batch system kills a job soon after its SIGTERM): it prints the lines it still\n" +
		"holds, in input order (those of the last round; before the first round ended, those of the\n" +
		"input), each checked once more as lease verify does (one completed or released since is\n" +
		"reported lost), so `lease renew-batch --watch held > held.new` works, and statistics on\n" +
		"stderr (with -v also after every round); the round in progress then ends and it exits with\n" +
		"the status of that report: signals after the first (Slurm and mpirun each send a job's\n" +
		"SIGTERM, a second ^C) change nothing, up to its exit. With\n" +
		"--output FILE the lines go to FILE instead of stdout, and FILE is replaced whole (temp file,\n" +
		"fsync, rename, directory fsync) after every round that changed the held set and at the end:\n" +
		"a job killed at any moment leaves in FILE the held set of its last round, never half a line.\n" +
		"Lines that are malformed or duplicate in the first round are a usage\n" +
		"error (exit 2, nothing written); in later rounds they are reported once and skipped, and of\n" +
		"two lines with the same ID the larger token is kept. Record locks are waited for at most\n" +
		"ttl - interval, so that a renewal cannot land after the expiry it was meant to prevent; --now\n" +
		"is refused with --watch. With stdin as the only input, it stops by itself once every lease\n" +
		"is lost.\n" +
		"\n" +
		"Under mpirun (built with MPI support) one renew-batch runs as one program: rank 0 reads the\n" +
		"input and broadcasts it, each rank renews the shards s with s % size == rank, and rank 0\n" +
		"prints the results exactly as one process would; every rank exits with the same status.\n" +
		"With --watch the ranks agree at the start of every round whether to stop, so a signal to any\n" +
		"rank stops them all after the round in progress, and rank 0 reports as soon as one reaches\n" +
		"it (\"stopped by SIGUSR1\", also when only another rank received it). mpirun passes SIGUSR1 on to every rank and lets the job end cleanly: stop a watch under\n" +
		"mpirun with `kill -USR1 MPIRUN_PID`. SIGTERM to mpirun (kill, scancel, a Slurm time limit)\n" +
		"makes it pass SIGTERM on, kill the ranks a second later and exit 1, and what rank 0 wrote to\n" +
		"stdout through mpirun may then be lost or cut: in batch jobs give --output FILE (a path rank\n" +
		"0's node can write, on the shared filesystem) or stop the watch with SIGUSR1 before the time\n" +
		"limit, as the sbatch recipe in EXAMPLES does. The renewal interval must be less than\n" +
		"mpi_timeout.\n" +
		"\n" +
		"A full filesystem does not end a live lease: when a renewal's temp file cannot be created or\n" +
		"written for want of space (ENOSPC, or a quota's EDQUOT), the record is written through a spare\n" +
		"of the table's reserve, ROOT/reserve/, overwritten in place and swapped with the record, which\n" +
		"allocates nothing, so holders keep renewing for as long as the disk stays full (lease-format(5),\n" +
		"DURABILITY; -v and --json count spares_used and spares_recycled). Each such record costs its own\n" +
		"two directory fsyncs instead of a share of the batch's. A table without a reserve (made by\n" +
		"another program) fails there with exit 4, once per batch.",
	Flags: flags(commonFlags(), batchFlags(), []cli.Flag{
		&cli.BoolFlag{Name: "watch", Usage: "renew every renewal interval until SIGINT/SIGTERM/SIGHUP/SIGUSR1, re-reading the FILEs each round; print the lines still held when signalled"},
		settingFlag("renew-interval"),
		outputFlag,
		&cli.StringFlag{Name: "progress", Value: "auto", Usage: "progress bar on stderr: auto (when stderr is a terminal), always, never; not with --watch or under mpirun"},
		&cli.BoolFlag{Name: "in-place", Aliases: []string{"i"}, Usage: "renew the lines of the one FILE and replace it by the lines still held, as sed -i does (left as it was when nothing could be renewed: exit 2 or 4)"},
	}),
	Action: runRenewBatch,
}

// renewBatchManual is the hand-written part of lease-renew-batch(1).
var renewBatchManual = Manual{
	Exit: append(withInterrupt(commonExit),
		Item{"", "With --watch: 0 when stopped by SIGINT, SIGTERM, SIGHUP or SIGUSR1 after a round without failures, whatever was lost along the way (losses are reported on stderr and counted in the statistics); otherwise the most serious status of the last round's failures. With stdin as the only input, 1 when it stopped because every lease was lost."}),
	Examples: []Example{
		{"Keep the held set current: the lines still held replace the file, also when some lease was lost (exit 1); it stays as it was on exit 2 or 4:", "lease renew-batch --in-place held"},
		{"The same in longhand (with && instead of ;, one lost lease would keep held from ever being pruned):", "lease renew-batch < held > held.new; [ $? -le 1 ] && mv held.new held"},
		{"Keep every lease of a file alive until the job ends, picking up lines a wrapper appends; what is still held is printed at the end:",
			"lease renew-batch --watch --interval 20 held > held.final &\nwatcher=$!\n# ... claim more: lease claim --first 1 - < todo >> held\nkill -TERM $watcher; wait $watcher"},
		{"Renew from many nodes at once (built with MPI support; rank 0 reads the file; pass it as an argument with --stdin none, since Open MPI 4.x mpirun can crash forwarding stdin, open-mpi/ompi#7483):", "mpirun --stdin none -np 64 lease renew-batch held > held.new"},
		{"Keep a campaign alive from 4 nodes until the job ends, then stop cleanly:",
			"mpirun -np 4 --map-by node lease renew-batch --watch held > held.final &\nkeeper=$!\n# ... workers append to held ...\nkill -USR1 $keeper; wait $keeper"},
		{"A Slurm job that keeps a campaign's leases alive until its time limit. Slurm sends the batch shell SIGUSR1 120 s before the limit (or up to 60 s earlier: its timer's resolution), the trap passes it on to mpirun, which forwards it to every rank, and the watch writes the lines still held to held.final and exits 0; bash's first wait returns when the trap runs, the second gives the watch's status. Should the job be killed anyway (scancel, the limit itself), --output leaves the held set of the last round in held.final. `scancel --batch --signal=USR1 JOBID` stops it the same way by hand:",
			"#!/bin/bash\n#SBATCH --nodes=4 --ntasks-per-node=1 --time=12:00:00\n#SBATCH --signal=B:USR1@120\n" +
				"trap 'kill -USR1 \"$keeper\" 2>/dev/null' USR1\n" +
				"mpirun --stdin none lease renew-batch --watch --output held.final held &\nkeeper=$!\n" +
				"wait \"$keeper\"   # returns when USR1 arrives\nwait \"$keeper\"   # the watch's own exit status"},
		{"Show the group-commit statistics:", "lease renew-batch -v < held > /dev/null"},
	},
	SeeAlso: []string{"lease-claim(1)", "lease-run(1)", "etcdctl(1)"},
}

func init() {
	register(&Descriptor{Rank: 40, Command: renewBatchCommand, Manual: renewBatchManual, Launch: Distributed, NotDone: "renewed"})
}

func runRenewBatch(c *cli.Context) error {
	mode := c.String("progress")
	if err := checkProgress(mode); err != nil {
		return usageErr("%v", err)
	}
	if c.Bool("in-place") {
		return renewInPlace(c, mode)
	}
	if c.Bool("watch") {
		return runWatch(c)
	}
	if c.IsSet("renew-interval") {
		return usageErr("--renew-interval applies only with --watch")
	}
	return runBatch(c, renewSpec(c, mode))
}

// renewSpec is the batch of lease renew-batch.
func renewSpec(c *cli.Context, mode string) batchSpec {
	input := func(c *cli.Context) ([]commit.Item, error) {
		if err := checkOutput(c); err != nil {
			return nil, err
		}
		return tokenLines(c)
	}
	return batchSpec{name: "renew-batch", kind: leasefmt.Work, spread: true, input: input,
		run: func(e *env, st *commit.Store, items []commit.Item) []commit.Result {
			return st.Renew(e.ctx(), items, e.renewTTL())
		},
		stream: &streamSpec{progress: mode, bar: "renewing", units: "leases", unique: true, chunk: recordChunk(),
			scan: func(c *cli.Context, sp *spool) error {
				if err := checkOutput(c); err != nil {
					return err
				}
				return spoolInput(c, c.Args().Slice(), formTokens, sp)
			},
			interrupted: func(done, total, ok int) string {
				return fmt.Sprintf("lease renew-batch: interrupted after %d of %d leases: %d renewed (the lines printed); the rest were not tried", done, total, ok)
			}}}
}
