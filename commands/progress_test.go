package commands_test

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/commands"
)

// TestRenewBatchProgress: renew-batch draws its progress bar on stderr only
// when stderr is a terminal (or with --progress always), never into a pipe
// or a file, and never on stdout, which carries the same renewed lines in
// every mode. A bad --progress value is a usage error that writes nothing.
func TestRenewBatchProgress(t *testing.T) {
	root := coreRoot(t)
	ids := coreIDs("progress", 300)
	held := coreMust(t, 0, coreJoin(ids, ""), "claim", "--root", root, "--now", "1000", "--ttl", "1e9", "-").out
	now := 1000
	renew := func(mode string, stderr io.Writer) {
		t.Helper()
		now++
		var out bytes.Buffer
		args := []string{"lease", "renew-batch", "--root", root, "--ttl", "1e9", "--now", strconv.Itoa(now)}
		if mode != "" {
			args = append(args, "--progress", mode)
		}
		if code := commands.Run(args, strings.NewReader(held), &out, stderr); code != 0 {
			t.Fatalf("renew-batch --progress %q: exit %d\n%s", mode, code, out.String())
		}
		if out.String() != held {
			t.Errorf("renew-batch --progress %q: stdout is not the held lines:\n%s", mode, out.String())
		}
	}
	for _, tc := range []struct {
		mode string
		want bool
	}{{"auto", false}, {"never", false}, {"always", true}} {
		var errb bytes.Buffer
		renew(tc.mode, &errb)
		if (errb.Len() > 0) != tc.want {
			t.Errorf("--progress %s into a buffer: %d bytes on stderr %q, want a bar: %v", tc.mode, errb.Len(), errb.String(), tc.want)
		}
		if tc.want && !strings.Contains(errb.String(), "renewing") {
			t.Errorf("--progress always: no bar on stderr: %q", errb.String())
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	renew("auto", pw)
	pw.Close()
	if data, _ := io.ReadAll(pr); len(data) > 0 {
		t.Errorf("--progress auto into a pipe: %q on stderr", data)
	}
	// A short run on a terminal draws nothing: the bar starts only once
	// the batch has run for a second (here made 0 for a bar, else 1 h).
	restore := commands.SetProgressDelay(time.Hour)
	if data := onTerminal(t, func(tty *os.File) { renew("", tty) }); len(data) > 0 {
		t.Errorf("a short renew-batch drew on a terminal stderr: %q", data)
	}
	restore()
	restore = commands.SetProgressDelay(0)
	if data := onTerminal(t, func(tty *os.File) { renew("", tty) }); !bytes.Contains(data, []byte("renewing")) {
		t.Errorf("no progress bar on a terminal stderr by default: %q", data)
	}
	restore()

	before := coreSnapshot(t, root)
	r := coreLease(t, held, "renew-batch", "--root", root, "--now", "5000", "--progress", "sometimes")
	if r.code != 2 || !strings.Contains(r.errOut, "--progress") {
		t.Errorf("bad --progress: %s\nwant exit 2 naming --progress", r)
	}
	coreSame(t, "renew-batch --progress sometimes", before, coreSnapshot(t, root))
}
