package commands

//go:generate go run ./gen -o ..

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/config"
)

// This file generates the man pages (man/) and shell completions
// (completions/) from the command definitions of NewApp plus the
// hand-written text below; `go run ./commands/gen` writes them and
// TestDocsUpToDate fails when the checked-in files are stale. urfave's own
// ToMan leaves out Description and ArgsUsage, so pages are written here
// with a small roff writer.

// docInfo is the hand-written part of a command's man page.
type docInfo struct {
	// more is appended to the command's Description (docs markup, see
	// roff.markup).
	more string
	// exit lists the exit statuses; nil means the common ones.
	exit []docItem
	// env and files are entries added to the common ones.
	env, files []docItem
	examples   []docExample
	seeAlso    []string
	// args says how shells complete the positional arguments: "ids" (work
	// IDs of the table), "targets" (target IDs), "files", "id-cmd" (an ID,
	// then -- and a command line) or "none"; "" derives it from ArgsUsage.
	args string
}

type docItem struct{ tag, text string }

type docExample struct{ text, code string }

// commonExit are the exit statuses of every command but fsck and run
// (SPEC §7).
var commonExit = []docItem{
	{"0", "Success: every line succeeded (claim --first: at least one claim was granted)."},
	{"1", "A negative answer: a lease was not granted, was lost, or a token was stale."},
	{"2", "Usage, configuration or input error; nothing was written."},
	{"3", "A corrupt record was met and left alone (see lease-fsck(1))."},
	{"4", "I/O or durability error; nothing in flight was reported as a success."},
	{"5", "A record lock could not be taken within --lock-timeout."},
	{"", "A batch goes on past records that are lost or corrupt and exits with the most serious outcome met: 4 over 3 over 5 over 1 over 0."},
}

var fsckExit = []docItem{
	{"0", "The table is clean."},
	{"1", "Errors were found and corrected (--repair)."},
	{"4", "Errors were left uncorrected."},
	{"8", "Operational error: the table could not be checked."},
	{"16", "Usage or configuration error."},
}

var runExit = []docItem{
	{"", "The exit status of CMD, when it ran and the lease was held until it exited and then finished (released or completed)."},
	{"124", "The lease was lost while CMD ran (or before it could be finished); CMD was sent SIGTERM and, after --grace seconds, SIGKILL."},
	{"125", "The lease was not granted (held, done, corrupt, ...) or lease run itself failed (bad ID, configuration, table error, or the lease could not be released or completed after CMD exited 0). CMD did not run, or its status was 0."},
	{"126", "CMD was found but could not be run."},
	{"127", "CMD was not found; nothing was claimed."},
	{"128+n", "CMD was killed by signal n (137 for SIGKILL)."},
}

// docs holds the hand-written text of each command. TestDocsCoverCommands
// fails when a command of NewApp has no entry.
var docs = map[string]docInfo{
	"init": {
		examples: []docExample{
			{"Create a table with 64 work shards on a shared filesystem:", "lease init --root /scratch/campaign/table --shards 64"},
			{"Check that an existing table has the shard count a script expects (exit 2 if not):", "lease init --shards 64"},
		},
		seeAlso: []string{"lease-config(1)", "lease-fsck(1)"},
	},
	"claim": {
		examples: []docExample{
			{"Claim two items; the granted ones are printed as `ID TOKEN`:", "lease claim $ID1 $ID2 >> held"},
			{"Use a file of candidate IDs as a work queue: take the first free one (exit 1 when none is free):", "lease claim --first 1 - < todo >> held"},
			{"Claim for a named owner with a 10 minute lease:", "lease claim --owner \"$(hostname)/fuzz-3\" --ttl 600 $ID"},
		},
		seeAlso: []string{"lease-renew-batch(1)", "lease-run(1)", "lease-release(1)"},
	},
	"renew-batch": {
		exit: append(append([]docItem(nil), commonExit...),
			docItem{"", "With --watch: 0 when stopped by SIGINT, SIGTERM, SIGHUP or SIGUSR1 after a round without failures, whatever was lost along the way (losses are reported on stderr and counted in the statistics); otherwise the most serious status of the last round's failures. With stdin as the only input, 1 when it stopped because every lease was lost."}),
		examples: []docExample{
			{"Keep the held set current (the lines renewed replace the file):", "lease renew-batch < held > held.new && mv held.new held"},
			{"Keep every lease of a file alive until the job ends, picking up lines a wrapper appends; what is still held is printed at the end:",
				"lease renew-batch --watch --interval 20 held > held.final &\nwatcher=$!\n# ... claim more: lease claim --first 1 - < todo >> held\nkill -TERM $watcher; wait $watcher"},
			{"Renew from many nodes at once (built with MPI support; rank 0 reads the file; pass it as an argument with --stdin none, since Open MPI 4.x mpirun can crash forwarding stdin, open-mpi/ompi#7483):", "mpirun --stdin none -np 64 lease renew-batch held > held.new"},
			{"Keep a campaign alive from 4 nodes until the job ends, then stop cleanly:",
				"mpirun -np 4 --map-by node lease renew-batch --watch held > held.final &\nkeeper=$!\n# ... workers append to held ...\nkill -USR1 $keeper; wait $keeper"},
			{"Show the group-commit statistics:", "lease renew-batch -v < held > /dev/null"},
		},
		seeAlso: []string{"lease-claim(1)", "lease-run(1)", "etcdctl(1)"},
	},
	"release": {
		examples: []docExample{
			{"Release everything held:", "lease release held"},
			{"Release one lease:", "echo \"$ID $TOKEN\" | lease release"},
		},
		seeAlso: []string{"lease-claim(1)", "lease-complete(1)", "lease-revoke(1)"},
	},
	"revoke": {
		examples: []docExample{
			{"Take an item back from a worker that hangs (its lease run stops its command within a second):", "lease revoke $ID"},
			{"Take back every lease a dead node held:", "lease status --json --live | jq -r 'select(.owner | startswith(\"node-7/\")) | .id' | lease revoke"},
		},
		seeAlso: []string{"lease-release(1)", "lease-run(1)", "lease-status(1)", "etcdctl(1)"},
	},
	"complete": {
		files: []docItem{
			{"ROOT/stage/ID.TOKEN/NAME", "A result staged by the holder of token TOKEN of ID (same filesystem as the table); only that holder's directory is ever published from."},
			{"ROOT/public/NAME", "The published result; never replaced."},
		},
		examples: []docExample{
			{"Finish the leases that are still ours:", "lease verify < held | lease complete"},
			{"Publish a result exactly once, only if the lease is still current (exit 1 and nothing moved otherwise):",
				"mkdir -p \"$LEASE_ROOT/stage/$ID.$TOKEN\"\ncp crash.bin \"$LEASE_ROOT/stage/$ID.$TOKEN/$ID.crash\"\necho \"$ID $TOKEN\" | lease complete --publish \"$ID.crash\""},
			{"Inside lease run, the staging directory is given:", "cp crash.bin \"$LEASE_STAGE/$LEASE_ID.crash\" &&\n  echo \"$LEASE_ID $LEASE_TOKEN\" | lease complete --publish \"$LEASE_ID.crash\""},
		},
		seeAlso: []string{"lease-verify(1)", "lease-run(1)", "lease-fsck(1)"},
	},
	"verify": {
		examples: []docExample{
			{"Pass on only the lines whose token is current and live:", "lease verify < held > still-held"},
			{"Fence a side effect on the lease:", "echo \"$ID $TOKEN\" | lease verify >/dev/null && upload results/$ID"},
		},
		seeAlso: []string{"lease-complete(1)", "lease-renew-batch(1)"},
	},
	"run": {
		more: "Without --token, the ID must be free (missing, released or expired): lease run claims it with a " +
			"new, larger token. With --token N it adopts a lease claimed earlier (e.g. by `lease claim --first`): " +
			"it renews it once with that token, and refuses (exit 125) when the token is not current and live.\n\n" +
			"CMD stages its results in LEASE_STAGE, the staging directory ROOT/stage/ID.TOKEN/ of this token, made " +
			"before CMD starts and removed when CMD leaves it empty; only results staged there can be published with " +
			"this token (fenced staging, see lease-complete(1)). CMD may itself complete the lease with its LEASE_TOKEN, " +
			"e.g. `lease complete --publish NAME` as its last step: renewals then stop (done is final), and lease run " +
			"exits with CMD's status. A lease that is released or revoked while CMD runs (lease release, lease " +
			"revoke, by anyone, CMD included) is lost: lease run checks the record, read-only, about every second " +
			"between renewals and stops CMD at once (SIGTERM, then SIGKILL after --grace; exit 124), since the item " +
			"can be claimed again from then on. If lease run is killed, CMD gets SIGTERM (PR_SET_PDEATHSIG) and the " +
			"lease expires after its TTL.\n\n" +
			"Timing: a renewal without --ttl keeps the lease's own duration D (expires_at - renewed_at). The lease " +
			"counts as lost at expires_at - clock_skew, by the local monotonic clock counted from before the write " +
			"that last extended it. When renewals keep failing, CMD gets SIGTERM at that point less the grace and " +
			"SIGKILL at that point, so CMD is gone before any claimer may take the lease over (expires_at + " +
			"clock_skew on a clock up to clock_skew ahead). The grace is --grace, shortened to (D - clock_skew - " +
			"interval) / 2 when it does not fit, so that renewals are retried first.\n\n" +
			"lease run writes only to stderr; with --json it prints one JSON summary there when it ends: id, token, " +
			"exit, child_status, child_signal, lost, lost_reason, finish (released, done, by-command-done, " +
			"by-command-released, lost) and stats.",
		exit: runExit,
		env: []docItem{
			{"LEASE_ID", "Set for CMD: the ID held."},
			{"LEASE_TOKEN", "Set for CMD: the fencing token of the lease; pass it to lease complete --publish or lease verify."},
			{"LEASE_ROOT", "Set for CMD: the absolute table root, so that lease commands run by CMD use the same table."},
			{"LEASE_STAGE", "Set for CMD: its staging directory ROOT/stage/ID.TOKEN/, where results for lease complete --publish go."},
		},
		examples: []docExample{
			{"Fuzz one item for as long as it takes, keeping the lease alive every 10 s; mark it done when the fuzzer exits 0:",
				"lease run --complete --ttl 30 --interval 10 $ID -- ./fuzz.sh"},
			{"Take the first free item of a queue and run under that lease:",
				"held=$(lease claim --first 1 - < todo) || exit 1   # \"ID TOKEN\"\nset -- $held\nlease run --token \"$2\" \"$1\" -- ./fuzz.sh"},
			{"Publish from inside the command, fenced by its token, exactly once:",
				"lease run $ID -- sh -c 'make-result > \"$LEASE_STAGE/$LEASE_ID.out\" &&\n  echo \"$LEASE_ID $LEASE_TOKEN\" | lease complete --publish \"$LEASE_ID.out\"'"},
		},
		seeAlso: []string{"lease-claim(1)", "lease-complete(1)", "flock(1)", "timeout(1)"},
		args:    "id-cmd",
	},
	"status": {
		examples: []docExample{
			{"Show what is held now:", "lease status --live"},
			{"Count done items with jq:", "lease status --json | jq -s 'map(select(.status == \"done\")) | length'"},
			{"List the leases that ran out (their holders are gone):", "lease status --expired"},
		},
		seeAlso: []string{"lease-fsck(1)"},
	},
	"config": {
		examples: []docExample{
			{"Show the effective settings and where each came from:", "lease config"},
			{"Check a configuration file:", "lease config --config campaign.toml"},
		},
		seeAlso: []string{"lease-format(5)"},
	},
	"version": {
		examples: []docExample{{"Print the version:", "lease version"}},
	},
	"group-claim": {
		files: []docItem{
			{"ROOT/targets/SS/ID.json", "Target lease records."},
			{"ROOT/groups/SS/GID.json", "Group manifests."},
		},
		examples: []docExample{
			{"Claim three targets as one group; prints `GID TOKEN`:", "lease group-claim $T1 $T2 $T3 > group"},
			{"Claim the targets listed in a file:", "lease group-claim - < targets > group"},
		},
		seeAlso: []string{"lease-group-renew(1)", "lease-group-release(1)"},
		args:    "targets",
	},
	"group-renew": {
		files: []docItem{
			{"ROOT/targets/SS/ID.json", "Target lease records."},
			{"ROOT/groups/SS/GID.json", "Group manifests."},
		},
		examples: []docExample{
			{"Renew a group and all its targets, all or nothing:", "lease group-renew < group > group.new && mv group.new group"},
		},
		seeAlso: []string{"lease-group-claim(1)", "lease-group-release(1)"},
	},
	"group-release": {
		files: []docItem{
			{"ROOT/targets/SS/ID.json", "Target lease records."},
			{"ROOT/groups/SS/GID.json", "Group manifests."},
		},
		examples: []docExample{
			{"Release a group and its targets:", "lease group-release group"},
		},
		seeAlso: []string{"lease-group-claim(1)", "lease-group-renew(1)"},
	},
	"fsck": {
		exit: fsckExit,
		files: []docItem{
			{"ROOT/lost+found/", "Where --repair quarantines what it cannot trust; nothing is deleted."},
			{"ROOT/stage/ID.TOKEN/", "Staging directories; those of tokens that are not current are moved to lost+found/ (empty ones removed)."},
			{"ROOT/public/", "Published results; one that no done or committing record names is moved to lost+found/."},
		},
		examples: []docExample{
			{"Check a table after a crash (read-only):", "lease fsck --root /scratch/campaign/table"},
			{"Repair it, then check again (exit 1: errors corrected, 0: clean):", "lease fsck --repair; lease fsck"},
			{"Machine-readable findings:", "lease fsck --json | jq .summary"},
		},
		seeAlso: []string{"lease-status(1)", "fsck(8)"},
	},
	"qualify": {
		examples: []docExample{
			{"Check that the filesystem holding the table is fit (exit 1 when it is not):", "lease qualify --root /scratch/campaign/table"},
			{"Check a whole cluster before a campaign (built with MPI support):", "mpirun -np 16 --map-by node lease qualify --rounds 8 --json > proof.json"},
		},
		seeAlso: []string{"lease-format(5)"},
	},
}

// placeholders name the values of flags without a `placeholder` in their
// usage.
var placeholders = map[string]string{
	"root": "DIR", "config": "FILE", "owner": "NAME", "ttl": "SECONDS", "now": "SECONDS",
	"lock-timeout": "SECONDS", "target-timeout": "SECONDS", "interval": "SECONDS", "grace": "SECONDS",
	"mpi-timeout": "SECONDS", "shards": "N", "target-shards": "N", "writers": "N",
}

// flagDoc is what pages and completions need of one flag.
type flagDoc struct {
	long   string
	short  []string
	value  string // placeholder; "" for a switch
	usage  string
	kind   string // "dir", "file" or "" (what the value completes to)
	hidden bool
}

func (f flagDoc) names() []string {
	var out []string
	for _, s := range f.short {
		out = append(out, "-"+s)
	}
	if f.long != "" {
		out = append(out, "--"+f.long)
	}
	return out
}

func flagDocs(fl []cli.Flag) []flagDoc {
	var out []flagDoc
	for _, f := range fl {
		if f == cli.HelpFlag {
			continue // urfave adds it to a command the first time the command runs
		}
		d := flagDoc{}
		for _, n := range f.Names() {
			if len(n) == 1 {
				d.short = append(d.short, n)
			} else if d.long == "" {
				d.long = n
			}
		}
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			d.hidden = true
		}
		takesFile := false
		switch x := f.(type) {
		case *cli.StringFlag:
			takesFile = x.TakesFile
		case *cli.PathFlag:
			takesFile = x.TakesFile
		case *cli.StringSliceFlag:
			takesFile = x.TakesFile
		case *cli.GenericFlag:
			takesFile = x.TakesFile
		}
		if g, ok := f.(cli.DocGenerationFlag); ok {
			d.usage = g.GetUsage()
			if g.TakesValue() {
				name, usage := unquoteUsage(d.usage)
				d.usage = usage
				switch {
				case name != "":
					d.value = name
				case placeholders[d.long] != "":
					d.value = placeholders[d.long]
				default:
					d.value = "VALUE"
					switch f.(type) {
					case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
						d.value = "N"
					case *cli.Float64Flag:
						d.value = "NUMBER"
					}
				}
			}
		}
		switch {
		case d.value == "DIR":
			d.kind = "dir"
		case takesFile || d.value == "FILE" || d.value == "PATH":
			d.kind = "file"
		}
		out = append(out, d)
	}
	return out
}

// unquoteUsage takes the `placeholder` out of a flag's usage, as urfave
// does for its help.
func unquoteUsage(usage string) (string, string) {
	i := strings.IndexByte(usage, '`')
	if i < 0 {
		return "", usage
	}
	j := strings.IndexByte(usage[i+1:], '`')
	if j < 0 {
		return "", usage
	}
	name := usage[i+1 : i+1+j]
	return name, usage[:i] + name + usage[i+2+j:]
}

// visibleCommands are the commands of app that get pages and completions.
func visibleCommands(app *cli.App) []*cli.Command {
	var out []*cli.Command
	for _, c := range app.Commands {
		if !c.Hidden && c.Name != "help" {
			out = append(out, c)
		}
	}
	return out
}

// argKind says how a command's positional arguments complete.
func argKind(c *cli.Command) string {
	if k := docs[c.Name].args; k != "" {
		return k
	}
	u := c.ArgsUsage
	switch {
	case strings.Contains(u, "CMD"):
		return "id-cmd"
	case strings.Contains(u, "TARGET"):
		return "targets"
	case strings.HasPrefix(strings.TrimLeft(u, "["), "ID"):
		return "ids"
	case strings.Contains(u, "FILE"):
		return "files"
	}
	return "none"
}

// DocFile is one generated documentation file, its path relative to the
// repository root.
type DocFile struct {
	Path string
	Data []byte
}

// DocFiles renders every man page and shell completion of app.
func DocFiles(app *cli.App) []DocFile {
	cmds := visibleCommands(app)
	var out []DocFile
	out = append(out, DocFile{"man/lease.1", mainPage(app, cmds)})
	for _, c := range cmds {
		out = append(out, DocFile{"man/lease-" + c.Name + ".1", commandPage(c)})
	}
	out = append(out, DocFile{"man/lease-format.5", formatPage()})
	out = append(out,
		DocFile{"completions/lease.bash", bashCompletion(cmds)},
		DocFile{"completions/_lease", zshCompletion(cmds)},
		DocFile{"completions/lease.fish", fishCompletion(cmds)})
	return out
}

// generatedDirs are the directories DocFiles owns: WriteDocs removes files
// there that it no longer generates (a page of a removed command).
var generatedDirs = []string{"man", "completions"}

// WriteDocs writes DocFiles(NewApp()) under root (the repository root) and
// removes stale generated files. It returns the paths it changed.
func WriteDocs(root string) ([]string, error) {
	files := DocFiles(NewApp())
	want := map[string]bool{}
	var changed []string
	for _, f := range files {
		want[f.Path] = true
		p := filepath.Join(root, filepath.FromSlash(f.Path))
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, f.Data) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return changed, err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return changed, err
		}
		changed = append(changed, f.Path)
	}
	for _, d := range generatedDirs {
		ents, err := os.ReadDir(filepath.Join(root, d))
		if err != nil {
			return changed, err
		}
		for _, e := range ents {
			rel := d + "/" + e.Name()
			if !e.IsDir() && !want[rel] {
				if err := os.Remove(filepath.Join(root, d, e.Name())); err != nil {
					return changed, err
				}
				changed = append(changed, rel+" (removed)")
			}
		}
	}
	return changed, nil
}

// ---- roff ----

// roff writes a man page. Text goes through markup: paragraphs are
// separated by blank lines, a line starting with a tab is a literal line,
// a line starting with "- " starts a bullet item, and `code` is bold.
type roff struct{ b strings.Builder }

func (r *roff) line(s string) { r.b.WriteString(s + "\n") }

// esc escapes text for roff: backslashes, dashes (so that options render as
// ASCII hyphen-minus) and a leading control character.
func esc(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// inline escapes s and renders `code` spans in bold.
func inline(s string) string {
	s = esc(s)
	s = codeSpan.ReplaceAllString(s, `\fB$1\fR`)
	if strings.HasPrefix(s, `\fB.`) || strings.HasPrefix(s, `\fB'`) {
		s = `\&` + s
	}
	return s
}

func (r *roff) th(name, section string) {
	r.line(`.\" Generated by go run ./commands/gen from the lease command definitions; do not edit.`)
	r.line(fmt.Sprintf(`.TH %s %s "" "lease %s" "lease manual"`, strings.ToUpper(name), section, esc(Version)))
	r.line(".nh") // no hyphenation: option names and identifiers stay whole
}

func (r *roff) sh(name string) { r.line(".SH " + name) }

// markup renders docs markup.
func (r *roff) markup(text string) {
	paras := strings.Split(strings.Trim(text, "\n "), "\n\n")
	for i, p := range paras {
		if i > 0 {
			r.line(".PP")
		}
		literal := false
		for _, l := range strings.Split(p, "\n") {
			switch {
			case strings.HasPrefix(l, "\t"):
				if !literal {
					r.line(".PP")
					r.line(".RS 4")
					r.line(".nf")
					literal = true
				}
				r.line(esc(strings.TrimPrefix(l, "\t")))
				continue
			case literal:
				r.line(".fi")
				r.line(".RE")
				r.line(".PP")
				literal = false
			}
			l = strings.TrimSpace(l)
			if l == "" {
				continue
			}
			if strings.HasPrefix(l, "- ") {
				r.line(`.IP \(bu 2`)
				l = strings.TrimPrefix(l, "- ")
			}
			r.line(inline(l))
		}
		if literal {
			r.line(".fi")
			r.line(".RE")
		}
	}
}

// items renders a tagged list.
func (r *roff) items(list []docItem) {
	for _, it := range list {
		if it.tag == "" {
			r.line(".PP")
		} else {
			r.line(".TP")
			r.line(`\fB` + esc(it.tag) + `\fR`)
		}
		r.line(inline(it.text))
	}
}

// code renders a literal block.
func (r *roff) code(text string) {
	r.line(".PP")
	r.line(".RS 4")
	r.line(".nf")
	for _, l := range strings.Split(text, "\n") {
		r.line(esc(l))
	}
	r.line(".fi")
	r.line(".RE")
}

func (r *roff) examples(ex []docExample) {
	for _, x := range ex {
		r.line(".PP")
		r.line(inline(x.text))
		r.code(x.code)
	}
}

var upperWord = regexp.MustCompile(`[A-Z][A-Z0-9_]*`)

// synopsis renders ArgsUsage with its placeholders in italics.
func synopsis(name, args string) string {
	s := `\fBlease ` + esc(name) + `\fR [\fIOPTIONS\fR]`
	if a := strings.TrimSpace(args); a != "" {
		s += " " + upperWord.ReplaceAllString(esc(a), `\fI$0\fR`)
	}
	return s
}

func (r *roff) options(fl []flagDoc) {
	for _, f := range fl {
		if f.hidden {
			continue
		}
		var tags []string
		for _, n := range f.names() {
			tags = append(tags, `\fB`+esc(n)+`\fR`)
		}
		tag := strings.Join(tags, ", ")
		if f.value != "" {
			tag += ` \fI` + esc(f.value) + `\fR`
		}
		r.line(".TP")
		r.line(tag)
		r.line(inline(sentence(f.usage)))
	}
	r.line(".TP")
	r.line(`\fB\-h\fR, \fB\-\-help\fR`)
	r.line("Show the command's help and exit.")
}

// sentence capitalizes s and ends it with a period.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// envDocs lists the environment variables of the settings a command has
// flags for.
func envDocs(fl []flagDoc) []docItem {
	has := map[string]bool{}
	for _, f := range fl {
		has[f.long] = true
	}
	var out []docItem
	for _, d := range config.All {
		if has[d.Flag] {
			out = append(out, docItem{d.Env, sentence(fmt.Sprintf("%s (setting %s, flag --%s, default %s)", d.Usage, d.Key, d.Flag, d.Default))})
		}
	}
	if has["config"] {
		out = append(out, docItem{"LEASE_CONFIG", "The TOML configuration file, when --config is not given."},
			docItem{"XDG_CONFIG_HOME", "The configuration file $XDG_CONFIG_HOME/lease/config.toml is read when neither --config, LEASE_CONFIG nor ./lease.toml names one (default ~/.config)."})
	}
	if has["owner"] {
		out = append(out, docItem{"USER", "The default owner is USER@HOST."})
	}
	return out
}

// mergeItems appends more to list, joining the text of an entry whose tag
// is already there.
func mergeItems(list, more []docItem) []docItem {
	out := append([]docItem(nil), list...)
next:
	for _, m := range more {
		for i := range out {
			if out[i].tag == m.tag {
				out[i].text += " " + m.text
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

var commonFiles = []docItem{
	{"ROOT/TABLE", "The table header: schema, shard counts, creation time (see lease-format(5))."},
	{"ROOT/work/SS/ID.json", "One work lease record per ID, in shard directory SS."},
	{"ROOT/work/SS/.lock", "The lock file of shard SS: a byte-range lock per record."},
	{"./lease.toml, $XDG_CONFIG_HOME/lease/config.toml", "Configuration files, when --config and LEASE_CONFIG name none."},
}

// pageName is "lease-claim" for claim.
func pageName(c *cli.Command) string { return "lease-" + c.Name }

func commandPage(c *cli.Command) []byte {
	info := docs[c.Name]
	fl := flagDocs(c.Flags)
	r := &roff{}
	r.th(pageName(c), "1")
	r.sh("NAME")
	r.line(esc(pageName(c)) + ` \- ` + inline(c.Usage))
	r.sh("SYNOPSIS")
	r.line(synopsis(c.Name, c.ArgsUsage))
	r.sh("DESCRIPTION")
	desc := c.Description
	if desc == "" {
		desc = sentence(c.Usage)
	}
	if info.more != "" {
		desc += "\n\n" + info.more
	}
	r.markup(desc)
	r.sh("OPTIONS")
	r.options(fl)
	r.sh("EXIT STATUS")
	exit := info.exit
	if exit == nil {
		exit = commonExit
	}
	r.items(exit)
	r.sh("ENVIRONMENT")
	r.items(mergeItems(envDocs(fl), info.env))
	r.sh("FILES")
	r.items(append(append([]docItem(nil), commonFiles...), info.files...))
	r.line(".PP")
	r.line(inline("ROOT is the table root (--root, LEASE_ROOT, default ./lease-table)."))
	r.sh("EXAMPLES")
	ex := info.examples
	if len(ex) == 0 {
		ex = []docExample{{"Show the options:", "lease " + c.Name + " --help"}}
	}
	r.examples(ex)
	r.sh("SEE ALSO")
	see := append([]string{"lease(1)", "lease-format(5)"}, info.seeAlso...)
	r.line(seeAlso(see))
	return []byte(r.b.String())
}

// seeAlso renders "lease(1), lease-format(5)" with bold names.
func seeAlso(refs []string) string {
	var parts []string
	for _, ref := range refs {
		if i := strings.IndexByte(ref, '('); i > 0 {
			parts = append(parts, `\fB`+esc(ref[:i])+`\fR`+ref[i:])
		} else {
			parts = append(parts, esc(ref))
		}
	}
	return strings.Join(parts, ",\n")
}

func mainPage(app *cli.App, cmds []*cli.Command) []byte {
	r := &roff{}
	r.th("lease", "1")
	r.sh("NAME")
	r.line(`lease \- ` + inline(app.Usage))
	r.sh("SYNOPSIS")
	r.line(`\fBlease\fR \fICOMMAND\fR [\fIOPTIONS\fR] [\fIARGS\fR]`)
	r.br()
	r.line(`\fBlease\fR [\fICOMMAND\fR] \fB\-\-help\fR`)
	r.br()
	r.line(`\fBlease\fR \fB\-\-version\fR`)
	r.sh("DESCRIPTION")
	r.markup(app.Description + "\n\n" + mainDescription)
	r.sh("COMMANDS")
	for _, c := range cmds {
		r.line(".TP")
		r.line(`\fBlease ` + esc(c.Name) + `\fR ` + upperWord.ReplaceAllString(esc(strings.TrimSpace(c.ArgsUsage)), `\fI$0\fR`))
		r.line(inline(sentence(c.Usage)) + " See \\fB" + esc(pageName(c)) + "\\fR(1).")
	}
	r.sh("OPTIONS")
	r.line("Every command accepts these options after its name (\\fBlease claim \\-\\-root\\fR \\fIDIR\\fR \\fIID\\fR); each command's page lists its own.")
	r.options(flagDocs(commonFlags()))
	r.sh("EXIT STATUS")
	r.items(commonExit)
	r.line(".PP")
	r.line("\\fBlease fsck\\fR follows fsck(8) (0 clean, 1 corrected, 4 left uncorrected, 8 operational error, 16 usage) and \\fBlease run\\fR passes on its command's status (124 lease lost, 125 not granted, 126/127 cannot run); see their pages.")
	r.sh("ENVIRONMENT")
	var env []docItem
	for _, d := range config.All {
		env = append(env, docItem{d.Env, sentence(fmt.Sprintf("%s (setting %s, flag --%s, default %s)", d.Usage, d.Key, d.Flag, d.Default))})
	}
	env = append(env, docItem{"LEASE_CONFIG", "The TOML configuration file, when --config is not given."},
		docItem{"XDG_CONFIG_HOME", "Where the user configuration file lease/config.toml is looked for (default ~/.config)."},
		docItem{"USER", "The default owner is USER@HOST."},
		docItem{"GOMAXPROCS", "Go's count of threads running Go code at once. A concurrent batch raises it to min(writers, 4 times the CPU count) while it runs, so that writers coming back from fsync and rename find one free; a value set in the environment is left alone."})
	r.items(env)
	r.sh("FILES")
	r.items(append(append([]docItem(nil), commonFiles...),
		docItem{"ROOT/targets/, ROOT/groups/", "Target lease records and group manifests."},
		docItem{"ROOT/stage/, ROOT/public/", "Results staged by lease holders, and published by lease complete --publish."},
		docItem{"ROOT/lost+found/", "Where lease fsck --repair quarantines what it cannot trust."}))
	r.sh("EXAMPLES")
	r.examples(mainExamples)
	r.sh("SEE ALSO")
	see := []string{}
	for _, c := range cmds {
		see = append(see, pageName(c)+"(1)")
	}
	see = append(see, "lease-format(5)", "flock(1)", "fsck(8)")
	r.line(seeAlso(see))
	return []byte(r.b.String())
}

func (r *roff) br() { r.line(".br") }

const mainDescription = "Every batch command is a filter over lines of `ID TOKEN` (whitespace-separated; blank lines and " +
	"# comments skipped), read from FILE arguments or stdin. stdout carries exactly the lines that succeeded, in " +
	"input order, in the same format; each failure goes to stderr as `REASON ID TOKEN detail` with a stable reason " +
	"word: stale-token, expired, held, done, released, missing, exists, corrupt, lock-timeout, io-error. So " +
	"`lease renew-batch < held > held.new` keeps the held set current, and `lease verify < held | lease complete` " +
	"composes. --json prints one JSON document with full detail and statistics instead. Input is validated whole " +
	"before any write: a malformed line or a duplicate ID is exit 2, nothing written.\n\n" +
	"An ID is exactly 64 lowercase hex characters (a SHA-256 digest). Every claim of an ID gets a token larger than " +
	"any earlier claim of it; a holder proves the lease is still its own with that token (fencing). " +
	"Every record change is locked, validated, written to a temporary file, fsynced, renamed into place, and its " +
	"directory fsynced before success is reported; a batch fsyncs each shard directory once (group commit). " +
	"lease-format(5) describes the table.\n\n" +
	"Settings come from flags, then the environment, then a TOML file (--config FILE, else ./lease.toml, else " +
	"$XDG_CONFIG_HOME/lease/config.toml), then defaults; `lease config` shows each value and its origin. The " +
	"default TTL is max(120, 4 * target_timeout) seconds and the renewal interval max(0.1, min(30, ttl / 3))."

var mainExamples = []docExample{
	{"A worker in four lines:", "export LEASE_ROOT=/scratch/campaign/table\n" +
		"lease claim --first 1 - < todo >> held\n" +
		"lease renew-batch < held > held.new && mv held.new held\n" +
		"lease verify < held | lease complete"},
	{"Hold a lease exactly as long as a fuzzer runs:", "lease run --complete $ID -- ./fuzz.sh"},
	{"After a crash:", "lease fsck --repair"},
}

func formatPage() []byte {
	r := &roff{}
	r.th("lease-format", "5")
	r.sh("NAME")
	r.line(`lease\-format \- layout and record format of a lease table`)
	r.sh("DESCRIPTION")
	r.markup(formatIntro)
	for _, s := range formatSections {
		r.sh(s.title)
		r.markup(s.text)
	}
	r.sh("EXAMPLES")
	r.examples(formatExamples)
	r.sh("SEE ALSO")
	r.line(seeAlso([]string{"lease(1)", "lease-fsck(1)", "lease-qualify(1)", "fcntl(2)", "rename(2)", "fsync(2)"}))
	return []byte(r.b.String())
}

const formatIntro = "A lease table is a directory tree on a POSIX filesystem shared by every worker (local disk, " +
	"NFS, Lustre). Other programs (Python coordinators, shell scripts, jq) read and write the same table, so the " +
	"layout, the records, the durability protocol and the locks below are an interface, not an implementation " +
	"detail."

var formatSections = []struct{ title, text string }{
	{"LAYOUT", "\tROOT/TABLE                     table header (JSON), written once, durably\n" +
		"\tROOT/work/SS/ID.json           work lease records\n" +
		"\tROOT/targets/SS/ID.json        target lease records\n" +
		"\tROOT/groups/SS/GID.json        group manifests, one per claimed target group\n" +
		"\tROOT/{work,targets,groups}/SS/.lock   lock file of shard SS\n" +
		"\tROOT/stage/ID.TOKEN/NAME       results staged by the holder of token TOKEN of ID\n" +
		"\tROOT/public/NAME               results published by lease complete --publish\n" +
		"\tROOT/lost+found/               where lease fsck --repair quarantines what it cannot trust\n\n" +
		"An ID is exactly 64 lowercase hex characters (a SHA-256 digest). Anything else is rejected before any " +
		"file is touched, so no path can be built from a bad ID.\n\n" +
		"The shard of an ID is int(ID[0:8], 16) % shards. The shard directory SS is the shard index in lowercase " +
		"hex, zero-padded to max(2, len(hex(shards - 1))) digits: with 16 shards, 00 to 0f.\n\n" +
		"TABLE holds one JSON object:\n\n" +
		"\t{\"schema\":\"lease.table/v1\",\"work_shards\":N,\"target_shards\":M,\"created_at\":T}\n\n" +
		"It is authoritative: shard counts from the configuration apply only when the table is created, and an explicit " +
		"conflicting --shards is a usage error. ROOT/stage/ must be on the same filesystem as ROOT/public/.\n\n" +
		"Only lease init creates a table: every other command refuses a ROOT without TABLE (exit 2) and creates " +
		"nothing there, so a mistyped root or an unset LEASE_ROOT never starts a second campaign. Missing " +
		"directories of an existing table (stage/, public/, a shard) are created on demand, durably (mkdir, then " +
		"an fsync of the parent), since other programs make tables too."},
	{"RECORDS", "One JSON object per file, UTF-8, newline-terminated, at most 4 KiB. A work record:\n\n" +
		"\t{\"schema\":\"lease.work/v1\",\"id\":\"<ID>\",\"status\":\"leased\",\n" +
		"\t \"owner\":\"host-a/fuzz-3\",\"token\":7,\"claimed_at\":1764450000.5,\n" +
		"\t \"renewed_at\":1764450030.5,\"expires_at\":1764450150.5}\n\n" +
		"status is one of leased, committing, released, done. A committing record written by lease complete " +
		"--publish also carries `\"publish\":\"<basename>\"`; a done record keeps it. A lease is live when its " +
		"status is leased or committing and now < expires_at. Times are seconds since the Unix epoch as JSON " +
		"numbers, written with microsecond precision.\n\n" +
		"The token of an ID never decreases, and every new claim of an ID gets a strictly larger token than any " +
		"earlier claim of it (fencing): a holder that lost its lease cannot renew, release, complete or publish " +
		"with its old token. This holds across repair too: when lease fsck --repair quarantines a record, it " +
		"leaves a released record in its place (owner lease-fsck) whose token is at least the highest token it " +
		"can read from the quarantined bytes, or, when it can read none, a token no earlier claim can have had " +
		"(the time in microseconds).\n\n" +
		"An expired committing record that carries publish is never simply taken over: whoever meets it under " +
		"its lock first (the next claim, lease revoke, lease fsck --repair) rolls it forward to done when the " +
		"result is in public/, or back to released when the staged result is still in its staging directory " +
		"(the file stays there), so a result is published at most once per ID.\n\n" +
		"A target record (targets/SS/ID.json, schema lease.target/v1) has the same fields plus " +
		"`\"group\":\"<GID>\"`; its status is leased or released. A group manifest (groups/SS/GID.json, schema " +
		"lease.group/v1) has the fields of a work record plus `\"targets\":[sorted unique IDs]`. All targets of a " +
		"live group carry the group's token, owner and expires_at.\n\n" +
		"Readers must reject: an unknown schema; missing fields or fields of the wrong type; an id different from " +
		"the file name; non-canonical IDs; a token that is not an integer in [1, 2^53-1]; times that are not " +
		"finite numbers >= 0 (the literals NaN and Infinity included); an owner that is empty, longer than 256 " +
		"bytes or holds control characters; an unknown status; duplicate keys. Unknown extra keys are preserved " +
		"on rewrite. A record that exists but does not validate is never treated as free and never overwritten " +
		"by normal operations: it is reported as corrupt (exit 3) and left for lease fsck."},
	{"DURABILITY", "Every record change is: lock; re-read and validate under the lock; write a temporary file " +
		"`.ID.json.tmp.<random>` in the same directory; flush and fsync it; rename it over ID.json; fsync the " +
		"directory before success is reported. The invariants:\n\n" +
		"- G1: content is fsynced before its name changes.\n" +
		"- G2: each record switches atomically, with one rename.\n" +
		"- G3: success is returned only after every directory touched by the operation was fsynced.\n" +
		"- G4: within one batch each directory is fsynced once (group commit: N file fsyncs and K directory fsyncs for N records in K shards).\n" +
		"- G5: if record i fails, the directories of records already renamed are still fsynced before the error is returned.\n" +
		"- G6: a failed directory fsync fails the whole batch: nothing is reported as renewed.\n" +
		"- G7: a stale token (or a done, released, missing or corrupt record) causes no write and no fsync.\n" +
		"- G8: a batch refuses a rename whose source and destination directories differ; the move from stage/ to public/ is a durable replace that fsyncs the destination directory first, then the source directory, and never replaces an existing name.\n" +
		"- G9: a group is all-or-nothing: all locks in a fixed global order, all tokens validated before the first write, old records restored if any write or barrier fails."},
	{"STAGING", "A holder stages results in its own directory ROOT/stage/ID.TOKEN/, named by its token (lease " +
		"run makes it and passes it as LEASE_STAGE). lease complete --publish NAME fsyncs ROOT/stage/ID.TOKEN/NAME, " +
		"writes the record committing with publish NAME, moves the file to ROOT/public/NAME with the durable " +
		"cross-directory replace (never over an existing name) and writes the record done, all under the record's " +
		"lock, and only while TOKEN is current. A stale holder writing the same NAME writes into its own, " +
		"never-published directory. Staging directories of tokens that are no longer current are garbage that " +
		"lease fsck --repair moves to lost+found/ (never deletes)."},
	{"CLOCKS", "Every operation reads the clock while it holds the record's lock, never once per process: " +
		"input that arrives late cannot grant or renew a lease that is already over, and a claim or renewal whose " +
		"new expires_at (less clock_skew) has passed by the time it is durable is reported expired, not granted. " +
		"A renewal without --ttl keeps the lease's own duration (expires_at - renewed_at). clock_skew (default " +
		"1 s) bounds the clock difference between nodes: a claimer takes over an expired lease only when now >= " +
		"expires_at + clock_skew, and a holder (verify, renew, complete, lease run) counts its lease as lost from " +
		"expires_at - clock_skew."},
	{"LOCKS", "Mutual exclusion per record is an exclusive fcntl(2) write lock (POSIX or OFD; they conflict with " +
		"each other on Linux) on one byte of the shard's .lock file, at offset int(ID[0:15], 16), length 1. The " +
		"kernel drops it when the holder dies; it works between processes and between the nodes of a shared " +
		"filesystem that supports fcntl locks. The shard lock file is created once and never deleted. Waiting " +
		"is bounded (--lock-timeout, default 10 s; exit 5 past it). Groups take the manifest's lock first, then " +
		"the targets' locks in ascending ID order.\n\n" +
		"A program that changes records without lease must take the same lock, follow the durability protocol " +
		"above, and never write a token smaller than the record's."},
}

var formatExamples = []docExample{
	{"Find the record of an ID in a table with 16 work shards:",
		"id=$(printf item-42 | sha256sum | cut -c1-64)\nprintf '%02x\\n' $(( 0x${id:0:8} % 16 ))   # shard directory\ncat \"$LEASE_ROOT/work/$(printf '%02x' $(( 0x${id:0:8} % 16 )))/$id.json\""},
	{"Read every live lease with jq:", "lease status --json --live | jq -r '[.id, .owner, .token] | @tsv'"},
}

// ---- completions ----

// complCmd is what the completion scripts know about one command.
type complCmd struct {
	name, usage string
	flags       []flagDoc
	args        string
}

func complCmds(cmds []*cli.Command) []complCmd {
	var out []complCmd
	for _, c := range cmds {
		cc := complCmd{name: c.Name, usage: c.Usage, args: argKind(c)}
		for _, f := range flagDocs(c.Flags) {
			if !f.hidden {
				cc.flags = append(cc.flags, f)
			}
		}
		cc.flags = append(cc.flags, flagDoc{long: "help", short: []string{"h"}, usage: "show help"})
		out = append(out, cc)
	}
	return out
}

// maxCompletionIDs bounds how many IDs a completion reads from the table.
const maxCompletionIDs = 4096

const completionHeader = "Generated by `go run ./commands/gen` from the lease command definitions; do not edit."

func bashCompletion(cmds []*cli.Command) []byte {
	cc := complCmds(cmds)
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# bash completion for lease(1)\n# %s\n#\n", completionHeader)
	w("# Install: source this file, or copy it to /usr/share/bash-completion/completions/lease.\n")
	w("# IDs come from `lease status --json` on the table the command line names (at most %d).\n\n", maxCompletionIDs)
	w(`# _lease_ids KIND: the IDs of records of KIND (work or targets) in the table
# that --root/--config on the command line (or the environment) names.
_lease_ids() {
    local -a opts=()
    local i w
    for ((i = 2; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        case $w in
        --root | --config)
            if [[ ${COMP_WORDS[i + 1]} == "=" ]]; then
                opts+=("$w" "${COMP_WORDS[i + 2]}")
            else
                opts+=("$w" "${COMP_WORDS[i + 1]}")
            fi
            ;;
        esac
    done
    local extra=
    [[ $1 == targets ]] && extra=--groups
    local -a to=()
    command -v timeout >/dev/null 2>&1 && to=(timeout 5)
    "${to[@]}" "${COMP_WORDS[0]}" status --json $extra "${opts[@]}" 2>/dev/null | head -n %d |
        sed -n 's/^{"kind":"'"$1"'","id":"\([0-9a-f]\{64\}\)".*/\1/p'
}

_lease() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    local cmd= i w argn=0 dashdash=0 flags= valued= dirs= files= args=none
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ ${COMP_WORDS[i]} != -* ]]; then
            cmd=${COMP_WORDS[i]}
            break
        fi
    done
    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "%s --help --version" -- "$cur"))
        return
    fi
    case $cmd in
`, maxCompletionIDs, strings.Join(cmdNames(cc), " "))
	for _, c := range cc {
		var all, valued, dirs, files []string
		for _, f := range c.flags {
			all = append(all, f.names()...)
			if f.value != "" {
				valued = append(valued, f.names()...)
			}
			switch f.kind {
			case "dir":
				dirs = append(dirs, f.names()...)
			case "file":
				files = append(files, f.names()...)
			}
		}
		w("    %s)\n        flags=%q\n        valued=%q\n        dirs=%q\n        files=%q\n        args=%s\n        ;;\n",
			c.name, strings.Join(all, " "), " "+strings.Join(valued, " ")+" ", " "+strings.Join(dirs, " ")+" ",
			" "+strings.Join(files, " ")+" ", c.args)
	}
	w(`    *) return ;;
    esac
    # Count the positional arguments before the word being completed,
    # skipping flag values ("--ttl 5", "--ttl=5").
    local prev=
    for ((i = i + 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if ((dashdash)); then
            argn=$((argn + 1))
        elif [[ $w == -- ]]; then
            dashdash=1 argn=0
        elif [[ $w == "=" ]]; then
            ((i++))
        elif [[ $w == -* ]]; then
            [[ $valued == *" $w "* && ${COMP_WORDS[i + 1]} != "=" ]] && ((i++))
        else
            argn=$((argn + 1))
        fi
    done
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    [[ $prev == "=" ]] && prev=${COMP_WORDS[COMP_CWORD - 2]}
    [[ $cur == "=" ]] && cur=
    if ((!dashdash)) && [[ $valued == *" $prev "* ]]; then
        if [[ $dirs == *" $prev "* ]]; then
            COMPREPLY=($(compgen -d -- "$cur"))
            compopt -o filenames 2>/dev/null
        elif [[ $files == *" $prev "* ]]; then
            COMPREPLY=($(compgen -f -- "$cur"))
            compopt -o filenames 2>/dev/null
        fi
        return
    fi
    if ((!dashdash)) && [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
        return
    fi
    case $args in
    ids | targets)
        local kind=work
        [[ $args == targets ]] && kind=targets
        COMPREPLY=($(compgen -W "$(_lease_ids $kind)" -- "$cur"))
        ;;
    files)
        COMPREPLY=($(compgen -f -- "$cur"))
        compopt -o filenames 2>/dev/null
        ;;
    id-cmd)
        if ((dashdash)); then
            if ((argn == 0)); then
                COMPREPLY=($(compgen -c -- "$cur"))
            else
                COMPREPLY=($(compgen -f -- "$cur"))
                compopt -o filenames 2>/dev/null
            fi
        elif ((argn == 0)); then
            COMPREPLY=($(compgen -W "$(_lease_ids work)" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "--" -- "$cur"))
        fi
        ;;
    esac
}
complete -F _lease lease
`)
	return []byte(b.String())
}

func cmdNames(cc []complCmd) []string {
	var out []string
	for _, c := range cc {
		out = append(out, c.name)
	}
	return out
}

// zshQuote escapes text for the inside of a single-quoted _arguments spec
// description.
func zshDesc(s string) string {
	r := strings.NewReplacer(`'`, `'\''`, `[`, `\[`, `]`, `\]`, `:`, `\:`, "`", "")
	return r.Replace(s)
}

func zshCompletion(cmds []*cli.Command) []byte {
	cc := complCmds(cmds)
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("#compdef lease\n# zsh completion for lease(1)\n# %s\n#\n", completionHeader)
	w("# Install: put this file, named _lease, in a directory of $fpath before compinit runs.\n")
	w("# IDs come from `lease status --json` on the table the command line names (at most %d).\n\n", maxCompletionIDs)
	w(`# _lease_ids [COMPADD-OPTIONS] KIND: complete the IDs of records of KIND
# (work or targets); _arguments passes the compadd options first.
_lease_ids() {
  local kind=${@[-1]} i
  local -a opts ids extra
  for (( i = 2; i < CURRENT; i++ )); do
    case $words[i] in
      --root|--config) opts+=($words[i] $words[i+1]) ;;
      --root=*|--config=*) opts+=($words[i]) ;;
    esac
  done
  [[ $kind == targets ]] && extra=(--groups)
  ids=(${(f)"$(${_lease_command:-lease} status --json $extra $opts 2>/dev/null | head -n %d |
    sed -n 's/^{"kind":"'$kind'","id":"\([0-9a-f]\{64\}\)".*/\1/p')"})
  compadd "${@[1,-2]}" -a ids
}

# _lease_command_line: lease run's arguments after its ID: --, then a
# command line.
_lease_command_line() {
  # $words holds the positional arguments, the ID first.
  shift words
  (( CURRENT-- ))
  if [[ $words[1] == -- ]]; then
    shift words
    (( CURRENT-- ))
    _normal
  elif (( CURRENT == 1 )); then
    compadd -- --
  fi
}

_lease() {
  local curcontext="$curcontext" state line ret=1
  local _lease_command=$words[1] # for _lease_ids, before _arguments narrows $words
  typeset -A opt_args
  _arguments -C \
    '(- *)'{-h,--help}'[show help]' \
    '(- *)--version[print the version and whether MPI support is compiled in]' \
    '1: :->command' \
    '*:: :->args' && ret=0
  case $state in
    command)
      local -a cmds
      cmds=(
`, maxCompletionIDs)
	for _, c := range cc {
		w("        '%s:%s'\n", c.name, zshDesc(c.usage))
	}
	w(`      )
      _describe -t commands 'lease command' cmds && ret=0
      ;;
    args)
      curcontext="${curcontext%%:*:*}:lease-$words[1]:"
      case $words[1] in
`)
	for _, c := range cc {
		w("        %s)\n          _arguments -s -S \\\n", c.name)
		for _, f := range c.flags {
			names := f.names()
			excl := ""
			if len(names) > 1 {
				excl = "(" + strings.Join(names, " ") + ")"
			}
			for _, n := range names {
				spec := n
				if f.value != "" {
					if strings.HasPrefix(n, "--") {
						spec += "="
					} else {
						spec += "+"
					}
				}
				action := ""
				if f.value != "" {
					act := " "
					switch f.kind {
					case "dir":
						act = "_files -/"
					case "file":
						act = "_files"
					}
					action = ":" + zshDesc(f.value) + ":" + act
				}
				w("            '%s%s[%s]%s' \\\n", excl, spec, zshDesc(f.usage), action)
			}
		}
		switch c.args {
		case "ids":
			w("            '*:ID:_lease_ids work' \\\n")
		case "targets":
			w("            '*:target ID:_lease_ids targets' \\\n")
		case "files":
			w("            '*:file:_files' \\\n")
		case "id-cmd":
			w("            '1:ID:_lease_ids work' \\\n            '*::command line:_lease_command_line' \\\n")
		}
		w("            && ret=0\n          ;;\n")
	}
	w(`      esac
      ;;
  esac
  return ret
}

_lease "$@"
`)
	return []byte(b.String())
}

// fishQuote quotes s for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(strings.ReplaceAll(s, "`", "")) + "'"
}

func fishCompletion(cmds []*cli.Command) []byte {
	cc := complCmds(cmds)
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# fish completion for lease(1)\n# %s\n#\n", completionHeader)
	w("# Install: copy to ~/.config/fish/completions/lease.fish.\n")
	w("# IDs come from `lease status --json` on the table the command line names (at most %d).\n\n", maxCompletionIDs)
	w(`# __lease_ids KIND: the IDs of records of KIND (work or targets).
function __lease_ids --argument-names kind
    set -l tokens (commandline -opc)
    set -l opts
    set -l n (count $tokens)
    for i in (seq 2 $n)
        switch $tokens[$i]
            case --root --config
                if test $i -lt $n
                    set -a opts $tokens[$i] $tokens[(math $i + 1)]
                end
            case '--root=*' '--config=*'
                set -a opts $tokens[$i]
        end
    end
    set -l extra
    test "$kind" = targets; and set extra --groups
    $tokens[1] status --json $extra $opts 2>/dev/null | head -n %d | string replace -rf '^\{"kind":"'$kind'","id":"([0-9a-f]{64})".*' '$1'
end

# __lease_run_after_dashdash: the command line of lease run has reached CMD.
function __lease_run_after_dashdash
    contains -- -- (commandline -opc)
end

complete -c lease -f
complete -c lease -n __fish_use_subcommand -s h -l help -d 'show help'
complete -c lease -n __fish_use_subcommand -l version -d 'print the version and whether MPI support is compiled in'
`, maxCompletionIDs)
	for _, c := range cc {
		w("\n# lease %s\n", c.name)
		w("complete -c lease -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.usage))
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		if c.args == "id-cmd" {
			cond = fishQuote("__fish_seen_subcommand_from " + c.name + "; and not __lease_run_after_dashdash")
		}
		for _, f := range c.flags {
			line := "complete -c lease -n " + cond
			for _, s := range f.short {
				line += " -s " + s
			}
			if f.long != "" {
				line += " -l " + f.long
			}
			if f.value != "" {
				switch f.kind {
				case "dir":
					line += " -x -a '(__fish_complete_directories)'"
				case "file":
					line += " -r -F"
				default:
					line += " -x"
				}
			}
			line += " -d " + fishQuote(f.usage)
			w("%s\n", line)
		}
		switch c.args {
		case "ids":
			w("complete -c lease -n %s -a '(__lease_ids work)'\n", cond)
		case "targets":
			w("complete -c lease -n %s -a '(__lease_ids targets)'\n", cond)
		case "files":
			w("complete -c lease -n %s -F\n", cond)
		case "id-cmd":
			var valued []string
			for _, f := range c.flags {
				if f.value != "" {
					valued = append(valued, f.names()...)
				}
			}
			w("complete -c lease -n %s -a '(__lease_ids work)'\n", cond)
			w("complete -c lease -n %s -a '(__fish_complete_subcommand --fcs-skip=3 %s)'\n",
				fishQuote("__fish_seen_subcommand_from "+c.name+"; and __lease_run_after_dashdash"), strings.Join(valued, " "))
		}
	}
	return []byte(b.String())
}
