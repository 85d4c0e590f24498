package commands_test

// Real processes racing on one table: the lease binary is built once in
// TestMain and run with os/exec.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/leasetool/lease/leasefmt"
)

// procBin is the lease binary built by TestMain.
var procBin string

// configEnv are the variables that configure lease (docs/design.md#clocks). TestMain
// clears them, and points XDG_CONFIG_HOME at an empty directory, so that
// the developer's environment cannot change what the tests see.
var configEnv = []string{"LEASE_ROOT", "LEASE_CONFIG", "LEASE_OWNER", "LEASE_TTL", "LEASE_SHARDS", "LEASE_TARGET_SHARDS",
	"LEASE_TARGET_TIMEOUT", "LEASE_RENEW_INTERVAL", "LEASE_LOCK_TIMEOUT", "LEASE_WRITERS", "LEASE_MPI_TIMEOUT", "LEASE_GRACE"}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lease-commands-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for _, v := range configEnv {
		os.Unsetenv(v)
	}
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	procBin = filepath.Join(dir, "lease")
	if out, err := exec.Command("go", "build", "-o", procBin, "github.com/leasetool/lease").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build github.com/leasetool/lease: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

type procResult struct {
	name        string
	input       string
	code        int
	out, errOut string
}

func (r procResult) String() string {
	return fmt.Sprintf("%s: exit %d\nstdout:\n%sstderr:\n%s", r.name, r.code, r.out, r.errOut)
}

// procRunAll starts one lease process per input, all before any of them
// gets its stdin, then feeds every stdin at once and waits for all.
func procRunAll(t *testing.T, inputs []string, args func(i int) []string) []procResult {
	t.Helper()
	res := make([]procResult, len(inputs))
	cmds := make([]*exec.Cmd, len(inputs))
	stdins := make([]io.WriteCloser, len(inputs))
	outs, errs := make([]bytes.Buffer, len(inputs)), make([]bytes.Buffer, len(inputs))
	for i := range inputs {
		a := args(i)
		res[i] = procResult{name: "lease " + strings.Join(a, " "), input: inputs[i]}
		cmds[i] = exec.Command(procBin, a...)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &errs[i]
		in, err := cmds[i].StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdins[i] = in
	}
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
	}
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			io.WriteString(stdins[i], inputs[i])
			stdins[i].Close()
			err := cmd.Wait()
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				res[i].code = ee.ExitCode()
			case err != nil:
				res[i].code = -1
				errs[i].WriteString(err.Error())
			}
			res[i].out, res[i].errOut = outs[i].String(), errs[i].String()
		}()
	}
	wg.Wait()
	return res
}

// procGranted collects the `ID TOKEN` lines of all processes and checks
// that each ID was granted exactly once, with token want.
func procGranted(t *testing.T, res []procResult, ids []leasefmt.ID, want string) map[leasefmt.ID]int {
	t.Helper()
	by := map[leasefmt.ID]int{}
	for i, r := range res {
		if r.code != 0 && r.code != 1 {
			t.Errorf("%s", r)
		}
		for id, tok := range coreLines(t, r.out) {
			if prev, dup := by[id]; dup {
				t.Errorf("%s granted to process %d and %d", id, prev, i)
			}
			if tok != want {
				t.Errorf("%s granted with token %s, want %s", id, tok, want)
			}
			by[id] = i
		}
		for id, reason := range coreReasons(t, r.errOut) {
			if reason != "held" {
				t.Errorf("process %d: %s for %s, want only held refusals\n%s", i, reason, id, r)
			}
		}
	}
	for _, id := range ids {
		if _, ok := by[id]; !ok {
			t.Errorf("%s granted to nobody", id)
		}
	}
	if len(by) != len(ids) {
		t.Errorf("%d IDs granted, want %d", len(by), len(ids))
	}
	return by
}

// TestProcessesRaceOnClaims: 8 lease claim processes on the same 200 IDs of
// a table that none of them has created yet; after expiry a second wave;
// then the old and new holders renew at the same moment.
func TestProcessesRaceOnClaims(t *testing.T) {
	t.Parallel()
	const procs, n = 8, 200
	const t0 = 1764450000
	root := coreRoot(t)
	ids := coreIDs("race", n)
	shuffled := func(seed int) string {
		order := append([]leasefmt.ID(nil), ids...)
		r := rand.New(rand.NewPCG(uint64(seed), 42))
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		return coreJoin(order, "")
	}
	inputs := make([]string, procs)
	for i := range inputs {
		inputs[i] = shuffled(i)
	}
	owner := func(wave, i int) string { return fmt.Sprintf("host-%d/wave-%d", i, wave) }
	claimWave := func(wave int, now int) []procResult {
		return procRunAll(t, inputs, func(i int) []string {
			return []string{"claim", "--root", root, "--owner", owner(wave, i), "--now", fmt.Sprint(now), "--ttl", "10", "-"}
		})
	}

	first := claimWave(1, t0)
	by1 := procGranted(t, first, ids, "1")
	if t.Failed() {
		for _, r := range first {
			t.Log(r)
		}
		t.FailNow()
	}
	for id, i := range by1 {
		if rec := coreRecord(t, root, id); rec.Owner != owner(1, i) || rec.Token != 1 {
			t.Errorf("record of %s: %+v, want owner %s token 1", id, rec, owner(1, i))
		}
	}

	second := claimWave(2, t0+11)
	by2 := procGranted(t, second, ids, "2")
	for id, i := range by2 {
		if rec := coreRecord(t, root, id); rec.Owner != owner(2, i) || rec.Token != 2 || rec.ExpiresAt != t0+21 {
			t.Errorf("record of %s: %+v, want owner %s token 2", id, rec, owner(2, i))
		}
	}

	// Old holders (token 1) and new holders (token 2) renew at once.
	var held []string
	for _, r := range first {
		held = append(held, r.out)
	}
	for _, r := range second {
		held = append(held, r.out)
	}
	renew := procRunAll(t, held, func(int) []string {
		return []string{"renew-batch", "--root", root, "--now", fmt.Sprint(t0 + 12), "--ttl", "10"}
	})
	for i, r := range renew {
		lines := coreLines(t, r.input)
		if i < procs { // old holders: every line stale
			if r.out != "" {
				t.Errorf("old holder renewed something: %s", r)
			}
			reasons := coreReasons(t, r.errOut)
			for id := range lines {
				if reasons[id] != "stale-token" {
					t.Errorf("old holder's %s: %q, want stale-token", id, reasons[id])
				}
			}
			if len(reasons) != len(lines) || len(lines) > 0 && r.code != 1 || len(lines) == 0 && r.code != 0 {
				t.Errorf("old holder: %s", r)
			}
			continue
		}
		// New holders: every line renewed, printed back in input order.
		if r.code != 0 || r.out != r.input || r.errOut != "" {
			t.Errorf("new holder: %s\ninput:\n%s", r, r.input)
		}
	}
	for _, id := range ids {
		if rec := coreRecord(t, root, id); rec.Token != 2 || rec.RenewedAt != t0+12 || rec.ExpiresAt != t0+22 {
			t.Errorf("record of %s after the renewals: %+v", id, rec)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(root, "work", "*", ".*.tmp.*")); len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}
}
