package hostile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leasetool/lease/internal/hostile"
)

func init() {
	// whoami prints the ids it runs with, and fails to write its first
	// argument (a file it must not be able to write).
	hostile.Register("whoami", func(args []string) int {
		fmt.Printf("%d %d\n", os.Getuid(), os.Getgid())
		if err := os.WriteFile(args[0], []byte("x"), 0o600); err == nil {
			return 1
		}
		return 0
	})
}

// TestHarness: A's shared table is usable by B and not writable by C; a
// step runs as its uid; a canary changed is caught.
func TestHarness(t *testing.T) {
	t.Parallel()
	e := hostile.New(t)
	root := e.Table()
	var st syscall.Stat_t
	if err := syscall.Stat(root, &st); err != nil || st.Uid != hostile.A || st.Gid != hostile.Group || st.Mode&syscall.S_ISGID == 0 {
		t.Fatalf("table root: %+v %v", st, err)
	}
	id := "0000000000000000000000000000000000000000000000000000000000000001"
	e.Must(0, hostile.B, "", "claim", "--root", root, id)
	if r := e.Run(hostile.C, "", "claim", "--root", root, strings.Replace(id, "1", "2", 1)); r.Code == 0 {
		t.Errorf("C, outside the group, claimed in the table: %s", r)
	}
	canary := e.Canary(hostile.A, "private", 0o600)
	out, err := e.Step(context.Background(), hostile.B, "whoami", canary).CombinedOutput()
	if err != nil || string(out) != fmt.Sprintf("%d %d\n", hostile.B, hostile.B) {
		t.Errorf("step as B: %q %v", out, err)
	}
	e.CheckCanaries()
	// A changed canary fails the check: seen on a sub-test's own Env.
	t.Run("caught", func(t *testing.T) {
		ft := &fakeT{TB: t}
		e := hostile.New(ft)
		c := e.Canary(hostile.B, "c", 0o640)
		os.Chmod(c, 0o644)
		e.CheckCanaries()
		if !strings.Contains(ft.errs, "canary "+filepath.Join(e.Home(hostile.B), "c")+" changed") {
			t.Errorf("a changed mode was not caught: %q", ft.errs)
		}
	})
}

// fakeT records Errorf instead of failing.
type fakeT struct {
	testing.TB
	errs string
}

func (f *fakeT) Errorf(format string, args ...any) { f.errs += fmt.Sprintf(format, args...) }
