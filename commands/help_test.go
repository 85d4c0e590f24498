package commands_test

// --help and the man pages agree, and neither misleads: no "(default: 0)"
// for a flag without a plain default, values named as in the pages, each
// reference once, and EXIT STATUS about the command itself.

import (
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/leasetool/lease/commands"
)

// helpFlags are the flag names --help lists in its OPTIONS.
func helpFlags(help string) []string {
	_, opts, _ := strings.Cut(help, "OPTIONS:\n")
	var out []string
	for _, l := range strings.Split(opts, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "-") {
			continue
		}
		names, _, _ := strings.Cut(l, "  ")
		for _, n := range strings.Split(names, ", ") {
			out = append(out, strings.Fields(n)[0])
		}
	}
	sort.Strings(out)
	return out
}

// manFlags are the flag names a man page's OPTIONS lists.
func manFlags(page string) []string {
	_, opts, _ := strings.Cut(page, "\n.SH OPTIONS\n")
	opts, _, _ = strings.Cut(opts, "\n.SH ")
	re := regexp.MustCompile(`\\fB((?:\\-)+[a-z0-9][a-z0-9\\-]*)\\fR`)
	var out []string
	seen := map[string]bool{}
	for _, l := range strings.Split(opts, "\n") {
		if !strings.HasPrefix(l, `\fB\-`) {
			continue
		}
		for _, m := range re.FindAllStringSubmatch(l, -1) {
			n := strings.ReplaceAll(m[1], `\-`, "-")
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestHelpAgreesWithManPages(t *testing.T) {
	t.Parallel()
	pages := docFiles()
	for _, c := range commands.NewApp().Commands {
		if c.Hidden || c.Name == "help" {
			continue
		}
		help := uxMust(t, 0, "", c.Name, "--help").out
		for _, bad := range []string{"(default: 0)", `(default: "")`, "(default: false)"} {
			if strings.Contains(help, bad) {
				t.Errorf("lease %s --help shows %q:\n%s", c.Name, bad, help)
			}
		}
		_, opts, _ := strings.Cut(help, "OPTIONS:\n")
		for _, l := range strings.Split(opts, "\n") {
			if names, _, _ := strings.Cut(strings.TrimSpace(l), "  "); strings.Contains(names, " value") {
				t.Errorf("lease %s --help does not name the value of %s", c.Name, names)
			}
		}
		page := string(pages["man/man1/lease-"+c.Name+".1"])
		hf, mf := helpFlags(help), manFlags(page)
		if strings.Join(hf, " ") != strings.Join(mf, " ") {
			t.Errorf("lease %s: --help lists %v, the man page %v", c.Name, hf, mf)
		}
		_, see, _ := strings.Cut(page, "\n.SH SEE ALSO\n")
		refs := map[string]int{}
		for _, l := range strings.Split(see, "\n") {
			refs[strings.TrimSuffix(l, ",")]++
		}
		for r, n := range refs {
			if n > 1 {
				t.Errorf("lease-%s(1) lists %s %d times in SEE ALSO", c.Name, r, n)
			}
		}
		_, exit, _ := strings.Cut(page, "\n.SH EXIT STATUS\n")
		exit, _, _ = strings.Cut(exit, "\n.SH ")
		if c.Name != "claim" && strings.Contains(exit, "first") {
			t.Errorf("lease-%s(1) EXIT STATUS speaks of claim --first:\n%s", c.Name, exit)
		}
	}
}

// TestJSONFlagSaysWhatItPrints: --json is one document for the batch
// commands, and says so where it is not (status and fsck stream lines).
func TestJSONFlagSaysWhatItPrints(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string]string{
		"renew-batch": "one JSON document",
		"status":      "one JSON object per record per line",
		"fsck":        "one JSON object per finding",
		"qualify":     "the JSON proof",
		"run":         "a JSON summary on stderr",
	} {
		help := uxMust(t, 0, "", cmd, "--help").out
		line := ""
		for _, l := range strings.Split(help, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "--json") {
				line = l
			}
		}
		if !strings.Contains(line, want) {
			t.Errorf("lease %s --help: --json says %q, want %q", cmd, line, want)
		}
	}
}
