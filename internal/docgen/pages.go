package docgen

import (
	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/config"
)

// fallbackExample is the example of a command whose Manual has none.
const fallbackExample = "Show the options:"

// commandPage renders lease-NAME(1).
func (s *site) commandPage(c *cli.Command) []byte {
	info := s.manuals[c.Name]
	fl := flagDocs(c.Flags)
	r := &roff{}
	r.th(pageName(c), "1", s.app.Version)
	r.sh("NAME")
	r.line(esc(pageName(c)) + ` \- ` + inline(c.Usage))
	r.sh("SYNOPSIS")
	r.line(synopsis(c.Name, c.ArgsUsage))
	r.sh("DESCRIPTION")
	desc := c.Description
	if desc == "" {
		desc = sentence(c.Usage)
	}
	if info.More != "" {
		desc += "\n\n" + info.More
	}
	r.markup(desc)
	r.sh("OPTIONS")
	r.options(fl)
	r.sh("EXIT STATUS")
	exit := info.Exit
	if exit == nil {
		exit = s.main.Exit
	}
	r.items(exit)
	r.sh("ENVIRONMENT")
	r.items(mergeItems(envDocs(fl), info.Env))
	r.sh("FILES")
	r.items(append(append([]commands.Item(nil), s.main.CommonFiles...), info.Files...))
	r.line(".PP")
	r.line(inline("ROOT is the table root (--root, LEASE_ROOT, default ./lease-table)."))
	r.sh("EXAMPLES")
	ex := info.Examples
	if len(ex) == 0 {
		ex = []commands.Example{{Text: fallbackExample, Code: "lease " + c.Name + " --help"}}
	}
	r.examples(ex)
	r.sh("SEE ALSO")
	see := append([]string{"lease(1)", "lease-format(5)"}, info.SeeAlso...)
	r.line(seeAlso(unique(see)))
	return r.bytes()
}

// mainPage renders lease(1).
func (s *site) mainPage() []byte {
	app, m := s.app, s.main
	r := &roff{}
	r.th("lease", "1", app.Version)
	r.sh("NAME")
	r.line(`lease \- ` + inline(app.Usage))
	r.sh("SYNOPSIS")
	r.line(`\fBlease\fR \fICOMMAND\fR [\fIOPTIONS\fR] [\fIARGS\fR]`)
	r.br()
	r.line(`\fBlease\fR [\fICOMMAND\fR] \fB\-\-help\fR`)
	r.br()
	r.line(`\fBlease\fR \fB\-\-version\fR`)
	r.sh("DESCRIPTION")
	r.markup(app.Description + "\n\n" + m.Description)
	r.sh("COMMANDS")
	for _, c := range s.cmds {
		r.line(".TP")
		r.line(`\fBlease ` + esc(c.Name) + `\fR ` + args(c.ArgsUsage))
		r.line(inline(sentence(c.Usage)) + " See \\fB" + esc(pageName(c)) + "\\fR(1).")
	}
	r.sh("OPTIONS")
	r.line("Every command accepts these options after its name (\\fBlease claim \\-\\-root\\fR \\fIDIR\\fR \\fIID\\fR); each command's page lists its own.")
	r.options(flagDocs(m.Flags))
	r.sh("EXIT STATUS")
	r.items(m.Exit)
	r.items([]commands.Item{{Text: m.ExitNote}})
	r.sh("ENVIRONMENT")
	var env []commands.Item
	for _, d := range config.All {
		env = append(env, settingEnv(d))
	}
	r.items(append(env, m.Env...))
	r.sh("FILES")
	r.items(append(append([]commands.Item(nil), m.CommonFiles...), m.Files...))
	r.sh("EXAMPLES")
	r.examples(m.Examples)
	r.sh("SEE ALSO")
	var see []string
	for _, c := range s.cmds {
		see = append(see, pageName(c)+"(1)")
	}
	r.line(seeAlso(unique(append(see, m.SeeAlso...))))
	return r.bytes()
}

// formatPage renders lease-format(5).
func (s *site) formatPage() []byte {
	f := s.format
	r := &roff{}
	r.th("lease-format", "5", s.app.Version)
	r.sh("NAME")
	r.line(esc("lease-format") + ` \- ` + inline(f.Name))
	r.sh("DESCRIPTION")
	r.markup(f.Intro)
	for _, sec := range f.Sections {
		r.sh(sec.Title)
		r.markup(sec.Text)
	}
	r.sh("EXAMPLES")
	r.examples(f.Examples)
	r.sh("SEE ALSO")
	r.line(seeAlso(f.SeeAlso))
	return r.bytes()
}

// unique is refs without repeats, in their first order: a page's own
// references may name one that every page has.
func unique(refs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range refs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}
