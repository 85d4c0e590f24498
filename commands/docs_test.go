package commands_test

// The generated man pages and shell completions: checked in and current,
// rendered by groff without warnings, and loaded by their real shells.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/internal/docgen"
	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/leasefmt"
)

// docRequire skips (or, with LEASE_TEST_REQUIRE=all, fails) when a tool
// is missing.
func docRequire(t *testing.T, tools ...string) {
	t.Helper()
	testenv.NeedTools(t, tools...)
}

// docFiles are the generated files, by path.
func docFiles() map[string][]byte {
	out := map[string][]byte{}
	for _, f := range docgen.DocFiles(commands.NewApp()) {
		out[f.Path] = f.Data
	}
	return out
}

// docWrite writes the generated files under a temp dir and returns it.
func docWrite(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for p, data := range docFiles() {
		full := filepath.Join(dir, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// docFallbackExample is what internal/docgen writes for a command whose
// Manual has no examples.
const docFallbackExample = "Show the options:"

func TestDocsUpToDate(t *testing.T) {
	t.Parallel()
	files := docFiles()
	var stale []string
	for p, data := range files {
		old, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(p)))
		if err != nil || !bytes.Equal(old, data) {
			stale = append(stale, p)
		}
	}
	for _, d := range []string{"man", "man/man1", "man/man5", "completions"} {
		ents, _ := os.ReadDir(filepath.Join("..", d))
		for _, e := range ents {
			if _, ok := files[d+"/"+e.Name()]; !ok && !e.IsDir() {
				stale = append(stale, d+"/"+e.Name()+" (no longer generated)")
			}
		}
	}
	if len(stale) > 0 {
		sort.Strings(stale)
		t.Fatalf("generated docs are stale: %s\nrun `go run ./commands/gen` at the repository root and commit the result",
			strings.Join(stale, ", "))
	}
}

func TestDocsCoverEveryCommand(t *testing.T) {
	t.Parallel()
	files := docFiles()
	app := commands.NewApp()
	manuals := commands.Manuals()
	var pages []string
	for _, c := range app.Commands {
		if _, ok := manuals[c.Name]; !ok && !c.Hidden {
			t.Errorf("command %s has no Manual in commands.Manuals", c.Name)
		}
		delete(manuals, c.Name)
		if c.Hidden {
			continue
		}
		page := "man/man1/lease-" + c.Name + ".1"
		data, ok := files[page]
		if !ok {
			t.Errorf("no man page for command %s", c.Name)
			continue
		}
		pages = append(pages, page)
		text := string(data)
		if strings.Contains(text, docFallbackExample) {
			t.Errorf("command %s has no examples: add them to its Manual, next to its cli.Command", c.Name)
		}
		for _, sec := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"} {
			if !strings.Contains(text, "\n.SH "+sec+"\n") {
				t.Errorf("%s has no %s section", page, sec)
			}
		}
		for _, f := range c.Flags {
			if v, ok := f.(interface{ IsVisible() bool }); ok && !v.IsVisible() {
				continue
			}
			if !strings.Contains(text, `\fB\-\-`+strings.ReplaceAll(f.Names()[0], "-", `\-`)+`\fR`) {
				t.Errorf("%s does not document --%s", page, f.Names()[0])
			}
		}
		if c.Description != "" && !strings.Contains(text, strings.ReplaceAll(strings.SplitN(c.Description, " ", 3)[0], "-", `\-`)) {
			t.Errorf("%s leaves out the command's Description", page)
		}
	}
	for name := range manuals {
		t.Errorf("commands.Manuals has a Manual for %s, which is not a command of NewApp", name)
	}
	if len(pages) < 10 {
		t.Fatalf("only %d command pages", len(pages))
	}
	for _, want := range []string{"man/man1/lease.1", "man/man5/lease-format.5"} {
		if _, ok := files[want]; !ok {
			t.Errorf("no %s", want)
		}
	}
	// Exit statuses that differ from the common ones.
	if run := string(files["man/man1/lease-run.1"]); !strings.Contains(run, "124") || !strings.Contains(run, "127") {
		t.Errorf("lease-run(1) does not list 124 and 127")
	}
	if fsck, ok := files["man/man1/lease-fsck.1"]; ok && (!strings.Contains(string(fsck), "\\fB16\\fR") || strings.Contains(string(fsck), "\\fB5\\fR")) {
		t.Errorf("lease-fsck(1) does not list fsck(8) exit statuses")
	}
}

func TestManPagesRenderWithoutWarnings(t *testing.T) {
	t.Parallel() // processes only: no in-process lease, no environment, no knob
	docRequire(t, "groff", "man")
	dir := docWrite(t)
	pages, _ := filepath.Glob(filepath.Join(dir, "man", "man[15]", "*"))
	if len(pages) == 0 {
		t.Fatal("no pages generated")
	}
	for _, page := range pages {
		out, err := exec.Command("groff", "-man", "-ww", "-z", page).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("groff -man -ww -z %s: %v\n%s", filepath.Base(page), err, out)
		}
		cmd := exec.Command("man", "--warnings", "-l", page)
		cmd.Env = append(os.Environ(), "MANWIDTH=80", "MAN_KEEP_FORMATTING=")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = nil, &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Errorf("MANWIDTH=80 man --warnings -l %s: %v\n%s", filepath.Base(page), err, stderr.String())
		}
	}
	// A page renders its synopsis and examples.
	cmd := exec.Command("man", "-l", filepath.Join(dir, "man", "man1", "lease-run.1"))
	cmd.Env = append(os.Environ(), "MANWIDTH=80")
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "lease run [OPTIONS] ID|--next [--wait [SECONDS]] -- CMD [ARG...]") || !strings.Contains(string(out), "LEASE_TOKEN") {
		t.Errorf("man -l lease-run.1: %v\n%s", err, out)
	}
}

// docShell is one table with a record, and a PATH where lease is this test
// binary, for completing IDs.
func docShell(t *testing.T) (*holdTable, string) {
	h := newHoldTable(t)
	id := holdID("complete-me")
	held := h.must(0, "", "claim", string(id)).out
	h.must(0, held, "release") // free again: claim and run offer it
	return h, string(id)
}

// completionCases: a command line and a word the completion must offer.
func completionCases(id string) []struct{ line, want string } {
	return []struct{ line, want string }{
		{"lease cl", "claim"},
		{"lease claim --ro", "--root"},
		{"lease renew-batch --wa", "--watch"},
		{"lease run --gr", "--grace"},
		{"lease claim " + id[:6], id},
		{"lease run --ttl 5 " + id[:6], id},
	}
}

func TestCompletionBash(t *testing.T) {
	t.Parallel() // processes only: no in-process lease, no environment, no knob
	docRequire(t, "bash")
	dir := docWrite(t)
	h, id := docShell(t)
	for _, c := range completionCases(id) {
		words := strings.Fields(c.line)
		script := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
_lease; printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", append([]string{"--norc", "--noprofile", "-c", script, "bash", filepath.Join(dir, "completions", "lease.bash")}, words...)...)
		cmd.Env, cmd.Dir = h.env(), h.dir
		out, err := cmd.CombinedOutput()
		if err != nil || !docOffers(string(out), c.want) {
			t.Errorf("bash: completing %q offers %q (%v), want %q", c.line, out, err, c.want)
		}
	}
	// complete -p shows the function registered for lease.
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", `source "$1" && complete -p lease`, "bash", filepath.Join(dir, "completions", "lease.bash"))
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "-F _lease") {
		t.Errorf("complete -p lease: %v %s", err, out)
	}
}

func TestCompletionFish(t *testing.T) {
	t.Parallel() // processes only: no in-process lease, no environment, no knob
	docRequire(t, "fish")
	dir := docWrite(t)
	h, id := docShell(t)
	for _, c := range completionCases(id) {
		cmd := exec.Command("fish", "--no-config", "-c", `source $argv[1]; complete -C $argv[2]`, filepath.Join(dir, "completions", "lease.fish"), c.line)
		cmd.Env, cmd.Dir = h.env(), h.dir
		out, err := cmd.CombinedOutput()
		var words []string
		for _, l := range strings.Split(string(out), "\n") {
			w, _, _ := strings.Cut(l, "\t")
			words = append(words, w)
		}
		if err != nil || !docOffers(strings.Join(words, "\n"), c.want) {
			t.Errorf("fish: completing %q offers %q (%v), want %q", c.line, out, err, c.want)
		}
	}
}

// zshCapture drives an interactive zsh on a pseudo-terminal (zpty): it
// loads the completion with compinit, types the line and TAB, and records
// every match the completion system adds.
const zshCapture = `
zmodload zsh/zpty || exit 3
dir=$1 out=$2 line=$3
: > $out
zpty z zsh -f -i
zpty -w z "PROMPT=''; RPROMPT=''; fpath=($dir \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z "compadd() { if [[ \${(j: :)@} == *-[OAD]\\ * ]]; then builtin compadd \"\$@\"; return; fi; local -a __h; builtin compadd -A __h \"\$@\"; print -rl -- \$__h >> $out; builtin compadd \"\$@\"; }"
zpty -w z "__cap_done() { print -r -- __CAPTURE_DONE__ >> $out }; comppostfuncs=(__cap_done)"
zpty -w z "zstyle ':completion:*' insert-tab false; bindkey '^I' complete-word"
zpty -n -w z "$line"$'\t'
for i in {1..600}; do
  grep -q __CAPTURE_DONE__ $out && break
  sleep 0.05
done
zpty -d z
cat $out
`

func TestCompletionZsh(t *testing.T) {
	t.Parallel() // processes only: no in-process lease, no environment, no knob
	docRequire(t, "zsh")
	dir := docWrite(t)
	h, id := docShell(t)
	script := filepath.Join(h.dir, "capture.zsh")
	os.WriteFile(script, []byte(zshCapture), 0o644)
	for _, c := range completionCases(id) {
		cmd := exec.Command("zsh", "-f", script, filepath.Join(dir, "completions"), filepath.Join(h.dir, "zsh.out"), c.line)
		cmd.Env, cmd.Dir = h.env(), h.dir
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "__CAPTURE_DONE__") || !docOffers(string(out), c.want) {
			t.Errorf("zsh: completing %q offers %q (%v), want %q", c.line, out, err, c.want)
		}
	}
}

func docOffers(out, want string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}

// TestManPath: the pages are where man(1) looks for them by MANPATH, so
// that MANPATH="$PWD/man:" man lease-claim (the README's) finds them.
func TestManPath(t *testing.T) {
	t.Parallel()
	docRequire(t, "man")
	for _, page := range []string{"lease-claim", "lease", "lease-format"} {
		cmd := exec.Command("man", "-w", page)
		cmd.Env = append(os.Environ(), "MANPATH="+filepath.Join("..", "man")+":")
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), filepath.Join("man", "man")) {
			t.Errorf(`MANPATH="$PWD/man:" man -w %s: %q, %v`, page, out, err)
		}
	}
}

// TestFormatPageStatesRules: lease-format(5) states what a second program
// had to guess (issue 40), in the words the code enforces: the shard
// directory names, the order of the answers, ttl against clock_skew, why
// clock_skew is not in TABLE, lone surrogates, and that the lock is an
// fcntl byte-range lock flock(1) does not take (lease-claim(1) too).
func TestFormatPageStatesRules(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(filepath.Join("..", "docs", "lease-format.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(page)
	for _, n := range []int{16, 256, 4096} {
		want := fmt.Sprintf("with %d, %s to %s", n, leasefmt.ShardDirName(0, n), leasefmt.ShardDirName(n-1, n))
		if n == 16 {
			want = "with 16 shards, 00 to 0f"
		}
		if !strings.Contains(text, want) {
			t.Errorf("lease-format(5) does not say %q", want)
		}
	}
	for _, want := range []string{
		"missing (no record); stale-token when TOKEN is not the record's token, whatever the record's status",
		"A ttl must be more than clock_skew",
		"is not recorded in TABLE",
		`"a\ud800b"`,
		"or is in neither place",
		"byte-range lock",
		"flock(2), and so flock(1), takes a different kind of lock",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("lease-format(5) does not say %q", want)
		}
	}
	claim, err := os.ReadFile(filepath.Join("..", "man", "man1", "lease-claim.1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(claim), "byte\\-range lock") || !strings.Contains(string(claim), "flock(1) on a .lock file") {
		t.Error("lease-claim(1) does not say that the lock is an fcntl byte-range lock flock(1) does not take")
	}
}
