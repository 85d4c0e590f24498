package commands_test

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestQualifyReportForPeople: lease qualify prints a verdict line per
// check and a summary; --json prints the proof instead, with the same
// checks.
func TestQualifyReportForPeople(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "table")
	out, errOut, code := mpiExec(t, procBin, "", "qualify", "--root", root)
	if code != 0 {
		t.Fatalf("exit %d; stderr %q\n%s", code, errOut, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "lease qualify: "+root+", from 1 process on ") {
		t.Errorf("first line %q", lines[0])
	}
	verdict := regexp.MustCompile(`^  (ok|FAIL)  +([a-z-]+)  +\S`)
	var checks []string
	for _, l := range lines[1 : len(lines)-1] {
		m := verdict.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("not a verdict line: %q", l)
			continue
		}
		checks = append(checks, m[2])
	}
	if want := regexp.MustCompile(`^qualified: (\d+) of (\d+) checks passed; largest clock skew `); !want.MatchString(lines[len(lines)-1]) {
		t.Errorf("summary %q", lines[len(lines)-1])
	}
	jout, _, code := mpiExec(t, procBin, "", "qualify", "--json", "--root", root)
	var p struct {
		Verified bool
		Checks   []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(jout), &p); err != nil || code != 0 || !p.Verified {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, jout)
	}
	var names []string
	for _, c := range p.Checks {
		names = append(names, c.Name)
	}
	if strings.Join(names, " ") != strings.Join(checks, " ") {
		t.Errorf("the report's checks %v are not the proof's %v", checks, names)
	}
}
