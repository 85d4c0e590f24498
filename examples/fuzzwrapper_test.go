package examples

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
)

// TestFuzzWrapper runs examples/fuzz-wrapper.sh as its header says: once
// with a corpus directory, which adds the seeds and returns (before any
// fuzzing: the seeds are queued, none claimed), twice (the same seeds are
// the same items: no error, nothing added), then two wrappers as workers on
// the same table. The campaign grows (children are added as they are
// found) and ends when the queue is empty: every input stored is done
// exactly once, with one published result each, and fsck finds the table
// clean.
func TestFuzzWrapper(t *testing.T) {
	testenv.NeedTools(t, "bash", "go", "sha256sum", "od")
	if testing.Short() {
		t.Skip("the campaign takes about 20 s; skipped with -short")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "lease"), "github.com/leasetool/lease").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	lease := func(args ...string) string {
		out, err := exec.Command(filepath.Join(bin, "lease"), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("lease %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	root := filepath.Join(dir, "campaign", "table")
	lease("init", "--root", root)
	corpus := filepath.Join(dir, "corpus")
	os.Mkdir(corpus, 0o755)
	for _, s := range []string{"seed-a", "seed-b", "seed-c"} {
		os.WriteFile(filepath.Join(corpus, s), []byte(s+"\n"), 0o644)
	}
	env := append(os.Environ(), "LEASE_ROOT="+root, "FUZZ_SECONDS=1", "PATH="+bin+":"+os.Getenv("PATH"),
		"LEASE_TTL=5", "LEASE_RENEW_INTERVAL=1")
	run := func(args ...string) *exec.Cmd {
		cmd := exec.Command("bash", append([]string{"fuzz-wrapper.sh"}, args...)...)
		cmd.Env = env
		return cmd
	}
	// Adding the seeds returns, having fuzzed nothing; adding them again
	// adds nothing and says nothing on stderr.
	for i, want := range []string{"3 seeds added", "0 seeds added"} {
		var stdout, stderr strings.Builder
		add := run(corpus)
		add.Stdout, add.Stderr = &stdout, &stderr
		done := make(chan error, 1)
		if err := add.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- add.Wait() }()
		select {
		case err := <-done:
			if err != nil || !strings.Contains(stdout.String(), want) || stderr.String() != "" {
				t.Fatalf("fuzz-wrapper.sh CORPUS (%d): %v\nstdout: %s\nstderr: %s", i+1, err, stdout.String(), stderr.String())
			}
		case <-time.After(4 * time.Minute): // a hang, not a slow machine
			add.Process.Kill()
			t.Fatalf("fuzz-wrapper.sh CORPUS did not return:\n%s%s", stdout.String(), stderr.String())
		}
		if s := lease("status", "--summary", "--root", root, "--json"); !strings.Contains(s, `"queued":3,`) || !strings.Contains(s, `"records":0,`) {
			t.Fatalf("after adding the seeds (%d): %s; want 3 queued, none claimed", i+1, s)
		}
	}
	first, second := run(), run()
	var out1, out2 strings.Builder
	first.Stdout, first.Stderr = &out1, &out1
	second.Stdout, second.Stderr = &out2, &out2
	for _, c := range []*exec.Cmd{first, second} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range []*exec.Cmd{first, second} {
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("wrapper %d: %v\n%s%s", i, err, out1.String(), out2.String())
			}
		case <-time.After(4 * time.Minute): // a hang, not a slow machine
			c.Process.Kill()
			t.Fatalf("wrapper %d did not finish:\n%s%s", i, out1.String(), out2.String())
		}
	}
	for _, o := range []string{out1.String(), out2.String()} {
		if !strings.Contains(o, "the queue is empty: campaign done") {
			t.Errorf("a wrapper did not end on an empty queue:\n%s", o)
		}
	}
	var inputs []os.DirEntry
	shards, _ := os.ReadDir(filepath.Join(root, "input"))
	for _, sh := range shards {
		ents, _ := os.ReadDir(filepath.Join(root, "input", sh.Name()))
		inputs = append(inputs, ents...)
	}
	public, _ := os.ReadDir(filepath.Join(root, "public"))
	summary := lease("status", "--summary", "--root", root, "--json")
	if len(inputs) < 3 || len(public) != len(inputs) {
		t.Errorf("%d inputs, %d results published: want one result per input (at least the 3 seeds)", len(inputs), len(public))
	}
	if !strings.Contains(summary, `"queued":0,`) || !strings.Contains(summary, `"done":`+itoa(len(inputs))+`,`) {
		t.Errorf("summary %s: want nothing queued and %d done", summary, len(inputs))
	}
	lease("fsck", "--root", root)
}

func itoa(n int) string { return strconv.Itoa(n) }
