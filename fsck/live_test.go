package fsck_test

// fsck --repair on a live table (issue 28): real workers claim, stage,
// publish and remove their staging directories while repairs run; names
// that vanish under a scan are no errors; two repairs serialize on the
// repair lock; no staged file is ever deleted.

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/fsck"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
	"golang.org/x/sys/unix"
)

// liveWorker is the CMD of a worker's lease run: stage a result named
// after the item holding its ID and token, then publish it fenced by the
// token. lease run made LEASE_STAGE and removes it when CMD leaves it
// empty.
const liveWorker = `printf '%s %s\n' "$LEASE_ID" "$LEASE_TOKEN" > "$LEASE_STAGE/$LEASE_ID.out" &&
echo "$LEASE_ID $LEASE_TOKEN" | lease complete --publish "$LEASE_ID.out" > /dev/null`

// leaseEnv is the environment of the processes of a live test: lease on
// PATH, LEASE_ROOT set, no configuration file of the user's.
func leaseEnv(t *testing.T, root string) []string {
	bin := leaseBin(t)
	env := []string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "LEASE_ROOT=" + root, "XDG_CONFIG_HOME=" + t.TempDir(), "HOME=" + os.Getenv("HOME")}
	return env
}

// runEnv runs lease ARGS with env and returns stdout+stderr and the status.
func runEnv(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(leaseBin(t), args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("lease %v: %v", args, err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// TestRepairWhileWorkersPublish runs fsck --repair in a loop while four
// real workers take items of the queue with lease run --next, stage a
// result and publish it: staging directories appear and vanish, temp files
// are renamed over records, queue entries are removed, all under the
// repairs' scans. Every repair must exit 0 or 1: before, repairs exited 8
// or 9 ("cannot list stage/ID.TOKEN: no such file or directory") in about
// half the runs. Afterwards every item is done with one result, the final
// holder's, and the table is clean.
func TestRepairWhileWorkersPublish(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("sh not found")
	}
	root := filepath.Join(t.TempDir(), "table")
	env := leaseEnv(t, root)
	if out, code := runEnv(t, env, "init", "--shards", "4"); code != 0 {
		t.Fatalf("init: %s", out)
	}
	const items = 200
	all := ids("publish", items)
	cmd := exec.Command(leaseBin(t), "add")
	cmd.Env, cmd.Stdin = env, strings.NewReader(idInput(all))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("add: %v %s", err, out)
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	var runs atomic.Int64
	werr := make(chan string, 8)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				out, code := runEnv(t, env, "run", "--next", "--wait", "--ttl", "60", "--", "sh", "-c", liveWorker)
				switch code {
				case 0:
					runs.Add(1)
				case 123: // the queue is empty
					return
				default:
					werr <- fmt.Sprintf("lease run --next: exit %d: %s", code, out)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	repairs := 0
	codes := map[int]int{}
loop:
	for {
		select {
		case <-done:
			break loop
		default:
		}
		out, code := runEnv(t, env, "fsck", "--repair")
		repairs++
		codes[code]++
		if code&^1 != 0 {
			stop.Store(true)
			<-done
			t.Fatalf("fsck --repair %d while workers publish: exit %d, want 0 or 1\n%s", repairs, code, problems(out))
		}
	}
	close(werr)
	for e := range werr {
		t.Error(e)
	}
	if repairs < 3 {
		t.Errorf("only %d repairs ran while the workers worked: the test proves nothing", repairs)
	}
	t.Logf("%d repairs (exit statuses %v) during %d lease runs", repairs, codes, runs.Load())
	if out, code := runEnv(t, env, "fsck"); code != 0 {
		t.Fatalf("final fsck: exit %d\n%s", code, out)
	}
	for _, id := range all {
		rel := filepath.Join(root, "work", leasefmt.ShardDirName(id.Shard(4), 4), id.FileName())
		data, err := os.ReadFile(rel)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		rec, err := leasefmt.Decode(data, leasefmt.Work, id)
		if err != nil || rec.Status != leasefmt.Done {
			t.Errorf("%s: %v %+v, want done", id, err, rec)
			continue
		}
		got, err := os.ReadFile(filepath.Join(root, "public", string(id)+".out"))
		if want := fmt.Sprintf("%s %d\n", id, rec.Token); err != nil || string(got) != want {
			t.Errorf("public/%s.out: %q, %v; want the final holder's %q", id, got, err, want)
		}
	}
}

// problems keeps the lines of a report that are not repairs, for failure
// messages.
func problems(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "repaired ") {
			keep = append(keep, l)
		}
	}
	s := strings.Join(keep, "\n")
	if len(s) > 1500 {
		s = s[:1500] + "..."
	}
	return s
}

// damage gives a fresh table n stale staging directories (each holding a
// file), n empty ones, n stray temp files and n results no record names:
// work enough that two repairs overlap.
func damage(t *testing.T, root string, shards, n int) {
	t.Helper()
	for i, id := range ids(fmt.Sprintf("damage-%d", time.Now().UnixNano()), n) {
		stage := filepath.Join(root, "stage", fmt.Sprintf("%s.%d", id, 3))
		if err := os.MkdirAll(stage, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stage, "r.bin"), []byte("staged "+string(id)), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Mkdir(filepath.Join(root, "stage", fmt.Sprintf("%s.%d", id, 4)), 0o755)
		dir := filepath.Join(root, "work", leasefmt.ShardDirName(id.Shard(shards), shards))
		os.WriteFile(filepath.Join(dir, "."+id.FileName()+".tmp.x"+strconv.Itoa(i)), []byte("torn"), 0o644)
		os.WriteFile(filepath.Join(root, "public", fmt.Sprintf("orphan-%d", i)), []byte("nobody's"), 0o644)
	}
}

// lostFiles counts the quarantined files of lost+found/ by their bytes
// (notes excluded), walking the quarantined directories.
func lostFiles(t *testing.T, root string) map[string]int {
	t.Helper()
	out := map[string]int{}
	filepath.WalkDir(filepath.Join(root, "lost+found"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".why") {
			return err
		}
		data, _ := os.ReadFile(p)
		out[string(data)]++
		return nil
	})
	return out
}

// TestConcurrentRepairsSerialize starts three fsck --repair at once on a
// damaged table, several times: each must exit 0 or 1 (the first repairs,
// the others wait for the repair lock and find it done), every staged file
// must be in lost+found/ exactly once, and the table clean after. Before,
// the repairs moved what the others were checking and exited 4, 8 or 12.
func TestConcurrentRepairsSerialize(t *testing.T) {
	const shards = 8
	root := filepath.Join(t.TempDir(), "table")
	env := leaseEnv(t, root)
	if out, code := runEnv(t, env, "init", "--shards", strconv.Itoa(shards)); code != 0 {
		t.Fatalf("init: %s", out)
	}
	const n = 150
	for round := 0; round < 3; round++ {
		damage(t, root, shards, n)
		var wg sync.WaitGroup
		outs := make([]string, 3)
		codes := make([]int, 3)
		start := make(chan struct{})
		for i := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				outs[i], codes[i] = runEnv(t, env, "fsck", "--repair", "--lock-timeout", "120")
			}()
		}
		close(start)
		wg.Wait()
		repaired := 0
		for i, code := range codes {
			if code&^1 != 0 {
				t.Errorf("round %d: repair %d of 3 at once: exit %d, want 0 or 1\n%s", round, i, code, problems(outs[i]))
			}
			if code == 1 {
				repaired++
			}
		}
		if repaired == 0 {
			t.Errorf("round %d: no repair repaired anything (exit statuses %v)", round, codes)
		}
		if out, code := runEnv(t, env, "fsck"); code != 0 {
			t.Fatalf("round %d: fsck after the repairs: exit %d\n%s", round, code, out)
		}
	}
	lost := lostFiles(t, root)
	staged := 0
	for data, k := range lost {
		if strings.HasPrefix(data, "staged ") {
			staged++
			if k != 1 {
				t.Errorf("lost+found/ holds %d copies of %q", k, data)
			}
		}
	}
	if staged != 3*n {
		t.Errorf("lost+found/ holds %d staged files, want the %d staged (none deleted)", staged, 3*n)
	}
}

// TestSecondRepairWaitsThenGivesUp: while the repair lock is held (here
// by this process, as a running repair holds it), fsck --repair waits for
// --lock-timeout, then exits 8 saying that another repair runs, having
// changed nothing; a read-only check does not wait for it; and a repair
// whose wait ends in time repairs.
func TestSecondRepairWaitsThenGivesUp(t *testing.T) {
	const shards = 4
	root := filepath.Join(t.TempDir(), "table")
	env := leaseEnv(t, root)
	if out, code := runEnv(t, env, "init", "--shards", strconv.Itoa(shards)); code != 0 {
		t.Fatalf("init: %s", out)
	}
	damage(t, root, shards, 3)
	osfs, err := seam.OS(root)
	if err != nil {
		t.Fatal(err)
	}
	defer osfs.Close()
	unlock, err := osfs.Lock(context.Background(), filepath.Join("work", "00", layout.LockFile), fsck.RepairLockOffset, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, root)
	start := time.Now()
	out, code := runEnv(t, env, "fsck", "--repair", "--lock-timeout", "0.5")
	if code != 8 || !strings.Contains(out, "another lease fsck --repair is running on this table") || !strings.Contains(out, "--lock-timeout") {
		t.Errorf("fsck --repair while another holds the repair lock: exit %d\n%s\nwant exit 8 saying another repair runs", code, out)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("fsck --repair gave up after %v, before its --lock-timeout of 0.5 s", d)
	}
	if d := diffSnapshots(before, snapshot(t, root)); len(d) > 0 {
		t.Errorf("the refused repair changed the table: %v", d)
	}
	if out, code := runEnv(t, env, "fsck", "--lock-timeout", "0.5"); code != 4 {
		t.Errorf("read-only fsck while a repair runs: exit %d, want 4 (the damage, unrepaired)\n%s", code, out)
	}
	go func() { time.Sleep(300 * time.Millisecond); unlock() }()
	if out, code := runEnv(t, env, "fsck", "--repair", "--lock-timeout", "30"); code != 1 {
		t.Errorf("fsck --repair once the lock is released: exit %d, want 1\n%s", code, out)
	}
}

// TestStaleStagedCopyIsQuarantined: a stale token's staged file whose
// bytes equal the result the current token published under the same name
// is another file: the repair moves it to lost+found/ (it deleted it,
// taking it for the leftover name of a finished publish). A true leftover,
// the same inode as the published file, is still removed.
func TestStaleStagedCopyIsQuarantined(t *testing.T) {
	root := filepath.Join(t.TempDir(), "table")
	env := leaseEnv(t, root)
	if out, code := runEnv(t, env, "init", "--shards", "4"); code != 0 {
		t.Fatalf("init: %s", out)
	}
	id := ids("stale-copy", 1)[0]
	claim := func(now string) {
		t.Helper()
		if out, code := runEnv(t, env, "claim", "--now", now, "--ttl", "10", string(id)); code != 0 {
			t.Fatalf("claim at %s: %s", now, out)
		}
	}
	stage := func(tok int, data string) string {
		t.Helper()
		dir := filepath.Join(root, "stage", fmt.Sprintf("%s.%d", id, tok))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "same.bin")
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	claim("1000")
	stage(1, "SAME BYTES")
	claim("1020") // token 1 expired: token 2
	stage(2, "SAME BYTES")
	cmd := exec.Command(leaseBin(t), "complete", "--now", "1021", "--publish", "same.bin")
	cmd.Env, cmd.Stdin = env, strings.NewReader(string(id)+" 2\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("complete --publish: %v %s", err, out)
	}
	// A second item, published, whose staged name is still linked to its
	// published result (a move that fell back to link and unlink and died
	// between them).
	other := ids("stale-link", 1)[0]
	if out, code := runEnv(t, env, "claim", "--now", "1000", "--ttl", "10", string(other)); code != 0 {
		t.Fatal(out)
	}
	dir := filepath.Join(root, "stage", string(other)+".1")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "linked.bin"), []byte("LINKED"), 0o644)
	cmd = exec.Command(leaseBin(t), "complete", "--now", "1001", "--publish", "linked.bin")
	cmd.Env, cmd.Stdin = env, strings.NewReader(string(other)+" 1\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("complete --publish: %v %s", err, out)
	}
	os.MkdirAll(dir, 0o755)
	if err := os.Link(filepath.Join(root, "public", "linked.bin"), filepath.Join(dir, "linked.bin")); err != nil {
		t.Fatal(err)
	}
	out, code := runEnv(t, env, "fsck", "--repair", "--now", "1100")
	if code&^1 != 0 {
		t.Fatalf("fsck --repair: exit %d\n%s", code, out)
	}
	if _, err := os.Lstat(filepath.Join(root, "stage", string(id)+".1")); err == nil {
		t.Errorf("the stale staging directory is still in stage/:\n%s", out)
	}
	if n := lostFiles(t, root)["SAME BYTES"]; n != 1 {
		t.Errorf("lost+found/ holds %d copies of the stale staged file, want 1 (never deleted)\n%s", n, out)
	}
	if data, err := os.ReadFile(filepath.Join(root, "public", "same.bin")); err != nil || string(data) != "SAME BYTES" {
		t.Errorf("public/same.bin: %q %v", data, err)
	}
	if !strings.Contains(out, "publish-leftover") || lostFiles(t, root)["LINKED"] != 0 {
		t.Errorf("the staged link to a published result was not removed as a leftover:\n%s", out)
	}
}

// TestStageVanishedOnNFS: a staging directory another NFS client removed
// after stage/ was listed answers ESTALE, not ENOENT, to the listing (the
// campaign suite's live fsck met it). A fresh lookup that finds nothing
// there makes it the vanished name it is, not an io finding (exit 8); an
// ESTALE for a directory still there stays one.
func TestStageVanishedOnNFS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		remove  bool
		wantIOs int
	}{
		{"removed meanwhile", true, 0},
		{"still there", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := filepath.Join(t.TempDir(), "table")
			env := leaseEnv(t, root)
			if out, code := runEnv(t, env, "init", "--shards", "4"); code != 0 {
				t.Fatalf("init: %s", out)
			}
			id := ids("estale", 1)[0]
			if out, code := runEnv(t, env, "claim", "--now", "1000", "--ttl", "10", string(id)); code != 0 {
				t.Fatalf("claim: %s", out)
			}
			// Token 1 expired and token 2 holds the item: stage/ID.1 is a
			// stale staging directory, listed by the check.
			if out, code := runEnv(t, env, "claim", "--now", "1020", "--ttl", "1000", string(id)); code != 0 {
				t.Fatalf("claim again: %s", out)
			}
			rel := "stage/" + string(id) + ".1"
			if err := os.Mkdir(filepath.Join(root, rel), 0o755); err != nil {
				t.Fatal(err)
			}
			stale := 0
			hook := func(op seam.Op, name string) error {
				if op != seam.OpReadDir || name != rel {
					return nil
				}
				stale++
				if tc.remove {
					os.Remove(filepath.Join(root, rel))
				}
				return &fs.PathError{Op: "open", Path: name, Err: unix.ESTALE}
			}
			sum, found := run(t, root, false, hook)
			if stale == 0 {
				t.Fatalf("the check never listed %s", rel)
			}
			if got := sum.Found[fsck.KindIO]; got != tc.wantIOs {
				t.Errorf("io findings %d, want %d (exit %d)\n%s", got, tc.wantIOs, sum.Exit(), describe(found))
			}
		})
	}
}
