package commands

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
)

var claimCommand = &cli.Command{
	Name:      "claim",
	Usage:     "claim free or expired work IDs and print ID TOKEN for each one granted",
	ArgsUsage: "ID...|- | --next N [--wait [SECONDS]]",
	Description: "Claims each ID (given as arguments, or one per line on stdin with - or no argument) that\n" +
		"is missing, released or expired, with a token one larger than any earlier claim of it,\n" +
		"for --owner until now + --ttl, the clock read while the record's lock is held. A lease\n" +
		"counts as expired for a claim only from expires_at + clock_skew. Prints `ID TOKEN` for each\n" +
		"claim granted, in input order; each refusal goes to stderr as `REASON ID TOKEN detail`\n" +
		"(held, done, corrupt, ...; TOKEN is the token on disk, 0 when there is none). A claim whose\n" +
		"lease is over by the time it is durable (input that arrived late, a slow filesystem) is\n" +
		"reported `expired`, not granted. An expired committing record that names a published result\n" +
		"is settled first, never simply taken over: done when the result reached public/ (the claim\n" +
		"then reports `done`), else released and claimed. With --first N at most N of the candidates\n" +
		"are taken, in input order, and the command exits 0 when it got at least one; candidates it\n" +
		"passes over (held or done) are not failures and print nothing (counted with -v and in --json).\n" +
		"--first is for a candidate list you keep yourself; for a campaign, enqueue the work with\n" +
		"lease add and claim with --next instead: a --first claim reads the record of every\n" +
		"candidate it passes over, so its cost grows with the work already done.\n" +
		"The candidates are validated whole (a malformed or repeated ID anywhere is exit 2, nothing\n" +
		"written) into a temporary file, then claimed in chunks of 16384, each one group commit whose\n" +
		"grants are printed once it is durable, so memory does not grow with the input; SIGINT or\n" +
		"SIGTERM stops the claim after the chunk in flight (its grants printed, a line on stderr saying\n" +
		"how far it got, exit 130 or 143). A progress bar goes to stderr when it is a terminal and\n" +
		"the claim runs longer than a second (--progress always|never overrides; not under mpirun,\n" +
		"where the batch runs in one piece).\n\n" +
		"With --next N the claim takes up to N free items of the table's own queue (queue/SS/ID,\n" +
		"filled by lease add) with no candidate list. Its cost does not grow with the number of\n" +
		"items done or queued: it visits the queue shards in random order, reads a few directory\n" +
		"blocks (128 names) at a time and tries them in random order, so workers that start\n" +
		"together do not collide; held items are passed over and the entries of done items are\n" +
		"removed as they are met, silently (counted with -v and in --json). A large N is claimed and\n" +
		"printed at most 16384 at a time, each lot once it is durable (a signal stops it after the\n" +
		"lot in flight, as above). When it gets nothing it\n" +
		"exits 1 with a stderr line that starts with the answer: `empty:` (nothing left to do: every\n" +
		"queued item is done; stop) or `busy:` (items remain but all are held; try again later).\n" +
		"--wait waits for a busy queue, with backoff (50 ms doubling to 2 s, with jitter, and woken\n" +
		"when the first held lease can expire and, on a local filesystem (ext4, XFS, btrfs, tmpfs:\n" +
		"inotify), when a holder on this machine releases or finishes an item), until an item is\n" +
		"granted or the queue is empty;\n" +
		"--wait=SECONDS (or --wait SECONDS) at most that long, then exits 1 busy.",
	Flags: flags(commonFlags(), batchFlags(), []cli.Flag{
		&cli.IntFlag{Name: "first", Usage: "take at most `N` of the candidates, in input order", DefaultText: "every candidate"},
		&cli.IntFlag{Name: "next", Usage: "claim up to `N` free items of the table's queue (lease add), without a candidate list", DefaultText: "claim the IDs given"},
		waitFlag("the queue is busy (--next)"),
		settingFlag("max-wait"),
		progressFlag(),
	}),
	Action: runClaim,
}

// claimManual is the hand-written part of lease-claim(1).
var claimManual = Manual{
	More: "Each record is changed under its lock: an fcntl(2) byte-range lock (POSIX or OFD) on one byte of " +
		"the shard's .lock file (lease-format(5), LOCKS). flock(1) on a .lock file takes a lock of another kind, " +
		"not a record's: on a local filesystem it excludes no claim and no claim waits for it. A script " +
		"serialises with lease through lease itself (a claim, lease run), not with flock.",
	Exit: withInterrupt(claimExit),
	Examples: []Example{
		{"Claim two items; the granted ones are printed as `ID TOKEN`:", "lease claim $ID1 $ID2 >> held"},
		{"Use a file of candidate IDs as a work queue: take the first free one (exit 1 when none is free):", "lease claim --first 1 - < todo >> held"},
		{"Claim for a named owner with a 10 minute lease:", "lease claim --owner \"$(hostname)/fuzz-3\" --ttl 600 $ID"},
		{"Claim the next free item of the queue, waiting while all are held:", "lease claim --next 1 --wait >> held"},
		{"A worker loop that stops when the queue is empty and waits while it is busy:", "while lease claim --next 1 --wait > item; do read ID TOKEN < item; ...; done"},
	},
	SeeAlso: []string{"lease-renew-batch(1)", "lease-run(1)", "lease-release(1)"},
	Args:    "free-ids",
}

func init() {
	register(&Descriptor{Rank: 30, Command: claimCommand, Manual: claimManual, Launch: Distributed, Records: "claims", NotDone: "granted"})
}

func runClaim(c *cli.Context) error {
	mode := c.String("progress")
	if err := checkProgress(mode); err != nil {
		return usageErr("%v", err)
	}
	if c.IsSet("next") {
		return runClaimNext(c, c.Int("next"))
	}
	if c.IsSet("wait") {
		return usageErr("--wait waits for a busy queue: it goes with --next")
	}
	first := c.Int("first")
	if c.IsSet("first") && first < 1 {
		return usageErr("--first %d: want at least 1", first)
	}
	// got counts the grants of --first over the chunks; stop is set once
	// the batch must end early (its N granted, or an I/O error).
	got, stop := 0, false
	spec := batchSpec{name: "claim", kind: leasefmt.Work, spread: !c.IsSet("first"), input: idArgs,
		run: func(e *env, st *commit.Store, items []commit.Item) []commit.Result {
			if !c.IsSet("first") {
				return st.Claim(e.ctx(), items, e.set.Owner, e.set.TTL)
			}
			res := st.ClaimFirst(e.ctx(), items, first-got, e.set.Owner, e.set.TTL)
			for _, r := range res {
				switch r.Outcome {
				case commit.OK:
					got++
				case commit.IOError:
					stop = true
				}
			}
			return res
		}}
	spec.stream = &streamSpec{progress: mode, bar: "claiming", units: "IDs", unique: true, chunk: recordChunk(),
		scan:   claimScan,
		enough: func() bool { return stop || c.IsSet("first") && got >= first },
		interrupted: func(done, total, ok int) string {
			return fmt.Sprintf("lease claim: interrupted after %d of %d IDs: %d granted (the lines printed); the rest were not tried", done, total, ok)
		}}
	if c.IsSet("first") {
		spec.code, spec.silent = firstCode, passedOver
	}
	return runBatch(c, spec)
}

// passedOver: with --first, a candidate that is held, done or failed is
// passed over, not a failure; it prints nothing (counted with -v and in
// --json).
func passedOver(r commit.Result) bool {
	return r.Outcome == commit.Held || r.Outcome == commit.Done || r.Outcome == commit.Failed
}

// firstCode: with --first, getting at least one is success (exit 0,
// lease-claim(1)): a script that keeps what it printed holds every lease it
// got, and the candidates that failed are still reported on stderr. Getting
// none is the most serious failure met (a corrupt record, an I/O error, a
// lock timeout), else a negative answer; held, done or failed candidates
// are passed over, not failures.
func firstCode(res []commit.Result) int {
	got, code := 0, exitcode.OK
	for _, r := range res {
		switch r.Outcome {
		case commit.OK:
			got++
		case commit.Corrupt, commit.IOError, commit.LockTimeout:
			code = exitcode.Worse(code, exitcode.Of(r.Outcome))
		}
	}
	switch {
	case got > 0:
		return exitcode.OK
	case code == exitcode.OK:
		return exitcode.Negative
	}
	return code
}

// claimScan spools the candidates of a claim: the ID arguments, or the
// lines of stdin with - or no argument.
func claimScan(c *cli.Context, sp *spool) error {
	args := c.Args().Slice()
	if len(args) == 0 || len(args) == 1 && args[0] == "-" {
		return spoolInput(c, []string{"-"}, formIDs, sp)
	}
	items, err := idArgs(c)
	if err != nil {
		return err
	}
	for i, it := range items {
		if err := sp.add(it, "argument", i+1); err != nil {
			return err
		}
	}
	return nil
}
