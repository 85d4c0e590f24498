package testenv

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
)

// roleEnv names the role a test binary started by RoleCmd plays, and its
// arguments: a JSON array, the role's name first.
const roleEnv = "LEASE_TEST_ROLE"

// Role makes this test binary the process named name, with the arguments
// RoleCmd gave it, when RoleCmd started it as that role: play runs and its
// result is the process's exit status; no test runs. Call it from an init
// function of the test package, so that the role starts before any test
// (the way Go's cmd/go/internal/lockedfile tests play the other process
// that holds a lock): a lock held by another process, a second writer.
func Role(name string, play func(args []string) int) {
	v := os.Getenv(roleEnv)
	if v == "" {
		return
	}
	var a []string
	if json.Unmarshal([]byte(v), &a) == nil && len(a) > 0 && a[0] == name {
		os.Exit(play(a[1:]))
	}
}

// RoleCmd is a command that runs this test binary as the process named
// name (see Role) with args, its standard error the test's.
func RoleCmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	a, err := json.Marshal(append([]string{name}, args...))
	if err != nil {
		panic(err) // strings always marshal
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+string(a))
	cmd.Stderr = os.Stderr
	return cmd
}
