package testenv_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/leasetool/lease/internal/testenv"
)

func init() {
	testenv.Role("echo", func(args []string) int {
		fmt.Println(strings.Join(args, "|"))
		return len(args)
	})
}

// TestRole: RoleCmd runs the test binary as the role with its arguments
// (spaces and all), the role's result is the exit status, and no test runs
// in it (a test's output would follow the role's).
func TestRole(t *testing.T) {
	t.Parallel()
	cmd := testenv.RoleCmd(context.Background(), "echo", "a b", "", "c")
	out, err := cmd.Output()
	if got := string(out); got != "a b||c\n" {
		t.Errorf("the role printed %q, want %q", got, "a b||c\n")
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("the role's exit: %v, want status 3", err)
	}
}
