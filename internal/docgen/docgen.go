// Package docgen writes lease's man pages (man/) and shell completions
// (completions/) from the command descriptors (commands.Descriptor): the
// command definitions of commands.NewApp and the hand-written text of
// commands.Manuals, with commands.MainPage and commands.FormatPage. `go run ./commands/gen` calls WriteDocs, and
// TestDocsUpToDate (commands/docs_test.go) fails when the checked-in files
// are stale. urfave's own ToMan leaves out Description and ArgsUsage, so
// pages are written here with a small roff writer (roff.go); the
// completions are the text/templates of templates/ (completions.go).
//
// The lease binary does not import this package: only the generator and
// the tests do.
package docgen

import (
	"bytes"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commands"
)

// DocFile is one generated documentation file, its path relative to the
// repository root.
type DocFile struct {
	Path string
	Data []byte
}

// site is what the generators read: the app, its visible commands and
// the hand-written text.
type site struct {
	app     *cli.App
	cmds    []*cli.Command
	manuals map[string]commands.Manual
	main    commands.MainManual
	format  commands.FormatManual
}

func newSite(app *cli.App) *site {
	return &site{
		app:     app,
		cmds:    visibleCommands(app),
		manuals: commands.Manuals(),
		main:    commands.MainPage(),
		format:  commands.FormatPage(),
	}
}

// DocFiles renders every man page and shell completion of app (normally
// commands.NewApp()).
func DocFiles(app *cli.App) []DocFile {
	s := newSite(app)
	var out []DocFile
	out = append(out, DocFile{"man/man1/lease.1", s.mainPage()})
	for _, c := range s.cmds {
		out = append(out, DocFile{"man/man1/" + pageName(c) + ".1", s.commandPage(c)})
	}
	out = append(out, DocFile{"man/man5/lease-format.5", s.formatPage()}, DocFile{"docs/lease-format.md", s.formatMarkdown()})
	cc := s.complCmds()
	out = append(out,
		DocFile{"completions/lease.bash", completion("lease.bash.tmpl", cc)},
		DocFile{"completions/_lease", completion("_lease.tmpl", cc)},
		DocFile{"completions/lease.fish", completion("lease.fish.tmpl", cc)})
	return out
}

// generatedDirs are the directories DocFiles owns: WriteDocs removes files
// there that it no longer generates (a page of a removed command, a page
// of the flat man/ of before man/man1 and man/man5, which man(1) needs to
// find pages by MANPATH). docs/ is not one of them: it holds hand-written
// pages too.
var generatedDirs = []string{"man", "man/man1", "man/man5", "completions"}

// WriteDocs writes DocFiles(app) under root (the repository root) and
// removes stale generated files. It returns the paths it changed.
func WriteDocs(root string, app *cli.App) ([]string, error) {
	files := DocFiles(app)
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
		ents, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(d)))
		if err != nil {
			return changed, err
		}
		for _, e := range ents {
			rel := d + "/" + e.Name()
			if !e.IsDir() && !want[rel] {
				if err := os.Remove(filepath.Join(root, filepath.FromSlash(d), e.Name())); err != nil {
					return changed, err
				}
				changed = append(changed, rel+" (removed)")
			}
		}
	}
	return changed, nil
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

// pageName is "lease-claim" for claim.
func pageName(c *cli.Command) string { return "lease-" + c.Name }
