package hostile_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/hostile"
)

// TestConfigNotRegular (case 7 of issue 38): a configuration file that is
// a FIFO, a device or bigger than 1 MiB, wherever lease looks for it, is a
// usage error naming the file (exit 2) at once: no hang in open or read,
// no memory grown without bound. The FIFO is planted by another member
// (B) in the directory where A runs lease.
func TestConfigNotRegular(t *testing.T) {
	t.Parallel()
	e := hostile.New(t)
	// A directory of the group where members start their commands.
	work := filepath.Join(e.Campaign, "work")
	if err := os.Mkdir(work, 0o2775); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(work, "lease.toml")
	if err := syscall.Mkfifo(fifo, 0o664); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(fifo, hostile.B, hostile.Group); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(e.Dir, "big.toml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", 2<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	xdg := filepath.Join(e.Dir, "xdg")
	if err := os.MkdirAll(filepath.Join(xdg, "lease"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(xdg, "lease", "config.toml"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dir  string   // where lease runs ("": e.Dir)
		env  []string // appended to the clean environment
		args []string
		file string // the file the error must name
	}{
		{"fifo ./lease.toml", work, nil, nil, "lease.toml"},
		{"fifo --config", "", nil, []string{"--config", fifo}, fifo},
		{"fifo LEASE_CONFIG", "", []string{"LEASE_CONFIG=" + fifo}, nil, fifo},
		{"fifo XDG", "", []string{"XDG_CONFIG_HOME=" + xdg}, nil, filepath.Join(xdg, "lease", "config.toml")},
		{"LEASE_CONFIG=/dev/zero", "", []string{"LEASE_CONFIG=/dev/zero"}, nil, "/dev/zero"},
		{"2 MiB --config", "", nil, []string{"--config", big}, big},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// A guard only: lease must exit at once; today's main hangs
			// on the FIFO until it is killed here.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := e.Command(hostile.A, append([]string{"config"}, c.args...)...)
			cmd.Env = append(cmd.Env, c.env...)
			if c.dir != "" {
				cmd.Dir = c.dir
			}
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { <-ctx.Done(); cmd.Process.Kill() }()
			err := cmd.Wait()
			var ee *exec.ExitError
			switch {
			case ctx.Err() != nil:
				t.Fatalf("lease config had not exited after 20 s (killed): %s", out.String())
			case !errors.As(err, &ee) || ee.ExitCode() != 2:
				t.Fatalf("lease config: %v, want exit 2\n%s", err, out.String())
			case !strings.Contains(out.String(), "config "+c.file+":"):
				t.Errorf("the error does not name %s: %s", c.file, out.String())
			}
		})
	}
}
