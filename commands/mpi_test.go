//go:build mpi

package commands_test

// lease as one program under a real mpirun (SPEC §8, seed F357): batch
// commands give the same bytes and exit status as one process, a rank that
// fails turns into the same negative result on every rank within the
// watchdog bound, and qualify proves the cluster. Run with
// `go test -tags mpi ./commands/`; the MPI binary is built once, beside
// the plain one TestMain built.

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasetool/lease/faultfs"
	"github.com/leasetool/lease/faultfs/faultfstest"
)

var (
	mpiBuildOnce sync.Once
	mpiBinPath   string
	mpiBuildErr  string
)

// mpiBinary returns the lease binary built with -tags mpi (once per test
// binary, in TestMain's directory, which TestMain removes); skipped when
// Open MPI is missing.
func mpiBinary(t *testing.T) string {
	t.Helper()
	mpiNeedLauncher(t)
	if _, err := exec.LookPath("pkg-config"); err != nil {
		mpiMissing(t, "pkg-config not found: install pkg-config libopenmpi-dev")
	}
	if err := exec.Command("pkg-config", "--exists", "ompi").Run(); err != nil {
		mpiMissing(t, "pkg-config --exists ompi failed: install libopenmpi-dev")
	}
	mpiBuildOnce.Do(func() {
		bin := filepath.Join(filepath.Dir(procBin), "lease-mpi")
		out, err := exec.Command("go", "build", "-tags", "mpi", "-o", bin, "github.com/leasetool/lease").CombinedOutput()
		if err != nil {
			mpiBuildErr = fmt.Sprintf("go build -tags mpi: %v\n%s", err, out)
			return
		}
		mpiBinPath = bin
	})
	if mpiBuildErr != "" {
		t.Fatal(mpiBuildErr)
	}
	return mpiBinPath
}

// mpiNP is the mpirun arguments of np copies of BIN ARGS, each under the
// rank wrapper.
func mpiNP(np int, bin string, args ...string) []string {
	return append([]string{"-np", strconv.Itoa(np), "@RANK", bin}, args...)
}

// mpiCopyTable copies the table src to dst (cp -a), replacing dst.
func mpiCopyTable(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
}

// mpiBatchDoc is the --json document of a batch command.
type mpiBatchDoc struct {
	Command string `json:"command"`
	Results []struct {
		ID           string          `json:"id"`
		Token        int64           `json:"token"`
		OK           bool            `json:"ok"`
		Reason       string          `json:"reason"`
		Detail       string          `json:"detail"`
		CurrentToken int64           `json:"current_token"`
		Path         string          `json:"path"`
		LatencyS     float64         `json:"latency_s"`
		Record       json.RawMessage `json:"record"`
	} `json:"results"`
	Stats struct {
		Batches               int64   `json:"batches"`
		Renewals              int64   `json:"renewals"`
		Lost                  int64   `json:"lost"`
		FileSyncs             int64   `json:"file_syncs"`
		DirectorySyncs        int64   `json:"directory_syncs"`
		DirectorySyncsAvoided int64   `json:"directory_syncs_avoided"`
		Failures              int64   `json:"failures"`
		DurationS             float64 `json:"duration_s"`
		LatencyP50            float64 `json:"latency_p50_s"`
		LatencyP99            float64 `json:"latency_p99_s"`
		Ranks                 int     `json:"ranks"`
		CollectiveS           float64 `json:"collective_s"`
	} `json:"stats"`
	Counts map[string]int `json:"counts"`
	Exit   int            `json:"exit"`
}

// mpiRankOutcome is what a batch run gave: rank 0's streams (the job's
// output), the exit status every rank agreed on, and the other ranks'
// streams, which must be empty.
type mpiRankOutcome struct {
	stdout, stderr string
	code           int
}

// mpiInput writes input to a file of its own and returns its path.
func mpiInput(t *testing.T, input string) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "input")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(input); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// mpiRunBatch runs lease ARGS FILE, FILE holding input, as one process (np
// 0) or under mpirun with np ranks, and returns the job's outcome; under
// mpirun it checks that every rank exited with the same status and that
// only rank 0 printed.
func mpiRunBatch(t *testing.T, bin string, np int, input string, args ...string) mpiRankOutcome {
	t.Helper()
	args = append(args, mpiInput(t, input))
	if np == 0 {
		out, errOut, code := mpiExec(t, bin, "", args...)
		return mpiRankOutcome{out, errOut, code}
	}
	job := mpiLaunch(t, 2*time.Minute, np, "", mpiNP(np, bin, args...)...)
	mpiSameExit(t, job)
	for r, rr := range job.ranks {
		if r > 0 && (rr.out != "" || rr.err != "") {
			t.Errorf("np %d: rank %d printed: stdout %q stderr %q; only rank 0 speaks", np, r, mpiClip(rr.out), mpiClip(rr.err))
		}
	}
	return mpiRankOutcome{job.ranks[0].out, job.ranks[0].err, job.ranks[0].exit}
}

// mpiSameExit fails t unless every rank of job finished with the same
// exit status.
func mpiSameExit(t *testing.T, job mpiJob) {
	t.Helper()
	for r, rr := range job.ranks {
		if rr.exit < 0 {
			t.Errorf("rank %d of %d did not finish (killed?); mpirun exit %d, stderr %s", r, len(job.ranks), job.code, mpiClip(job.stderr))
		} else if rr.exit != job.ranks[0].exit {
			t.Errorf("rank %d exited %d, rank 0 %d (stderr %q)", r, rr.exit, job.ranks[0].exit, mpiClip(rr.err))
		}
	}
}

// mpiShardOf is the work shard of id in a table of n shards (SPEC §2).
func mpiShardOf(t *testing.T, id string, n int) int {
	t.Helper()
	v, err := strconv.ParseUint(id[:8], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return int(v % uint64(n))
}

// TestMPIVersion: the MPI build says so.
func TestMPIVersion(t *testing.T) {
	bin := mpiBinary(t)
	out, _, code := mpiExec(t, bin, "", "version")
	if code != 0 || !strings.Contains(out, "with MPI support") || strings.Contains(out, "without") {
		t.Errorf("lease version (MPI build): exit %d, %q; want it to say: with MPI support", code, out)
	}
}

// TestMPIRenewBatchMatchesOneProcess: `mpirun -np 1..4 lease renew-batch`
// over 4096 leases in 64 shards prints the same stdout and stderr bytes,
// exits with the same status on every rank, and writes the same records
// as one process, with every token current and with stale, released and
// never claimed lines among them; its --json statistics are the sums over
// ranks: one file fsync per renewal and one directory fsync per touched
// shard. The runs renew the same table in turn, each with its own --now,
// so a record a run did not renew still carries an earlier run's time.
func TestMPIRenewBatchMatchesOneProcess(t *testing.T) {
	bin := mpiBinary(t)
	const n, shards, ttl = 4096, 64, 1e6
	dir := t.TempDir()
	root, held := mpiHeldTable(t, bin, dir, shards, n)
	// Release 16 leases: renewing them answers `released`.
	released := strings.Join(held[100:116], "\n") + "\n"
	if _, errOut, code := mpiExec(t, bin, released, "release", "--root", root, "--now", "1500"); code != 0 {
		t.Fatalf("release: exit %d: %s", code, errOut)
	}
	// The bad input: 40 stale tokens, the 16 released leases, and 24 IDs
	// never claimed (missing), spread over the input.
	bad := slices.Clone(held)
	for i := 0; i < 40; i++ {
		j := 200 + i*97
		bad[j] = strings.Fields(bad[j])[0] + " 2"
	}
	for i, id := range mpiIDs("never-claimed", 24) {
		bad = slices.Insert(bad, 3+i*170, id+" 1")
	}
	current := map[string]bool{} // the lines that renew: held, not released
	for _, line := range slices.Concat(held[:100], held[116:]) {
		current[line] = true
	}
	goodIn := strings.Join(slices.Concat(held[:100], held[116:]), "\n") + "\n"
	badIn := strings.Join(bad, "\n") + "\n"
	now := 2000 // every run renews at a time of its own
	times := func(at int) string {
		return fmt.Sprintf(`"renewed_at":%d,"expires_at":%d}`, at, at+int(ttl))
	}
	for _, tc := range []struct {
		name     string
		input    string
		code     int
		renewals int
	}{
		{"all current", goodIn, 0, n - 16},
		{"stale released missing", badIn, 1, n - 40 - 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := strings.Count(tc.input, "\n")
			touched := map[int]bool{} // shards of the renewals
			for _, line := range strings.Split(strings.TrimSpace(tc.input), "\n") {
				if current[line] {
					touched[mpiShardOf(t, strings.Fields(line)[0], shards)] = true
				}
			}
			if len(touched) != shards {
				t.Fatalf("the renewals touch %d shards, want all %d", len(touched), shards)
			}
			var want mpiRankOutcome
			var wantTable map[string]string
			var wantAt int
			for _, np := range []int{0, 1, 2, 3, 4} {
				now++
				got := mpiRunBatch(t, bin, np, tc.input, "renew-batch", "--root", root, "--now", strconv.Itoa(now), "--ttl", "1e6")
				table := mpiTree(t, root)
				if np == 0 {
					want, wantTable, wantAt = got, table, now
					if got.code != tc.code {
						t.Fatalf("one process: exit %d, want %d; stderr %q", got.code, tc.code, mpiClip(got.stderr))
					}
					if c := strings.Count(got.stdout, "\n"); c != tc.renewals {
						t.Fatalf("one process renewed %d, want %d", c, tc.renewals)
					}
					if c := strings.Count(got.stderr, "\n"); c != lines-tc.renewals {
						t.Fatalf("one process: %d stderr lines, want %d: %q", c, lines-tc.renewals, mpiClip(got.stderr))
					}
					if c := strings.Count(strings.Join(slices.Collect(maps.Values(table)), ""), times(now)); c != tc.renewals {
						t.Fatalf("one process: %d records renewed at %d, want %d", c, now, tc.renewals)
					}
					continue
				}
				if got.code != want.code {
					t.Errorf("np %d: exit %d, one process %d", np, got.code, want.code)
				}
				if got.stdout != want.stdout {
					t.Errorf("np %d: stdout differs from one process's (%d and %d bytes)", np, len(got.stdout), len(want.stdout))
				}
				if got.stderr != want.stderr {
					t.Errorf("np %d: stderr differs from one process's:\n%s\nwant:\n%s", np, mpiClip(got.stderr), mpiClip(want.stderr))
				}
				expect := map[string]string{}
				for name, rec := range wantTable {
					expect[name] = strings.Replace(rec, times(wantAt), times(now), 1)
				}
				mpiSameTree(t, fmt.Sprintf("np %d, against one process's records renewed at %d", np, now), expect, table)
			}
			// Statistics are sums over the ranks; the records are those
			// one process prints.
			var wantDoc mpiBatchDoc
			var wantDocAt int
			for _, np := range []int{0, 2, 4} {
				now++
				got := mpiRunBatch(t, bin, np, tc.input, "renew-batch", "--root", root, "--now", strconv.Itoa(now), "--ttl", "1e6", "--json")
				var doc mpiBatchDoc
				if err := json.Unmarshal([]byte(got.stdout), &doc); err != nil {
					t.Fatalf("np %d --json: %v: %q", np, err, mpiClip(got.stdout))
				}
				if np == 0 {
					wantDoc, wantDocAt = doc, now
				} else if len(doc.Results) == len(wantDoc.Results) {
					for i, r := range doc.Results {
						want := strings.Replace(string(wantDoc.Results[i].Record), strings.TrimSuffix(times(wantDocAt), "}"), strings.TrimSuffix(times(now), "}"), 1)
						if string(r.Record) != want || r.Reason != wantDoc.Results[i].Reason || r.Detail != wantDoc.Results[i].Detail {
							t.Errorf("np %d --json: result %d: %s %s %s, one process: %s %s %s", np, i, r.Reason, r.Detail, r.Record,
								wantDoc.Results[i].Reason, wantDoc.Results[i].Detail, want)
							break
						}
					}
				}
				s := doc.Stats
				if got.code != tc.code || doc.Exit != tc.code {
					t.Errorf("np %d --json: exit %d, document says %d, want %d", np, got.code, doc.Exit, tc.code)
				}
				if len(doc.Results) != lines || doc.Counts["ok"] != tc.renewals {
					t.Errorf("np %d --json: %d results, %d ok; want %d, %d", np, len(doc.Results), doc.Counts["ok"], lines, tc.renewals)
				}
				for i, r := range doc.Results {
					if id := strings.Fields(strings.Split(tc.input, "\n")[i])[0]; r.ID != id || r.OK != current[fmt.Sprintf("%s %d", r.ID, r.Token)] {
						t.Errorf("np %d --json: result %d is %s ok=%v, input line is %s", np, i, r.ID, r.OK, id)
						break
					}
				}
				if s.Renewals != int64(tc.renewals) || s.FileSyncs != int64(tc.renewals) || s.DirectorySyncs != int64(len(touched)) ||
					s.DirectorySyncsAvoided != int64(tc.renewals-len(touched)) || s.Lost != int64(lines-tc.renewals) || s.Failures != 0 {
					t.Errorf("np %d --json: stats %+v; want renewals = file_syncs = %d, directory_syncs = %d touched shards, lost %d",
						np, s, tc.renewals, len(touched), lines-tc.renewals)
				}
				wantRanks, wantBatches := 0, int64(1)
				if np > 1 {
					wantRanks, wantBatches = np, int64(np) // every rank holds shards of the input
				}
				if s.Ranks != wantRanks || s.Batches != wantBatches {
					t.Errorf("np %d --json: ranks %d batches %d, want %d and %d", np, s.Ranks, s.Batches, wantRanks, wantBatches)
				}
				if np > 1 && !(s.CollectiveS > 0 && s.CollectiveS < s.DurationS) {
					t.Errorf("np %d --json: collective_s %g, want it in (0, duration_s %g)", np, s.CollectiveS, s.DurationS)
				}
			}
		})
	}
}

// TestMPIOtherBatchCommands: release and verify (also through runBatch)
// print and write under mpirun exactly what one process does.
func TestMPIOtherBatchCommands(t *testing.T) {
	bin := mpiBinary(t)
	dir := t.TempDir()
	pristine, held := mpiHeldTable(t, bin, dir, 16, 300)
	held[5] = strings.Fields(held[5])[0] + " 9" // stale
	input := strings.Join(held, "\n") + "\n"
	work := filepath.Join(dir, "work")
	for _, cmd := range []string{"verify", "release"} {
		var want mpiRankOutcome
		var wantTable map[string]string
		for _, np := range []int{0, 3} {
			mpiCopyTable(t, pristine, work)
			got := mpiRunBatch(t, bin, np, input, cmd, "--root", work, "--now", "2000")
			table := mpiTree(t, work)
			if np == 0 {
				want, wantTable = got, table
				if got.code != 1 || strings.Count(got.stdout, "\n") != 299 {
					t.Fatalf("%s, one process: exit %d, %d lines; want 1 and 299", cmd, got.code, strings.Count(got.stdout, "\n"))
				}
				continue
			}
			if got != want {
				t.Errorf("%s np %d: exit %d stdout %d bytes stderr %q; one process: exit %d stdout %d bytes stderr %q",
					cmd, np, got.code, len(got.stdout), mpiClip(got.stderr), want.code, len(want.stdout), mpiClip(want.stderr))
			}
			mpiSameTree(t, cmd+" np 3", wantTable, table)
		}
	}
}

// TestMPIStdinGoesToRank0: `mpirun lease verify < held`, the input on
// stdin, which mpirun gives to rank 0 only: every rank checks its shards
// of all the lines. Verify writes nothing, so a job that Open MPI 4.x's
// mpirun itself crashed in forwarding stdin (open-mpi/ompi#7483) is run
// again, at most twice, and logged.
func TestMPIStdinGoesToRank0(t *testing.T) {
	bin := mpiBinary(t)
	dir := t.TempDir()
	root, held := mpiHeldTable(t, bin, dir, 16, 1000)
	held[17] = strings.Fields(held[17])[0] + " 5" // stale
	input := strings.Join(held, "\n") + "\n"
	args := []string{"verify", "--root", root, "--now", "2000"}
	wantOut, wantErr, wantCode := mpiExec(t, bin, input, args...)
	if wantCode != 1 || strings.Count(wantOut, "\n") != 999 || !strings.HasPrefix(wantErr, "stale-token ") {
		t.Fatalf("one process: exit %d, %d lines, stderr %q", wantCode, strings.Count(wantOut, "\n"), wantErr)
	}
	for _, np := range []int{2, 4} {
		var job mpiJob
		for attempt := 1; ; attempt++ {
			job = mpiLaunch(t, 2*time.Minute, np, input, mpiNP(np, bin, args...)...)
			if !strings.Contains(job.stderr, "orte_iof_hnp_read_local_handler") || attempt == 3 {
				break
			}
			t.Logf("np %d: mpirun crashed forwarding stdin (open-mpi/ompi#7483), attempt %d; running it again", np, attempt)
		}
		mpiSameExit(t, job)
		if got := job.ranks[0]; got.exit != wantCode || got.out != wantOut || got.err != wantErr {
			t.Errorf("np %d: exit %d, stdout %d bytes, stderr %q; one process: exit %d, %d bytes, %q",
				np, got.exit, len(got.out), got.err, wantCode, len(wantOut), wantErr)
		}
		for r, rr := range job.ranks[1:] {
			if rr.out != "" || rr.err != "" {
				t.Errorf("np %d: rank %d printed %q %q", np, r+1, mpiClip(rr.out), mpiClip(rr.err))
			}
		}
	}
}

// TestMPIRankFailureIsAgreed: one rank's view of the table is missing or
// read-only, or one rank is stuck in its filesystem. Every rank that
// finishes exits with the same status, within the watchdog bound, and
// nothing is printed as renewed (seed F357: one rank's failure is the
// same negative result on all ranks, never a hang).
func TestMPIRankFailureIsAgreed(t *testing.T) {
	bin := mpiBinary(t)
	dir := t.TempDir()
	root, held := mpiHeldTable(t, bin, dir, 16, 200)
	input := mpiInput(t, strings.Join(held, "\n")+"\n")
	missing := filepath.Join(dir, "no", "such", "table")
	renew := []string{"renew-batch", "--now", "2000", "--mpi-timeout", "30", input}
	// app is one MPMD application: a rank of lease ARGS with LEASE_ROOT.
	app := func(leaseRoot string) []string {
		return append([]string{"-np", "1", "@RANK", "env", "LEASE_ROOT=" + leaseRoot, bin}, renew...)
	}
	agreed := func(t *testing.T, job mpiJob, code int, say ...string) {
		t.Helper()
		for r, rr := range job.ranks {
			if rr.exit != code {
				t.Errorf("rank %d: exit %d, want %d (stderr %q)", r, rr.exit, code, mpiClip(rr.err))
			}
			if rr.out != "" {
				t.Errorf("rank %d printed on stdout %q: nothing may be reported renewed", r, mpiClip(rr.out))
			}
		}
		for _, s := range say {
			if !strings.Contains(job.ranks[0].err, s) {
				t.Errorf("rank 0's stderr does not say %q: %q", s, mpiClip(job.ranks[0].err))
			}
		}
	}
	t.Run("rank 1 root missing", func(t *testing.T) {
		before := mpiTree(t, root)
		job := mpiLaunch(t, 2*time.Minute, 2, "", slices.Concat(app(root), []string{":"}, app(missing))...)
		agreed(t, job, 2, "rank 1 of 2", "no lease table at "+missing)
		mpiSameTree(t, "after the failed run", before, mpiTree(t, root))
		if _, err := os.Stat(missing); err == nil {
			t.Errorf("rank 1 made a table at %s", missing)
		}
		// mpirun itself exits with the agreed status.
		job = mpiLaunchDefault(t, 2*time.Minute, 2, "", slices.Concat(app(root), []string{":"}, app(missing))...)
		if job.code != 2 {
			t.Errorf("mpirun exit %d, want 2; stderr %s", job.code, mpiClip(job.stderr))
		}
	})
	t.Run("rank 0 root missing", func(t *testing.T) {
		// Only lease init creates a table: rank 0 refuses, and so do all.
		os.RemoveAll(filepath.Join(dir, "no"))
		before := mpiTree(t, root)
		job := mpiLaunch(t, 2*time.Minute, 2, "", slices.Concat(app(missing), []string{":"}, app(root))...)
		agreed(t, job, 2, "rank 0 of 2", "no lease table at "+missing)
		mpiSameTree(t, "after the failed run", before, mpiTree(t, root))
		if _, err := os.Stat(missing); err == nil {
			t.Errorf("rank 0 made a table at %s", missing)
		}
	})
	t.Run("watch, rank 1 on another table", func(t *testing.T) {
		// renew-batch --watch across ranks checks, as one-shot batches do,
		// that every rank opened rank 0's table (it did not before).
		other := filepath.Join(dir, "other")
		mpiCopyTable(t, root, other)
		os.Chtimes(filepath.Join(other, "TABLE"), time.Unix(1, 0), time.Unix(1, 0))
		before := mpiTree(t, root)
		watch := []string{"renew-batch", "--watch", "--interval", "0.5", "--mpi-timeout", "30", input}
		wapp := func(leaseRoot string) []string {
			return append([]string{"-np", "1", "@RANK", "env", "LEASE_ROOT=" + leaseRoot, bin}, watch...)
		}
		job := mpiLaunch(t, 2*time.Minute, 2, "", slices.Concat(wapp(root), []string{":"}, wapp(other))...)
		agreed(t, job, 2, "rank 1 of 2", "opened another table than rank 0")
		mpiSameTree(t, "after the refused watch", before, mpiTree(t, root))
	})
	t.Run("rank 1 root read-only", func(t *testing.T) {
		mpiNeedRoot(t, "a read-only bind mount")
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o777); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "--bind", root, ro).CombinedOutput(); err != nil {
			mpiMissing(t, "mount --bind: "+strings.TrimSpace(string(out)))
		}
		t.Cleanup(func() {
			if out, err := exec.Command("umount", ro).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v: %s", ro, err, out)
				exec.Command("umount", "-l", ro).Run()
			}
		})
		if out, err := exec.Command("mount", "-o", "remount,ro,bind", ro).CombinedOutput(); err != nil {
			t.Fatalf("mount -o remount,ro,bind: %v: %s", err, out)
		}
		job := mpiLaunch(t, 2*time.Minute, 2, "", slices.Concat(app(root), []string{":"}, app(ro))...)
		agreed(t, job, 4)
		// Every line is on stderr as an I/O error. Rank 0 renewed its
		// shards, but reports none: they name rank 1's read-only
		// filesystem as the cause.
		lines := strings.Split(strings.TrimSuffix(job.ranks[0].err, "\n"), "\n")
		if len(lines) != len(held) {
			t.Fatalf("rank 0 printed %d stderr lines, want %d: %q", len(lines), len(held), mpiClip(job.ranks[0].err))
		}
		var mine, theirs int
		for _, l := range lines {
			switch {
			case !strings.HasPrefix(l, "io-error "):
				t.Errorf("stderr line %q, want reason io-error", l)
			case strings.Contains(l, "("+ro+"/"):
				theirs++
			case strings.Contains(l, "("+root+"/"):
				mine++
				if !strings.Contains(l, "batch failed, not renewed: rank 1 of 2") || !strings.Contains(l, "read-only file system") {
					t.Errorf("rank 0's line %q does not name rank 1's read-only filesystem", l)
				}
			default:
				t.Errorf("stderr line %q names neither root", l)
			}
		}
		if mine == 0 || theirs == 0 || !strings.Contains(job.ranks[0].err, "read-only file system (the table's filesystem is mounted read-only") {
			t.Errorf("%d lines of rank 0's shards, %d of rank 1's; want some of each, and rank 1's cause", mine, theirs)
		}
	})
	t.Run("rank 1 stuck", func(t *testing.T) {
		// Rank 1 sees the table through a FUSE mount whose file fsyncs
		// never return: rank 0 waits for it in a collective until the
		// watchdog (--mpi-timeout 3) aborts the whole job.
		m := faultfstest.MountOn(t, root, t.TempDir(), faultfs.Options{Rules: []faultfs.Rule{{Op: faultfs.OpFsync, Delay: time.Hour}}})
		stuck := slices.Clone(renew)
		stuck[len(stuck)-2] = "3" // --mpi-timeout
		start := time.Now()
		job := mpiLaunch(t, 2*time.Minute, 2, "", slices.Concat(
			[]string{"-np", "1", "@RANK", "env", "LEASE_ROOT=" + root, bin}, stuck, []string{":"},
			[]string{"-np", "1", "@RANK", "env", "LEASE_ROOT=" + m.Dir, bin}, stuck)...)
		if job.code != 4 {
			t.Errorf("mpirun exit %d, want 4 (the watchdog's); stderr %s", job.code, mpiClip(job.stderr))
		}
		for r, rr := range job.ranks {
			if rr.out != "" {
				t.Errorf("rank %d printed on stdout %q", r, mpiClip(rr.out))
			}
		}
		if !strings.Contains(job.ranks[0].err, "did not complete within 3s") {
			t.Errorf("rank 0's stderr does not name the watchdog: %q", mpiClip(job.ranks[0].err))
		}
		t.Logf("the stuck job ended after %v", time.Since(start).Round(time.Millisecond))
	})
}

// mpiQualify runs qualify under mpirun with np ranks and returns every
// rank's proof, checking that all ranks printed the identical line and
// exited with the same status as mpirun.
func mpiQualify(t *testing.T, np int, apps ...string) (qualProof, mpiJob) {
	t.Helper()
	job := mpiLaunch(t, 2*time.Minute, np, "", apps...)
	mpiSameExit(t, job)
	job.code = job.ranks[0].exit
	for r, rr := range job.ranks {
		if rr.out != job.ranks[0].out {
			t.Errorf("np %d: rank %d printed another proof than rank 0:\n%s\nrank 0:\n%s", np, r, mpiClip(rr.out), mpiClip(job.ranks[0].out))
		}
	}
	return qualDecode(t, job.ranks[0].out), job
}

// TestMPIQualify: on the root filesystem qualify is verified as one
// process and under mpirun -np 2, 3, 4: every rank prints the identical
// proof, with every rank a member, contention = identity =
// rounds*(size-1) and release = rounds. Ranks that do not share the
// filesystem, or share one whose locks do not exclude, get one identical
// negative proof and exit 1 on every rank.
func TestMPIQualify(t *testing.T) {
	bin := mpiBinary(t)
	const rounds = 3
	root := filepath.Join(t.TempDir(), "table")
	out, errOut, code := mpiExec(t, bin, "", "qualify", "--json", "--root", root, "--rounds", "5")
	if code != 0 {
		t.Errorf("one process: exit %d, stderr %q", code, errOut)
	}
	qualPasses(t, qualDecode(t, out), out)
	for _, np := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("np %d", np), func(t *testing.T) {
			p, job := mpiQualify(t, np, mpiNP(np, bin, "qualify", "--json", "--root", root, "--rounds", strconv.Itoa(rounds))...)
			if job.code != 0 || !p.Verified || !p.Clean || p.Error != "" {
				t.Errorf("exit %d, proof %s", job.code, mpiClip(job.ranks[0].out))
			}
			if p.Rounds != rounds || p.Contention != rounds*(np-1) || p.Identity != rounds*(np-1) || p.Release != rounds {
				t.Errorf("rounds %d contention %d identity %d release %d; want %d, %d, %d, %d",
					p.Rounds, p.Contention, p.Identity, p.Release, rounds, rounds*(np-1), rounds*(np-1), rounds)
			}
			if len(p.Members) != np {
				t.Errorf("%d members, want %d", len(p.Members), np)
			}
			for r := 0; r < np; r++ {
				if r < len(p.Members) && p.Members[r].Rank != r {
					t.Errorf("member %d is rank %d", r, p.Members[r].Rank)
				}
				for _, name := range qualLocalChecks {
					if pass, once := qualCheck(p, name, r); !pass || !once {
						t.Errorf("rank %d check %s: pass=%v once=%v", r, name, pass, once)
					}
				}
			}
			for _, name := range []string{"cluster-rounds", "rank-clock-skew"} {
				if pass, once := qualCheck(p, name, 0); !pass || !once {
					t.Errorf("check %s: pass=%v once=%v", name, pass, once)
				}
			}
			qualNoScratchLeft(t, root)
		})
	}
	t.Run("not shared", func(t *testing.T) {
		// Rank 1 has a table root of its own: it cannot see rank 0's
		// scratch directory, takes a lock rank 0 holds, and reads no
		// identity record.
		other := filepath.Join(t.TempDir(), "table")
		p, job := mpiQualify(t, 2, slices.Concat(
			mpiNP(1, bin, "qualify", "--json", "--root", root, "--rounds", strconv.Itoa(rounds)), []string{":"},
			mpiNP(1, bin, "qualify", "--json", "--root", other, "--rounds", strconv.Itoa(rounds)))...)
		if job.code != 1 || p.Verified || p.Clean {
			t.Errorf("exit %d verified %v clean %v; want 1, false, false", job.code, p.Verified, p.Clean)
		}
		if p.Contention != 0 || p.Identity != 0 {
			t.Errorf("contention %d identity %d, want 0 and 0: %s", p.Contention, p.Identity, mpiClip(job.ranks[0].out))
		}
		if pass, _ := qualCheck(p, "scratch-directory", 1); pass {
			t.Errorf("rank 1's scratch-directory check passed: %s", mpiClip(job.ranks[0].out))
		}
		if !strings.Contains(p.Error, "on rank 1") {
			t.Errorf("error %q does not name rank 1", p.Error)
		}
	})
	t.Run("locks do not exclude", func(t *testing.T) {
		m := faultfstest.Mount(t, faultfs.Options{Locks: faultfs.LocksBroken})
		p, job := mpiQualify(t, 2, mpiNP(2, bin, "qualify", "--json", "--root", m.Dir, "--rounds", strconv.Itoa(rounds))...)
		if job.code != 1 || p.Verified {
			t.Errorf("exit %d verified %v; want 1, false", job.code, p.Verified)
		}
		for r := 0; r < 2; r++ {
			if pass, once := qualCheck(p, "lock-exclusion", r); pass || !once {
				t.Errorf("rank %d lock-exclusion pass=%v once=%v, want failing", r, pass, once)
			}
		}
		if p.Contention != 0 {
			t.Errorf("contention %d, want 0: every rank took the held lock", p.Contention)
		}
		if pass, _ := qualCheck(p, "cluster-rounds", 0); pass {
			t.Errorf("cluster-rounds passed")
		}
	})
}

// TestMPISingleProcessCommandsRefuseRanks: the writing commands that do
// not run across ranks refuse, on every rank, to run as several copies
// (fsck with its usage status 16), and write nothing.
func TestMPISingleProcessCommandsRefuseRanks(t *testing.T) {
	bin := mpiBinary(t)
	root := filepath.Join(t.TempDir(), "table")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"init", "--root", root}, 2},
		{[]string{"complete", "--root", root, os.DevNull}, 2},
		{[]string{"fsck", "--repair", "--root", root}, 16},
		{[]string{"run", "--root", root, strings.Repeat("a", 64), "--", "true"}, 125},
	} {
		job := mpiLaunch(t, time.Minute, 2, "", mpiNP(2, bin, tc.args...)...)
		mpiSameExit(t, job)
		if got := job.ranks[0].exit; got != tc.code || !strings.Contains(job.ranks[0].err, "runs as one process") {
			t.Errorf("mpirun -np 2 lease %s: exit %d, stderr %q; want exit %d and a refusal", tc.args[0], got, mpiClip(job.ranks[0].err), tc.code)
		}
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Fatalf("lease %s under 2 ranks touched %s (%v)", tc.args[0], root, err)
		}
	}
}
