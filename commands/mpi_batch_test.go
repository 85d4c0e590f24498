//go:build mpi

package commands_test

// Batch commands under mpirun (docs/design.md#mpi): renew-batch, release and verify
// print, exit and write what one process does, with the input from a file
// or on rank 0's stdin. Run with `go test -tags mpi ./commands/`.

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasetool/lease/leasefmt"
)

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
				got := mpiRunBatch(t, bin, np, tc.input, "renew-batch", "--root", root, "--now", strconv.Itoa(now), "--ttl", "1e6", "--json", "--sync", "record")
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

// TestMPIAddMatchesOneProcess: lease add under mpirun (split by shard, in
// one piece) prints and queues exactly what one process does (streamed in
// chunks), repeated IDs and IDs already queued included.
func TestMPIAddMatchesOneProcess(t *testing.T) {
	bin := mpiBinary(t)
	dir := t.TempDir()
	ids := coreIDs("mpi-add", 500)
	input := coreJoin(append(append([]leasefmt.ID{}, ids...), ids[3], ids[400]), "")
	var want mpiRankOutcome
	var wantTable map[string]string
	for _, np := range []int{0, 3} {
		root := filepath.Join(dir, fmt.Sprintf("np%d", np))
		if out, errOut, code := mpiExec(t, bin, "", "init", "--root", root, "--shards", "16"); code != 0 {
			t.Fatalf("lease init: exit %d\n%s%s", code, out, errOut)
		}
		if _, errOut, code := mpiExec(t, bin, string(ids[7])+"\n", "add", "--root", root); code != 0 {
			t.Fatalf("lease add of one ID: exit %d\n%s", code, errOut)
		}
		got := mpiRunBatch(t, bin, np, input, "add", "--root", root)
		table := map[string]string{} // the queue: TABLE differs by its creation time
		for k, v := range mpiTree(t, root) {
			if strings.HasPrefix(k, "queue/") {
				table[k] = v
			}
		}
		if len(table) != 500 {
			t.Errorf("add np %d: %d queue entries, want 500", np, len(table))
		}
		if np == 0 {
			want, wantTable = got, table
			if got.code != 0 || strings.Count(got.stdout, "\n") != 499 {
				t.Fatalf("add, one process: exit %d, %d lines; want 0 and 499\n%s", got.code, strings.Count(got.stdout, "\n"), got.stderr)
			}
			continue
		}
		if got != want {
			t.Errorf("add np %d: exit %d stdout %d bytes stderr %q; one process: exit %d stdout %d bytes stderr %q",
				np, got.code, len(got.stdout), mpiClip(got.stderr), want.code, len(want.stdout), mpiClip(want.stderr))
		}
		mpiSameTree(t, "add np 3", wantTable, table)
	}
}
