package docgen

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leasetool/lease/commands"
)

// The checks on the generated files themselves (up to date, every command
// documented, groff warnings, the real shells) are in
// commands/docs_test.go, next to the tables the completion tests need.

func TestWriteDocs(t *testing.T) {
	root := t.TempDir()
	app := commands.NewApp()
	changed, err := WriteDocs(root, app)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range DocFiles(app) {
		want = append(want, f.Path)
	}
	if !slices.Equal(changed, want) {
		t.Fatalf("first WriteDocs changed %q, want %q", changed, want)
	}
	// Nothing changed: nothing is rewritten.
	if changed, err := WriteDocs(root, app); err != nil || len(changed) != 0 {
		t.Fatalf("second WriteDocs changed %q (%v), want nothing", changed, err)
	}
	// A page of a removed command goes; an edited page is put back.
	stale := filepath.Join(root, "man", "man1", "lease-gone.1")
	os.WriteFile(stale, []byte("old\n"), 0o644)
	os.WriteFile(filepath.Join(root, "man", "man1", "lease.1"), []byte("edited\n"), 0o644)
	flat := filepath.Join(root, "man", "lease-run.1") // the old flat layout
	os.WriteFile(flat, []byte("old\n"), 0o644)
	changed, err = WriteDocs(root, app)
	if err != nil || !slices.Equal(changed, []string{"man/man1/lease.1", "man/lease-run.1 (removed)", "man/man1/lease-gone.1 (removed)"}) {
		t.Fatalf("WriteDocs after edits changed %q (%v)", changed, err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("%s was not removed: %v", stale, err)
	}
}

func TestDocsMarkup(t *testing.T) {
	r := &roff{}
	r.markup("A `--flag` and a - dash.\n\n\tliteral \\ line\n- item\n.dot")
	got := r.b.String()
	want := strings.Join([]string{
		`A \fB\-\-flag\fR and a \- dash.`,
		".PP",
		".PP", ".RS 4", ".nf", `literal \e line`, ".fi", ".RE", ".PP",
		`.IP \(bu 2`, "item",
		`\&.dot`,
		"",
	}, "\n")
	if got != want {
		t.Errorf("markup:\n%s\nwant:\n%s", got, want)
	}
}
