package commands_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/internal/damaged"
	"github.com/leasetool/lease/internal/testenv"
)

var fixtureNow = strconv.FormatFloat(damaged.Now, 'f', -1, 64)

func fixture(t *testing.T, name string) string {
	t.Helper()
	s, ok := damaged.Lookup(name)
	if !ok {
		t.Fatalf("no fixture %s", name)
	}
	root := filepath.Join(t.TempDir(), "table")
	if _, err := damaged.Build(root, s); err != nil {
		t.Fatal(err)
	}
	return root
}

func runLease(args []string, stderr io.Writer) (string, int) {
	var out bytes.Buffer
	code := commands.Run(append([]string{"lease"}, args...), strings.NewReader(""), &out, stderr)
	return out.String(), code
}

// TestFsckUsage: usage errors of fsck exit 16, not 2 like the other
// commands, whether the flag parser, the settings or fsck itself finds them.
func TestFsckUsage(t *testing.T) {
	t.Parallel()
	root := fixture(t, "clean")
	for _, args := range [][]string{
		{"fsck", "--root", root, "--progress", "sometimes"},
		{"fsck", "--root", root, "--no-such-flag"},
		{"fsck", "--root", root, "zz"},
		{"fsck", "--root", root, "work/04"},
		{"fsck", "--root", root, "--shards", "8"},
		{"fsck", "--root", root, "--ttl", "-1"},
		{"fsck", "--root", root, "--now", "-5"},
	} {
		var errb bytes.Buffer
		out, code := runLease(args, &errb)
		if code != 16 {
			t.Errorf("lease %v: exit %d, want 16\nstdout: %s\nstderr: %s", args[1:], code, out, errb.String())
		}
		if errb.Len() == 0 {
			t.Errorf("lease %v: no message on stderr", args[1:])
		}
	}
}

// TestFsckOperational: no table to check is an operational error (8).
func TestFsckOperational(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, root := range []string{filepath.Join(dir, "missing"), dir} {
		var errb bytes.Buffer
		if _, code := runLease([]string{"fsck", "--root", root}, &errb); code != 8 {
			t.Errorf("fsck of %s: exit %d, want 8 (%s)", root, code, errb.String())
		}
		if !strings.Contains(errb.String(), "no lease table") && !strings.Contains(errb.String(), "not a lease table") {
			t.Errorf("fsck of %s: message %q does not say there is no table", root, errb.String())
		}
	}
}

// TestFsckReport checks the text and --json reports of a damaged table:
// a line per finding with its path and ID, a summary with counts by kind,
// and the exact repair command; JSON lines whose counts agree with the
// summary object.
func TestFsckReport(t *testing.T) {
	t.Parallel()
	root := fixture(t, "all")
	out, code := runLease([]string{"fsck", "--root", root, "--now", fixtureNow}, io.Discard)
	if code != 4 {
		t.Fatalf("exit %d, want 4\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	errorsSeen := 0
	for _, l := range lines {
		if !strings.HasPrefix(l, "error ") {
			continue
		}
		errorsSeen++
		f := strings.Fields(l)
		if len(f) < 3 || !strings.HasPrefix(f[2], root) {
			t.Errorf("finding line without an absolute path: %q", l)
		}
		if strings.HasSuffix(strings.TrimSuffix(f[2], ":"), ".json") && !strings.Contains(l, " id ") {
			t.Errorf("record finding without its ID: %q", l)
		}
		if !strings.Contains(l, "; want ") {
			t.Errorf("finding without what was expected: %q", l)
		}
	}
	if !strings.Contains(out, fmt.Sprintf("errors: %d (", errorsSeen)) {
		t.Errorf("summary does not count the %d error lines:\n%s", errorsSeen, out)
	}
	want := "  lease fsck --repair --root " + root
	if lines[len(lines)-1] != want {
		t.Errorf("last line %q, want the repair command %q", lines[len(lines)-1], want)
	}

	check := func(repair bool, wantExit int) {
		args := []string{"fsck", "--root", root, "--now", fixtureNow, "--json"}
		if repair {
			args = append(args, "--repair")
		}
		out, code := runLease(args, io.Discard)
		if code != wantExit {
			t.Fatalf("--json repair=%v: exit %d, want %d", repair, code, wantExit)
		}
		counts := map[string]int{}
		var sum map[string]any
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			var obj map[string]any
			if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
				t.Fatalf("not a JSON line: %q: %v", sc.Text(), err)
			}
			switch obj["type"] {
			case "finding":
				if sum != nil {
					t.Fatal("a finding after the summary")
				}
				counts[obj["kind"].(string)]++
				if repair && obj["severity"] == "error" && obj["repaired"] != true {
					t.Errorf("not repaired: %v", obj)
				}
				if mv, ok := obj["moved_to"].(string); ok {
					if _, err := os.Lstat(mv); err != nil {
						t.Errorf("moved_to %s: %v", mv, err)
					}
				}
			case "summary":
				sum = obj
			default:
				t.Fatalf("unknown object %v", obj)
			}
		}
		if sum == nil {
			t.Fatal("no summary object")
		}
		if int(sum["exit"].(float64)) != wantExit {
			t.Errorf("summary exit %v, want %d", sum["exit"], wantExit)
		}
		found := sum["found"].(map[string]any)
		for k, n := range counts {
			if int(found[k].(float64)) != n {
				t.Errorf("summary found %s = %v, %d lines", k, found[k], n)
			}
		}
		if len(found) != len(counts) {
			t.Errorf("summary kinds %v, lines %v", found, counts)
		}
		if wantExit == 4 && sum["repair_command"] != "lease fsck --repair --root "+root {
			t.Errorf("repair_command %v", sum["repair_command"])
		}
	}
	check(false, 4)
	check(true, 1)
	check(false, 0)
}

// TestFsckShards: SHARD arguments restrict the record scan and are kept in
// the repair command.
func TestFsckShards(t *testing.T) {
	t.Parallel()
	root := fixture(t, "invalid-empty")
	for _, tc := range []struct {
		args []string
		dirs int
	}{{[]string{"work/00"}, 1}, {[]string{"00", "targets/01"}, 4}} {
		out, _ := runLease(append([]string{"fsck", "--root", root, "--now", fixtureNow, "--json"}, tc.args...), io.Discard)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var sum struct {
			Directories   int    `json:"directories"`
			RepairCommand string `json:"repair_command"`
			Exit          int    `json:"exit"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
			t.Fatal(err)
		}
		if sum.Directories != tc.dirs {
			t.Errorf("fsck %v scanned %d directories, want %d", tc.args, sum.Directories, tc.dirs)
		}
		if sum.Exit == 4 && !strings.HasSuffix(sum.RepairCommand, strings.Join(tc.args, " ")) {
			t.Errorf("repair command %q does not keep the shards %v", sum.RepairCommand, tc.args)
		}
	}
}

// onTerminal runs f with the slave side of a new pseudo-terminal and
// returns what was written to it.
func onTerminal(t *testing.T, f func(tty *os.File)) []byte {
	m, s := openPTY(t)
	defer m.Close()
	done := make(chan []byte)
	go func() {
		data, _ := io.ReadAll(m) // EIO once the slave is closed
		done <- data
	}()
	f(s)
	s.Close()
	return <-done
}

// openPTY returns a pseudo-terminal's master and slave.
func openPTY(t *testing.T) (*os.File, *os.File) {
	m, s, err := pty.Open()
	if err != nil {
		testenv.Missing(t, "pty", fmt.Sprintf("no pseudo-terminal: %v", err))
	}
	return m, s
}

// TestFsckProgress: the progress bar goes to stderr only when stderr is a
// terminal, never into a pipe or a file; --progress always/never override.
func TestFsckProgress(t *testing.T) {
	t.Parallel()
	root := fixture(t, "clean")
	base := []string{"fsck", "--root", root, "--now", fixtureNow}
	pipeR, pipeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode string
		w    io.Writer
		want bool
	}{
		{"auto", &bytes.Buffer{}, false},
		{"auto", pipeW, false},
		{"never", &bytes.Buffer{}, false},
		{"always", &bytes.Buffer{}, true},
	} {
		var got int
		if b, ok := tc.w.(*bytes.Buffer); ok {
			out, code := runLease(append(base, "--progress", tc.mode), b)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
			got = b.Len()
		} else {
			out, code := runLease(append(base, "--progress", tc.mode), pipeW)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
			pipeW.Close()
			data, _ := io.ReadAll(pipeR)
			got = len(data)
		}
		if (got > 0) != tc.want {
			t.Errorf("--progress %s to %T: %d bytes on stderr, want output %v", tc.mode, tc.w, got, tc.want)
		}
	}
	var out string
	var code int
	data := onTerminal(t, func(tty *os.File) { out, code = runLease(base, tty) })
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if len(data) == 0 {
		t.Error("no progress bar on a terminal stderr with --progress auto")
	}
	if strings.Contains(out, "\r") || strings.Contains(out, "dirs") {
		t.Errorf("progress bar on stdout: %q", out)
	}
}
