package testenv

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"time"
)

// RunScript runs the bash script path (a bring-up script of scripts/) with
// args, the process's environment plus the system directories on PATH
// (daemons live in /usr/sbin) and then env, and returns everything it
// printed, stdout and stderr interleaved.
func RunScript(ctx context.Context, path string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin")
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.String(), err
}
