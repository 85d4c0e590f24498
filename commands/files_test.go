package commands_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leasetool/lease/commands"
)

// TestCommandFiles: the folder shows which files are commands (the
// package's doc): each command NAME is defined in cmd_NAME.go ('-' as
// '_'), which registers its descriptor; no other file registers one; and
// every cmd_*.go is a command's file or a part of one (cmd_NAME_PART.go).
func TestCommandFiles(t *testing.T) {
	registers := regexp.MustCompile(`(?m)^\s*register\(&Descriptor\{`)
	t.Parallel()
	var names []string
	for _, d := range commands.Descriptors() {
		names = append(names, strings.ReplaceAll(d.Command.Name, "-", "_"))
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		f := "cmd_" + name + ".go"
		data, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("command %s: %v (its file is %s)", name, err, f)
			continue
		}
		if !registers.Match(data) {
			t.Errorf("%s does not register its command's descriptor", f)
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base, isCmd := strings.CutPrefix(strings.TrimSuffix(f, ".go"), "cmd_")
		if registers.Match(data) && (!isCmd || !slices.Contains(names, base)) {
			t.Errorf("%s registers a command but is not cmd_NAME.go of it", f)
		}
		if isCmd && !slices.ContainsFunc(names, func(n string) bool { return base == n || strings.HasPrefix(base, n+"_") }) {
			t.Errorf("%s is named as a command's file, but no command is %s or a prefix of it", f, base)
		}
	}
}
