package commands

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/fsck"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/qualify"
)

var fsckCommand = &cli.Command{
	Name:      "fsck",
	Usage:     "check the table and, with --repair, repair it (exit 0 clean, 1 corrected, 4 left, 8 operational, 16 usage)",
	ArgsUsage: "[SHARD...]",
	Description: "Checks the table at --root: the TABLE header, the layout, every record of every shard\n" +
		"directory (or only the SHARDs given, as SS or KIND/SS), stray temp files, misplaced records,\n" +
		"symbolic links, group manifests against their targets, committing records against\n" +
		"stage/ and public/, and the queue (queue/SS/ID entries). It prints a line per finding (path, ID, what was found and what was\n" +
		"expected), a summary with counts by kind, and the exact command that repairs what is left.\n" +
		"Without --repair nothing is written. With --repair each error is fixed under the record's\n" +
		"lock with the same durable writes as the other commands, so workers may keep running (a name\n" +
		"they remove or rename during the check is no error), and repairs run one at a time: a second\n" +
		"--repair waits for the first, up to --lock-timeout, then exits 8 saying so (lease-format(5), LOCKS):\n" +
		"stray temp files are removed; records that do not validate, symbolic links and anything\n" +
		"in the way of the layout are moved to lost+found/ beside a NAME.why note (never deleted);\n" +
		"misplaced records are moved to their shard; committing records whose result is published\n" +
		"are rolled forward to done; staged names still linked to their published result are removed\n" +
		"(a staged file that only holds the same bytes is moved with its directory); groups whose targets\n" +
		"disagree are released; queue entries of done items are removed, entries in the wrong shard\n" +
		"moved to their shard, and anything in queue/ that is not an empty file named by an ID moved\n" +
		"to lost+found/. In the reserve (reserve/), spares or a lock file that are not regular files\n" +
		"are moved to lost+found/ and spares being made by a process that died are removed; a repair\n" +
		"then tops the reserve up to 256 spares when space allows (a table without reserve/ is left\n" +
		"without one), and the summary says how many there are. Unknown files are reported and left alone; expired leases are\n" +
		"counted and not touched. --json prints one JSON object per finding and a summary object.\n" +
		"A progress bar goes to stderr when it is a terminal (--progress always|never overrides).\n\n" +
		"EXIT STATUS (fsck(8), a sum of): 0 no errors; 1 errors corrected; 4 errors left\n" +
		"uncorrected; 8 operational error; 16 usage error.",
	Flags: flags(withJSON(commonFlags(), "print one JSON object per finding and then a summary object, one per line, instead of text"), []cli.Flag{
		&cli.BoolFlag{Name: "repair", Usage: "repair what can be repaired (default: check only, write nothing)"},
		&cli.StringFlag{Name: "progress", Value: "auto", Usage: "progress bar on stderr: auto (when stderr is a terminal), always, never"},
	}),
	Action: runFsck,
}

// fsckManual is the hand-written part of lease-fsck(1).
var fsckManual = Manual{
	More: "Debris is not damage: a worker killed at any point (kill -9 of lease run or lease work, a node that " +
		"died) leaves the temp files of the record writes it had under way (.ID.json.tmp.*, input/SS/.ID.tmp.*) and " +
		"staging directories of tokens that are no longer current (empty, or with what it staged; a result that " +
		"could not be published leaves one too). A check reports each as a notice (severity notice, \"debris\":true " +
		"in --json, and a debris count in the summary) that does not change the exit status: after a campaign in " +
		"which workers were killed, lease fsck exits 0. --repair sweeps it as it always did: temp files are removed " +
		"under the record's lock, empty staging directories are removed, and staging directories with anything in " +
		"them are moved to lost+found/, never deleted; each such line says swept, and sweeping changes the exit " +
		"status only when it fails (4). A temp file of lease add --content younger than an hour may be a live " +
		"add's and is left alone.\n\n" +
		"On NFS a file removed or renamed over while a process of the same client has it open (a record read " +
		"while another process of that client rewrote it) stays as .nfs followed by hex digits in its directory " +
		"until the last process closes it; the client then removes it. lease fsck reports each such file, wherever " +
		"it is in the table, as an nfs-silly-rename notice (\"NFS silly-rename file (removed while open; the client " +
		"deletes it on close)\"): not a record, not damage, no effect on the exit status, and --repair leaves it " +
		"where it is. A stale staging directory that holds only such files is left with them (a notice; moving it " +
		"would move files that may be open): a later --repair removes it once the client deleted them. The " +
		"summary, status and claim --next pass such names over.\n\n" +
		"In a table shared by a group (lease init --shared) it also checks the modes: every directory must be " +
		"setgid and readable, writable and searchable by the group, the root and stage/ also sticky (else a member " +
		"can rename another's TABLE or live staging directory and put a link at its name; --repair gives the sticky " +
		"bit to shared tables made before it was set), every shard lock file writable by the group, " +
		"and all of them in the root's group; each one that is not is a `permission` error, which --repair fixes " +
		"(chmod and chgrp, through a descriptor, never following a link) when it runs as the owner of the file or as " +
		"root, and otherwise reports as left. The sharing TABLE records must be within the root's own mode and never let " +
		"others write: a TABLE that asks for more (a member of the group may have replaced it) is a `permission` error " +
		"that --repair never applies. A shard lock file readable by an account that may not write it (others; the group " +
		"when it lacks write) is a `permission` error too, and --repair narrows its mode: a read lock needs only read " +
		"access and stops every writer of the shard. In every table, a read lock held on a lock file is a `lock` error: " +
		"lease's writers take write locks only, so whoever holds it could not have held a lease; --repair cannot " +
		"release it. A table that is not shared is not checked for modes: who may use it is its owner's choice (lease " +
		"makes its lock files 0600; those an older lease made keep the umask's modes: chmod go-rwx ROOT/*/*/.lock).\n\n" +
		"After a power cut (or a machine that crashed) nothing acknowledged needs repairing: every operation that " +
		"returned success was durable before it returned, and each record is its old version or its new one, never a " +
		"mix (a renew-batch cut half-way leaves some of its leases with the old expiry and some with the new, each a " +
		"valid record). What a check can find is what the writes under way left: temp files of record writes not yet " +
		"renamed and staging directories of tokens no longer current (debris: --repair removes the temp files and " +
		"empty directories and moves the rest to lost+found/); a complete --publish cut between its move and done " +
		"(unfinished-publish: rolled forward to done, the result is in public/; once expired with the result still " +
		"staged, abandoned-publish: rolled back to released, the item runs again); a group claim, renewal or release " +
		"cut half-way, whose manifest and targets disagree (the group is released); queue entries of items that became " +
		"done (removed); a tally that differs from the records (fixed). --repair does not touch leases held at the cut: " +
		"they expire at their time and claims then take them over with larger tokens (tokens never go back), so the " +
		"campaign goes on from the repaired table. Real power cuts of a Linux kernel's ext4, XFS and btrfs under a " +
		"lease workload check all of this (docs/safety.md, Power cuts of a real kernel).",
	Exit: fsckExit,
	Files: []Item{
		{"ROOT/lost+found/", "Where --repair quarantines what it cannot trust; nothing is deleted."},
		{"ROOT/stage/ID.TOKEN/", "Staging directories; those of tokens that are not current are debris (notices), which --repair moves to lost+found/ (empty ones removed)."},
		{"ROOT/public/", "Published results; one that no done or committing record names is moved to lost+found/."},
		{"ROOT/queue/SS/ID", "The queue: empty files of queued items that are not done; entries of done items are removed (the kind of finding is queue)."},
		{"ROOT/tally/", "The tally the summary counts from (lease-format(5)): each finished record's link, each unqueued unfinished record's flag, nothing else. While tally/TRUSTED exists a difference is an error (tally) that --repair fixes under the record's lock; on a table whose tally is not trusted (made before it, or untrusted by a writer that could not keep it) --repair builds it quietly and trusts it when the whole check left nothing wrong."},
	},
	Examples: []Example{
		{"Check a table after a crash (read-only):", "lease fsck --root /scratch/campaign/table"},
		{"Repair it, then check again (exit 1: errors corrected, 0: clean):", "lease fsck --repair; lease fsck"},
		{"Machine-readable findings:", "lease fsck --json | jq .summary"},
	},
	SeeAlso: []string{"lease-status(1)", "fsck(8)"},
}

func init() {
	register(&Descriptor{Rank: 140, Command: fsckCommand, Manual: fsckManual, Launch: Alone, UsageExit: exitcode.FsckUsage})
}

// fsck exit statuses (fsck(8)).
const (
	fsckOperational = exitcode.FsckOperational
	fsckUsage       = exitcode.FsckUsage
)

// fsckErr turns the usage errors of the shared helpers (exit 2) into fsck's
// usage status (16) and everything else that stops the check into 8.
func fsckErr(err error) error {
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		switch ec.ExitCode() {
		case exitcode.Usage:
			return cli.Exit(ec.Error(), fsckUsage)
		case fsckUsage, fsckOperational:
			return err
		}
		return cli.Exit(ec.Error(), fsckOperational)
	}
	return cli.Exit(leasefmt.Bound(err.Error()), fsckOperational)
}

func runFsck(c *cli.Context) error {
	mode := c.String("progress")
	if err := checkProgress(mode); err != nil {
		return cli.Exit(leasefmt.Bound("usage: "+err.Error()), fsckUsage)
	}
	e, err := newEnv(c)
	if err != nil {
		return fsckErr(err)
	}
	root := e.root()
	opt := fsck.Options{
		Repair:      c.Bool("repair"),
		Now:         e.now,
		ClockSkew:   e.set.ClockSkew,
		LockTimeout: time.Duration(e.set.LockTimeout * float64(time.Second)),
		Shards:      c.Args().Slice(),
	}
	if e.set.Explicit("shards") {
		opt.WorkShards = e.set.Shards
	}
	if e.set.Explicit("target_shards") {
		opt.TargetShards = e.set.TargetShards
	}
	f, err := seam.OS(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return cli.Exit(leasefmt.Bound(fmt.Sprintf("no lease table at %s: the directory does not exist", root)), fsckOperational)
		}
		return cli.Exit(leasefmt.Bound(fmt.Sprintf("table root %s: %v", root, err)), fsckOperational)
	}
	defer f.Close()
	e.warnUnsafe(qualify.Inspect(root), nil)

	p := &fsckPrinter{root: root, json: e.json, w: bufio.NewWriter(e.out), repairCmd: repairCommand(root, opt)}
	if showProgress(mode, e.errw) {
		bar := newFsckBar(e.errw)
		defer bar.finish()
		opt.Progress = bar.update
		p.before = bar.clear
	}
	sum, err := fsck.Check(e.ctx(), root, f, opt, p.finding)
	if err != nil {
		p.w.Flush()
		switch {
		case errors.Is(err, fsck.ErrUsage):
			return cli.Exit(leasefmt.Bound("usage: "+strings.TrimPrefix(err.Error(), fsck.ErrUsage.Error()+": ")), fsckUsage)
		case errors.Is(err, fsck.ErrNoTable):
			return cli.Exit(leasefmt.Bound(strings.TrimPrefix(err.Error(), "fsck: ")), fsckOperational)
		}
		return cli.Exit(leasefmt.Bound(err.Error()), fsckOperational)
	}
	p.summary(sum)
	if err := p.w.Flush(); err != nil {
		return cli.Exit(fmt.Sprintf("stdout: %v", err), fsckOperational)
	}
	if code := sum.Exit(); code != exitcode.FsckClean {
		return cli.Exit("", code)
	}
	return nil
}

// repairCommand is the command that repairs what a run leaves.
func repairCommand(root string, opt fsck.Options) string {
	parts := []string{"lease", "fsck", "--repair", "--root", shellQuote(root)}
	if opt.WorkShards != 0 {
		parts = append(parts, "--shards", fmt.Sprint(opt.WorkShards))
	}
	if opt.TargetShards != 0 {
		parts = append(parts, "--target-shards", fmt.Sprint(opt.TargetShards))
	}
	for _, s := range opt.Shards {
		parts = append(parts, shellQuote(s))
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._+-=,:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fsckPrinter prints findings as they stream and the summary at the end.
type fsckPrinter struct {
	root      string
	json      bool
	w         *bufio.Writer
	repairCmd string
	before    func() // clears the progress bar before a line
}

func (p *fsckPrinter) abs(rel string) string {
	if rel == "" {
		return p.root
	}
	return filepath.Join(p.root, filepath.FromSlash(rel))
}

// findingJSON is one finding of --json output.
type findingJSON struct {
	Type        string `json:"type"`
	Kind        string `json:"kind"`
	Severity    string `json:"severity"`
	Path        string `json:"path"`
	ID          string `json:"id,omitempty"`
	Found       string `json:"found"`
	Expected    string `json:"expected,omitempty"`
	Repair      string `json:"repair,omitempty"`
	Debris      bool   `json:"debris,omitempty"`
	Repaired    bool   `json:"repaired"`
	Done        string `json:"done,omitempty"`
	RepairError string `json:"repair_error,omitempty"`
	MovedTo     string `json:"moved_to,omitempty"`
}

func (p *fsckPrinter) finding(f *fsck.Finding) {
	if p.before != nil {
		p.before()
	}
	defer p.w.Flush()
	if p.json {
		j := findingJSON{Type: "finding", Kind: string(f.Kind), Severity: f.Severity().String(), Path: p.abs(f.Path), ID: string(f.ID),
			Found: leasefmt.Bound(f.Found), Expected: leasefmt.Bound(f.Expected), Repair: f.Repair, Debris: f.Debris, Repaired: f.Repaired, Done: leasefmt.Bound(p.absDone(f))}
		if f.RepairErr != nil {
			j.RepairError = leasefmt.Bound(f.RepairErr.Error())
		}
		if f.MovedTo != "" {
			j.MovedTo = p.abs(f.MovedTo)
		}
		json.NewEncoder(p.w).Encode(j)
		return
	}
	status := f.Severity().String()
	switch {
	case f.Repaired && f.Debris:
		status = "swept"
	case f.Repaired:
		status = "repaired"
	case f.RepairErr != nil:
		status = "unrepaired"
	}
	// Each part is bounded and escaped on its own (a file name may hold a
	// newline), so a long part cannot cut off what was done.
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", status, f.Kind, leasefmt.Bound(p.abs(f.Path)))
	if f.ID != "" {
		fmt.Fprintf(&b, " id %s", f.ID)
	}
	fmt.Fprintf(&b, ": %s", leasefmt.Bound(f.Found))
	if f.Expected != "" {
		fmt.Fprintf(&b, "; want %s", leasefmt.Bound(f.Expected))
	}
	switch {
	case f.Repaired:
		fmt.Fprintf(&b, " => %s", leasefmt.Bound(p.absDone(f)))
	case f.RepairErr != nil:
		fmt.Fprintf(&b, " => repair failed: %s", leasefmt.Bound(f.RepairErr.Error()))
	case f.Debris && f.Repair == "":
		b.WriteString(" (debris of a killed worker, not damage; left alone)")
	case f.Debris:
		fmt.Fprintf(&b, " (debris of a killed worker, not damage; --repair: %s)", leasefmt.Bound(f.Repair))
	case f.Severity() == fsck.Notice:
		b.WriteString(" (left alone)")
	case f.Repair != "":
		fmt.Fprintf(&b, " (repair: %s)", leasefmt.Bound(f.Repair))
	}
	fmt.Fprintln(p.w, b.String())
}

// absDone renders what a repair did with the moved-to name made absolute.
func (p *fsckPrinter) absDone(f *fsck.Finding) string {
	if f.MovedTo == "" {
		return f.Done
	}
	return strings.ReplaceAll(f.Done, f.MovedTo, p.abs(f.MovedTo))
}

// summaryJSON is the last object of --json output.
type summaryJSON struct {
	Type          string         `json:"type"`
	Root          string         `json:"root"`
	Repair        bool           `json:"repair"`
	WorkShards    int            `json:"work_shards,omitempty"`
	TargetShards  int            `json:"target_shards,omitempty"`
	Directories   int            `json:"directories"`
	Records       map[string]int `json:"records"`
	Live          int            `json:"live"`
	Expired       int            `json:"expired"`
	Errors        int            `json:"errors"`
	Found         map[string]int `json:"found"`
	Repaired      map[string]int `json:"repaired"`
	Left          map[string]int `json:"left"`
	Debris        map[string]int `json:"debris"`
	Swept         map[string]int `json:"swept"`
	Exit          int            `json:"exit"`
	RepairCommand string         `json:"repair_command,omitempty"`
	// Spares is the number of spares in the reserve, SparesMade those this
	// repair made (docs/design.md#durability).
	Spares     int `json:"spares,omitempty"`
	SparesMade int `json:"spares_made,omitempty"`
}

func kindCounts(m map[fsck.Kind]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[string(k)] = v
	}
	return out
}

func listCounts(m map[fsck.Kind]int) string {
	var parts []string
	for _, k := range fsck.Kinds(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func (p *fsckPrinter) summary(s *fsck.Summary) {
	if p.before != nil {
		p.before()
	}
	left := fsck.Count(s.Left)
	cmd := ""
	if left > 0 {
		cmd = p.repairCmd
	}
	if p.json {
		j := summaryJSON{Type: "summary", Root: p.root, Repair: s.Repair, Directories: s.Dirs, Records: s.Records,
			Live: s.Live, Expired: s.Expired, Errors: s.Errors(), Found: kindCounts(s.Found), Repaired: kindCounts(s.Repaired),
			Left: kindCounts(s.Left), Debris: kindCounts(s.Debris), Swept: kindCounts(s.Swept), Exit: s.Exit(), RepairCommand: cmd,
			Spares: s.Spares, SparesMade: s.SparesMade}
		if s.Table != nil {
			j.WorkShards, j.TargetShards = s.Table.WorkShards, s.Table.TargetShards
		}
		json.NewEncoder(p.w).Encode(j)
		return
	}
	total := 0
	for _, n := range s.Records {
		total += n
	}
	fmt.Fprintf(p.w, "checked %d records in %d directories of %s (work %d, targets %d, groups %d): %d live, %d expired (expiry is normal; expired leases are not touched)\n",
		total, s.Dirs, p.root, s.Records["work"], s.Records["targets"], s.Records["groups"], s.Live, s.Expired)
	errs := map[fsck.Kind]int{}
	notices := map[fsck.Kind]int{}
	for k, v := range s.Found {
		switch v -= s.Debris[k]; {
		case v == 0:
		case k.Severity() == fsck.Error:
			errs[k] = v
		case k.Severity() == fsck.Notice:
			notices[k] = v
		}
	}
	if n := fsck.Count(errs); n > 0 {
		fmt.Fprintf(p.w, "errors: %d (%s)\n", n, listCounts(errs))
	} else {
		fmt.Fprintln(p.w, "errors: none")
	}
	if n := fsck.Count(notices); n > 0 {
		fmt.Fprintf(p.w, "notices: %d (%s), left alone\n", n, listCounts(notices))
	}
	if s.Spares > 0 || s.SparesMade > 0 {
		fmt.Fprintf(p.w, "reserve: %d spares (%d made by this repair) for renewals and completes on a full filesystem\n", s.Spares, s.SparesMade)
	}
	switch n, swept := fsck.Count(s.Debris), fsck.Count(s.Swept); {
	case n > 0 && s.Repair:
		fmt.Fprintf(p.w, "debris of killed workers: %d (%s), swept %d (not damage)\n", n, listCounts(s.Debris), swept)
	case n > 0:
		fmt.Fprintf(p.w, "debris of killed workers: %d (%s), not damage: lease fsck --repair sweeps it\n", n, listCounts(s.Debris))
	}
	if n := s.Found[fsck.KindIO]; n > 0 {
		fmt.Fprintf(p.w, "operational errors: %d (see the io lines); the check is incomplete\n", n)
	}
	if s.Repair {
		if n := fsck.Count(s.Repaired); n > 0 {
			fmt.Fprintf(p.w, "repaired: %d (%s)\n", n, listCounts(s.Repaired))
		}
		if left > 0 {
			fmt.Fprintf(p.w, "left: %d (%s); see the unrepaired lines, fix their cause, then run:\n  %s\n", left, listCounts(s.Left), cmd)
		}
		return
	}
	if left > 0 {
		fmt.Fprintf(p.w, "the table has errors; to repair them run:\n  %s\n", cmd)
	}
}

// fsckBar is the progress bar over shard directories.
type fsckBar struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func newFsckBar(w io.Writer) *fsckBar { return &fsckBar{w: w} }

func (b *fsckBar) update(done, total, records int) {
	if b.bar == nil {
		b.bar = newBar(b.w, total, "checking shard directories", "dirs")
	}
	b.bar.Describe(fmt.Sprintf("checked %d records", records))
	b.bar.Set(done)
}

func (b *fsckBar) clear() {
	if b.bar != nil {
		b.bar.Clear()
	}
}

func (b *fsckBar) finish() {
	if b.bar != nil {
		b.bar.Finish()
	}
}
