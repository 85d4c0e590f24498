//go:build linux

package commands_test

// lease claim --next --wait and lease run --next --wait wait out a table
// that cannot be written, as lease work does (issue 36), and --max-wait
// bounds that wait with exit 4. Before, both exited 4 at the first claim.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/faultfs"
	"github.com/leasetool/lease/faultfs/faultfstest"
	"github.com/leasetool/lease/internal/testenv"
)

func TestNextWaitWaitsOutReadOnly(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{{"claim", "--next", "1", "--wait"}, {"run", "--next", "--wait", "--complete", "--", "true"}} {
		want := 4 // today's exit for the table's error: lease run's is its own 125
		if cmd[0] == "run" {
			want = 125
		}
		t.Run(cmd[0], func(t *testing.T) {
			m := faultfstest.Mount(t, faultfs.Options{})
			h := newHoldTable(t)
			h.root = filepath.Join(m.Dir, "table")
			h.must(0, "", "init", "--shards", "4")
			h.workAdd("ro-"+cmd[0], 1)
			if err := m.SetRules(faultfstest.ReadOnly()); err != nil {
				t.Fatal(err)
			}
			// Bounded: the table error's exit once max_wait has passed.
			r := h.lease("", append([]string{cmd[0], "--max-wait", "1"}, cmd[1:]...)...)
			if r.code != want || !strings.Contains(r.errOut, "giving up") {
				t.Fatalf("%s\nwant exit %d after --max-wait 1", r, want)
			}
			// Unbounded: it waits until the table takes writes again.
			errFile := filepath.Join(h.dir, "wait.err")
			f, err := os.Create(errFile)
			if err != nil {
				t.Fatal(err)
			}
			c := h.command(cmd...)
			c.Stderr = f
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			t.Cleanup(func() { c.Process.Kill() })
			testenv.WaitFor(t, "the claimer saying it waits", holdWait, func() bool {
				b, _ := os.ReadFile(errFile)
				return strings.Contains(string(b), "the table cannot be written")
			})
			if err := m.SetRules(nil); err != nil {
				t.Fatal(err)
			}
			if code := holdExit(t, c); code != 0 {
				b, _ := os.ReadFile(errFile)
				t.Fatalf("lease %s after the episode: exit %d\n%s", strings.Join(cmd, " "), code, b)
			}
		})
	}
}
