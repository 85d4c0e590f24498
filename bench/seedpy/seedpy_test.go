package seedpy_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// requirePython skips the test when python3 is missing, or fails it when
// LEASE_TEST_REQUIRE=all says that every test must run.
func requirePython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("LEASE_TEST_REQUIRE") == "all" {
			t.Fatal("python3 is not on PATH (LEASE_TEST_REQUIRE=all forbids skipping)")
		}
		t.Skip("skipping: python3 is not on PATH (apt-get install python3); seed.py needs it (LEASE_TEST_REQUIRE=all makes this a failure)")
	}
	return py
}

// run runs a command with stdin in dir, without the caller's LEASE_*
// settings or config files, and returns stdout, stderr and the exit status.
func run(t *testing.T, dir, stdin string, name string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = []string{"XDG_CONFIG_HOME=" + dir, "HOME=" + dir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASE_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("%s %v: %v", name, args, err)
		}
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

func id(i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("seedpy/%d", i)))
	return hex.EncodeToString(sum[:])
}

type status struct {
	Kind      string  `json:"kind"`
	ID        string  `json:"id"`
	Status    string  `json:"status"`
	Owner     string  `json:"owner"`
	Token     int64   `json:"token"`
	ClaimedAt float64 `json:"claimed_at"`
	RenewedAt float64 `json:"renewed_at"`
	ExpiresAt float64 `json:"expires_at"`
	Live      bool    `json:"live"`
	Path      string  `json:"path"`
}

// TestRenew claims 40 leases over 4 shards with lease, renews them with
// seed.py under each strategy, one stale-token line among them, and checks
// with lease verify, status --json and a read-only fsck that every record is
// valid and renewed under the same token, that the stale line was refused
// without touching its record, and that the records are byte for byte those
// lease renew-batch writes.
func TestRenew(t *testing.T) {
	py := requirePython(t)
	seed, err := filepath.Abs("seed.py")
	if err != nil {
		t.Fatal(err)
	}
	// bench/ is its own module; lease is built from the parent module, the
	// repository root two directories up from this package.
	bin := filepath.Join(t.TempDir(), "lease")
	build := exec.Command("go", "build", "-o", bin, "github.com/leasetool/lease")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build (in %s): %v\n%s", build.Dir, err, out)
	}
	const n = 40
	var ids strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintln(&ids, id(i))
	}
	stale := id(n)

	// table: 40 leases claimed at 1000 until 1100 and one more whose token
	// 1 went stale (claimed until 1001, claimed again at 1002 as token 2).
	table := func(t *testing.T, dir, root string) string {
		lease := func(stdin string, args ...string) string {
			out, errb, code := run(t, dir, stdin, bin, args...)
			if code != 0 {
				t.Fatalf("lease %v: exit %d\n%s", args, code, errb)
			}
			return out
		}
		lease("", "init", "--root", root, "--shards", "4")
		held := lease(ids.String(), "claim", "--owner", "host-a/fuzz-3", "--root", root, "--now", "1000", "--ttl", "100", "-")
		if got := strings.Count(held, "\n"); got != n {
			t.Fatalf("claimed %d leases, want %d:\n%s", got, n, held)
		}
		lease("", "claim", "--owner", "host-a/fuzz-3", "--root", root, "--now", "1000", "--ttl", "1", "--clock-skew", "0", stale)
		if out := lease("", "claim", "--owner", "host-a/fuzz-3", "--root", root, "--now", "1002", "--ttl", "100", stale); out != stale+" 2\n" {
			t.Fatalf("second claim of the stale lease printed %q", out)
		}
		return held
	}

	for _, strategy := range []string{"f324", "f323", "nosync"} {
		t.Run(strategy, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "t")
			held := table(t, dir, root)
			lines := strings.SplitAfter(held, "\n")
			input := strings.Join(lines[:n/2], "") + stale + " 1\n" + strings.Join(lines[n/2:], "")
			stalePath := filepath.Join(root, "work", fmt.Sprintf("%02x", mustShard(t, stale, 4)), stale+".json")
			before, err := os.ReadFile(stalePath)
			if err != nil {
				t.Fatal(err)
			}

			out, errb, code := run(t, dir, input, py, seed, "renew", "--root", root, "--now", "1050", "--ttl", "500", "--strategy", strategy, "--stats")
			if code != 1 {
				t.Errorf("seed.py exit %d, want 1 (one lease lost); stderr:\n%s", code, errb)
			}
			if out != held {
				t.Errorf("seed.py stdout:\n%s\nwant the 40 held lines in input order:\n%s", out, held)
			}
			// N file fsyncs and K directory fsyncs (F324), N and N (F323), none (nosync).
			syncs := map[string]string{"f324": "file_syncs=40 directory_syncs=4", "f323": "file_syncs=40 directory_syncs=40",
				"nosync": "file_syncs=0 directory_syncs=0"}[strategy]
			want := "stale-token " + stale + " 1 "
			stats := "stats renewed=40 lost=1 " + syncs + "\n"
			if !strings.HasPrefix(errb, want) || !strings.HasSuffix(errb, stats) || strings.Count(errb, "\n") != 2 {
				t.Errorf("seed.py stderr %q, want a line starting %q and then %q", errb, want, stats)
			}
			after, err := os.ReadFile(stalePath)
			if err != nil || !bytes.Equal(before, after) {
				t.Errorf("the stale-token record changed (%v):\nbefore %s\nafter  %s", err, before, after)
			}
			temps, _ := filepath.Glob(filepath.Join(root, "work", "*", ".*.tmp.*"))
			if len(temps) > 0 {
				t.Errorf("temp files left behind: %v", temps)
			}

			// verify at 1200: past the old expiry (1100), before the new one (1550).
			vout, verr, vcode := run(t, dir, held, bin, "verify", "--root", root, "--now", "1200")
			if vcode != 0 || vout != held {
				t.Errorf("lease verify at 1200: exit %d\nstdout:\n%s\nstderr:\n%s", vcode, vout, verr)
			}

			sout, serr, scode := run(t, dir, "", bin, "status", "--root", root, "--now", "1200", "--json")
			if scode != 0 {
				t.Fatalf("lease status: exit %d\n%s", scode, serr)
			}
			seen := map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(sout), "\n") {
				var s status
				if err := json.Unmarshal([]byte(line), &s); err != nil {
					t.Fatalf("lease status --json line %q: %v", line, err)
				}
				if s.Kind != "work" {
					continue
				}
				seen[s.ID] = true
				want := status{Kind: "work", ID: s.ID, Status: "leased", Owner: "host-a/fuzz-3", Token: 1,
					ClaimedAt: 1000, RenewedAt: 1050, ExpiresAt: 1550, Live: true, Path: s.Path}
				if s.ID == stale {
					want.Token, want.ClaimedAt, want.RenewedAt, want.ExpiresAt, want.Live = 2, 1002, 1002, 1102, false
				}
				if s != want {
					t.Errorf("lease status: %+v\nwant %+v", s, want)
				}
			}
			if len(seen) != n+1 {
				t.Errorf("lease status listed %d work records, want %d", len(seen), n+1)
			}

			fout, ferr, fcode := run(t, dir, "", bin, "fsck", "--root", root, "--now", "1200", "--json", "--progress", "never")
			if fcode != 0 || !strings.Contains(fout, `"type":"summary"`) || !strings.Contains(fout, `"errors":0`) {
				t.Errorf("lease fsck (read-only): exit %d\n%s%s", fcode, fout, ferr)
			}

			// The same table renewed by lease renew-batch: the same bytes.
			twin := filepath.Join(dir, "twin")
			table(t, dir, twin)
			if _, errb, code := run(t, dir, input, bin, "renew-batch", "--root", twin, "--now", "1050", "--ttl", "500"); code != 1 {
				t.Fatalf("lease renew-batch on the twin table: exit %d\n%s", code, errb)
			}
			for i := 0; i <= n; i++ {
				rel := filepath.Join("work", fmt.Sprintf("%02x", mustShard(t, id(i), 4)), id(i)+".json")
				a, errA := os.ReadFile(filepath.Join(root, rel))
				b, errB := os.ReadFile(filepath.Join(twin, rel))
				if errA != nil || errB != nil || !bytes.Equal(a, b) {
					t.Errorf("%s: seed.py wrote\n%s\nlease renew-batch wrote\n%s(%v, %v)", rel, a, b, errA, errB)
				}
			}
		})
	}
}

// mustShard is the shard of an ID in a table of n shards: int(ID[0:8], 16) % n.
func mustShard(t *testing.T, id string, n int) int {
	t.Helper()
	var v uint64
	if _, err := fmt.Sscanf(id[:8], "%x", &v); err != nil {
		t.Fatal(err)
	}
	return int(v % uint64(n))
}
