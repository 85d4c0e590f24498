package multiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/workcheck"
)

// workerLoop is the worker every node runs in the campaign: `lease work`,
// one long-lived worker that runs the work for one queue item after
// another until the queue is empty (exit 0), as a job script starts it. Its
// environment names lease ($LEASE), the table ($ROOT), the lease's TTL
// ($TTL) and the work ($WORK, a shell command that sees LEASE_ID and
// LEASE_TOKEN).
var workerLoop = `exec "$LEASE" work --root "$ROOT" --ttl "$TTL" -- sh -c "$WORK"`

// TestCampaignThroughTwoMounts: a queue of 160 items (lease add through
// mount A), worked by 8 workers (workerLoop), 4 through each mount, with
// the real clock and a 4 s TTL. When a third of the items are done, the
// whole process tree of one worker on each mount is killed with SIGKILL
// (lease work, its supervisor, its work). The others finish the queue. Every
// item is done, once: its record is done with the token of the one run
// that completed it, the work log has that run, and an item run more than
// once is one a killed worker held (at most one each).
func TestCampaignThroughTwoMounts(t *testing.T) {
	each(t, safeFilesystems(), func(t *testing.T, m mounts) {
		a, b := table(t, m)
		const n, workers = 160, 8
		all := ids(t.Name(), n)
		if r := lease(t, strings.Join(all, "\n")+"\n", "add", "--root", a); r.code != 0 || len(r.lines()) != n {
			t.Fatalf("add: %s", r)
		}
		logs := t.TempDir()
		work := `echo "$LEASE_ID $LEASE_TOKEN $W" >> "$LOGS/$W.log"; sleep 0.02`
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		var procs []*exec.Cmd
		done := make([]chan error, workers)
		for w := 0; w < workers; w++ {
			root := a
			if w%2 == 1 {
				root = b
			}
			cmd := exec.CommandContext(ctx, "sh", "-c", workerLoop)
			cmd.Env = append(os.Environ(), "LEASE="+leaseBin, "ROOT="+root, "TTL=4", "WORK="+work,
				"LOGS="+logs, fmt.Sprintf("W=w%d", w), fmt.Sprintf("LEASE_OWNER=w%d@%s", w, filepath.Base(filepath.Dir(root))))
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its tree is one process group
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			procs = append(procs, cmd)
			done[w] = make(chan error, 1)
			go func(w int) { done[w] <- procs[w].Wait() }(w)
		}
		// Kill worker 0 (mount A) and worker 1 (mount B) a third of the way.
		for len(workLog(t, logs)) < n/3 && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		killed := map[string]bool{"w0": true, "w1": true}
		for w := 0; w < 2; w++ {
			if err := syscall.Kill(-procs[w].Process.Pid, syscall.SIGKILL); err != nil {
				t.Errorf("kill worker %d: %v", w, err)
			}
		}
		for w := 0; w < workers; w++ {
			select {
			case err := <-done[w]:
				if w >= 2 && err != nil {
					t.Errorf("worker %d: %v", w, err)
				}
			case <-ctx.Done():
				t.Fatalf("worker %d still running after 4 minutes", w)
			}
		}
		runs := workLog(t, logs)
		recs := map[string]workcheck.Record{}
		for id, st := range statusAll(t, b, all) {
			recs[id] = workcheck.Record{Status: st.Status, Token: st.Token}
		}
		again := workcheck.Check(t, all, recs, runs, killed)
		// A killed lease run leaves what it was doing: its staging
		// directory (of the token it lost), a temp file of a record write
		// cut short. fsck names them, --repair removes them, nothing else:
		// at most one item of each killed worker.
		check := lease(t, "", "fsck", "--root", b)
		stale := workcheck.FsckDebris(t, "through B after the campaign", check.out, check.code, len(killed))
		if check.code == 4 {
			if r := lease(t, "", "fsck", "--repair", "--root", b); r.code != 1 {
				t.Errorf("fsck --repair through B: %s", r)
			}
		}
		if r := lease(t, "", "fsck", "--root", b); r.code != 0 {
			t.Errorf("fsck through B after the repair: %s", r)
		}
		counts := workcheck.PerWorker(runs)
		t.Logf("%d items done by %d workers over two mounts, 2 worker trees killed; %d runs, %d items run again after a kill, %d items with a temp file or staging directory left; runs per worker %v",
			n, workers, len(runs), again, stale, counts)
	})
}

// status is a record as lease status --json shows it.
type status struct {
	ID        string  `json:"id"`
	Status    string  `json:"status"`
	Token     int64   `json:"token"`
	RenewedAt float64 `json:"renewed_at"`
}

// statusAll reads the records of ids through root with lease status: a
// command of lease, so that on CephFS its reads of records the other
// client wrote last do not wait for the MDS's tick (the test's own
// os.ReadFile would, up to 5 s a record).
func statusAll(t *testing.T, root string, ids []string) map[string]status {
	t.Helper()
	r := lease(t, strings.Join(ids, "\n")+"\n", "status", "--json", "--root", root, "-")
	if r.code != 0 {
		t.Fatalf("status: %s", r)
	}
	out := map[string]status{}
	for _, l := range r.lines() {
		var st status
		if err := json.Unmarshal([]byte(l), &st); err != nil {
			t.Fatalf("status line %q: %v", l, err)
		}
		out[st.ID] = st
	}
	if len(out) != len(ids) {
		t.Fatalf("status of %d IDs printed %d records", len(ids), len(out))
	}
	return out
}

func workLog(t *testing.T, dir string) []workcheck.Run {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var out []workcheck.Run
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, workcheck.ParseRuns(string(b))...)
	}
	return out
}
