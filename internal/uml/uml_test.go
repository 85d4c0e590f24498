package uml_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/uml"
)

// TestBootRunKill boots a kernel with an ext4 image as its disk, runs
// commands in it (output and exit status come back), checks the guest has
// its own writable /tmp and its kernel's modules, and that Kill leaves no
// process of the kernel's session.
func TestBootRunKill(t *testing.T) {
	uml.Need(t)
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	k := uml.BootT(t, uml.Config{Name: "boot-test", Disks: []string{img}, Modules: []string{"ext4"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, code, err := k.Run(ctx, "echo hello; uname -r; touch /tmp/uml-guest-own-tmp && echo tmp-ok; mkdir /run/d && mount -t ext4 /dev/ubda /run/d && echo mounted; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 || !strings.Contains(out, "hello\n") || !strings.Contains(out, "tmp-ok") || !strings.Contains(out, "mounted") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	if _, err := os.Stat("/tmp/uml-guest-own-tmp"); err == nil {
		os.Remove("/tmp/uml-guest-own-tmp")
		t.Fatal("the guest's /tmp is the host's")
	}
	if err := k.Start("echo console-line > /dev/console"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := k.Console()
		if strings.Contains(string(b), "console-line") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the background command's console line did not arrive; console:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := k.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.Run(ctx, "true"); err != uml.ErrDown {
		t.Fatalf("Run after Kill: %v, want ErrDown", err)
	}
	out2, _ := exec.Command("pgrep", "-f", "umid=boot-test-").CombinedOutput()
	if s := strings.TrimSpace(string(out2)); s != "" {
		t.Fatalf("processes of the killed kernel remain: %s", s)
	}
}
