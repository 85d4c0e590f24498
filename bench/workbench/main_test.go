package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leasetool/lease/internal/testenv"
)

func TestExactlyOnce(t *testing.T) {
	t.Parallel()
	ids := []string{id(0), id(1), id(2)}
	for _, c := range []struct {
		name, log, want string
	}{
		{"each once", ids[2] + "\n" + ids[0] + "\n" + ids[1] + "\n", ""},
		{"one lost", ids[0] + "\n" + ids[1] + "\n", "1 items not run, 0 run more than once, 0 stray lines in the log"},
		{"one twice", ids[0] + "\n" + ids[1] + "\n" + ids[2] + "\n" + ids[1] + "\n", "0 items not run, 1 run more than once, 0 stray lines in the log"},
		{"a stray line", ids[0] + "\n" + ids[1] + "\n" + ids[2] + "\n" + id(9) + "\n", "0 items not run, 0 run more than once, 1 stray lines in the log"},
	} {
		log := filepath.Join(t.TempDir(), "log")
		if err := os.WriteFile(log, []byte(c.log), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := exactlyOnce(log, ids); got != c.want {
			t.Errorf("%s: exactlyOnce = %q, want %q", c.name, got, c.want)
		}
	}
	if got := exactlyOnce(filepath.Join(t.TempDir(), "none"), ids); got == "" {
		t.Error("exactlyOnce of a missing log: no complaint")
	}
}

func TestStraceCalls(t *testing.T) {
	t.Parallel()
	// strace -f -c -e trace=fsync,... output, with and without the errors column.
	out := `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 63.01    0.012000         200        60           fsync
 36.99    0.007045         234        30         2 fdatasync
  0.00    0.000000           0         1           sync_file_range
------ ----------- ----------- --------- --------- ----------------
100.00    0.019045         209        91         2 total
`
	f := filepath.Join(t.TempDir(), "strace")
	if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := straceCalls(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"fsync": 60, "fdatasync": 30, "sync_file_range": 1}
	if len(got) != len(want) {
		t.Fatalf("straceCalls = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("straceCalls = %v, want %v", got, want)
		}
	}
}

// TestQuick runs bench/worker --quick (20 items, 1 and 2 workers, ext4),
// so that the benchmark cannot rot: every system must run every item
// exactly once, and the floor must cost its 3 syncs an item.
func TestQuick(t *testing.T) {
	testenv.NeedRoot(t, "bench/worker (loop mounts)")
	testenv.NeedTools(t, "cc", "strace", "mkfs.ext4", "mount", "flock", "go")
	systems := "floor work flock parallel"
	if out, err := exec.Command("parallel", "--version").Output(); err != nil || !strings.Contains(string(out), "GNU parallel") {
		testenv.Missing(t, "parallel", "GNU parallel is not installed (apt-get install parallel sqlite3 libdbd-sqlite3-perl)")
	}
	testenv.NeedTools(t, "sqlite3")
	if exec.Command("perl", "-MDBD::SQLite", "-e", "1").Run() != nil {
		testenv.Missing(t, "parallel", "Perl's DBD::SQLite is not installed (apt-get install libdbd-sqlite3-perl)")
	}
	out := t.TempDir()
	cmd := exec.Command("bash", "../worker", "--quick", "--systems", systems, "--out", out)
	cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin")
	msg, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		testenv.Missing(t, "loop", "bench/worker could not loop-mount ext4: "+strings.TrimSpace(string(msg)))
	}
	if err != nil {
		t.Fatalf("bench/worker --quick: %v\n%s", err, msg)
	}
	raw, err := os.ReadFile(filepath.Join(out, "raw.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r result
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("raw.jsonl: %q: %v", l, err)
		}
		if r.Failed != "" {
			t.Errorf("%s, %d workers, %s (strace %v): failed: %s", r.FS, r.Workers, r.System, r.Strace, r.Failed)
		}
		if r.ItemsPerS <= 0 || r.CPUms <= 0 {
			t.Errorf("%s, %d workers, %s: %v items/s, %v CPU ms an item", r.FS, r.Workers, r.System, r.ItemsPerS, r.CPUms)
		}
		if r.Strace && r.System == "floor" && r.Syncs != 3 {
			t.Errorf("the floor at %d workers: %v syncs an item (%v), want 3", r.Workers, r.Syncs, r.Calls)
		}
		if r.Strace && r.Syncs == 0 && r.System != "loop" {
			t.Errorf("%s at %d workers: no syncs counted", r.System, r.Workers)
		}
		seen[r.System]++
	}
	for _, s := range strings.Fields(systems) {
		if seen[s] != 4 { // 1 and 2 workers, a timed run and a counting run each
			t.Errorf("%s: %d runs in raw.jsonl, want 4", s, seen[s])
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "worker-floor.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"| ext4 | 1 | floor |", "| ext4 | 2 | work |", "| ext4 | 2 | parallel |"} {
		if !strings.Contains(string(md), row) {
			t.Errorf("worker-floor.md has no row %q:\n%s", row, md)
		}
	}
}

// TestBeforeAfterQuick runs bench/beforeafter, a user of workbench run, in
// its smallest form (this tree against its own HEAD, one round, few
// items): each of its four numbers must come out. It had called
// workbench's campaign mode, gone since bench/worker replaced it, and died
// at its first round.
func TestBeforeAfterQuick(t *testing.T) {
	testenv.NeedTools(t, "cc", "git", "go", "sha256sum")
	testenv.LoopMount(t, "ext4", 32<<20) // the script's loop mounts can be made here (else a skip, naming why)
	cmd := exec.Command("bash", "../beforeafter", "HEAD", "--reps", "1")
	cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin", "ITEMS=10", "WORKERS=2", "SUMMARY_ITEMS=2000")
	msg, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench/beforeafter HEAD --reps 1: %v\n%s", err, msg)
	}
	for _, k := range []string{"renew (ms)", "floor (ms)", "summary (ms)", "work (items/s)"} {
		// "work (items/s)        123.4    125.1     1.01   ..." : both
		// medians positive numbers.
		var line string
		for _, l := range strings.Split(string(msg), "\n") {
			if strings.HasPrefix(l, k) {
				line = l
			}
		}
		f := strings.Fields(strings.TrimPrefix(line, k))
		if len(f) < 3 {
			t.Fatalf("no %q line with two medians and their ratio:\n%s", k, msg)
		}
		for _, v := range f[:2] {
			if x, err := strconv.ParseFloat(v, 64); err != nil || !(x > 0) {
				t.Errorf("%s: median %q, want a positive number:\n%s", k, v, msg)
			}
		}
	}
}
