package safety

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/testenv"
)

// campaignWorker is one worker of the chaos campaign, as a user writes it:
// take the first free item, do it under lease run, stage the result in
// LEASE_STAGE and publish it, fenced by the token; stop when every item
// is done. Every grant is logged ("grant ID TOKEN").
const campaignWorker = `
set -u
N=$1 TODO=$2 LOG=$3
while :; do
  if held=$(lease claim --first 1 --ttl 2 - < "$TODO" 2>> "$LOG.err"); then
    echo "grant $held" >> "$LOG"
    set -- $held
    lease run --token "$2" --interval 0.4 --grace 0.3 "$1" -- bash -c '
      printf "%s %s\n" "$LEASE_ID" "$LEASE_TOKEN" > "$LEASE_STAGE/$LEASE_ID.out" &&
      sleep 0.$((2 + RANDOM % 8)) &&
      echo "$LEASE_ID $LEASE_TOKEN" | lease complete --publish "$LEASE_ID.out" > /dev/null' 2>> "$LOG.err"
  else
    [ "$(lease status --json 2>/dev/null | grep -c '"status":"done"')" -ge "$N" ] && exit 0
    sleep 0.2
  fi
done
`

// TestCampaignUnderChaos runs a campaign of 100 items with 6 workers on a
// loop-mounted ext4 while a chaos loop kills lease processes with SIGKILL,
// stops lease run past its TTL with SIGSTOP, fills the filesystem (ENOSPC)
// and makes the table read-only (a read-only bind mount over it, as a
// remount looks to every new process). Afterwards one fsck --repair must
// leave a clean table in which every item is done exactly once, with
// exactly one result per item in public/ (written by the holder of the
// final token), and no token was granted twice.
func TestCampaignUnderChaos(t *testing.T) {
	if os.Geteuid() != 0 {
		needed(t, "root (loop mounts)")
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "dd", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			needed(t, tool+" ("+testenv.Install(tool)+")")
		}
	}
	bin := leaseBinary(t)
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "img"), filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Truncate(img, 64<<20)
	// -m 0: no blocks reserved for root, so that a full filesystem is full
	// for lease too.
	if out, err := exec.Command("mkfs.ext4", "-q", "-m", "0", "-N", "8192", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		needed(t, "mount -o loop: "+strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		exec.Command("umount", filepath.Join(mnt, "table")).Run()
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			exec.Command("umount", "-l", mnt).Run()
			t.Errorf("umount: %v %s", err, out)
		}
	})
	root := filepath.Join(mnt, "table")
	binDir := filepath.Dir(bin)
	env := append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"), "LEASE_ROOT="+root,
		"LEASE_CLOCK_SKEW=0.2", "LEASE_LOCK_TIMEOUT=2", "XDG_CONFIG_HOME="+dir)
	lease := func(args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := lease("init", "--shards", "8"); code != 0 {
		t.Fatalf("init: %s", out)
	}
	const items, workers = 100, 6
	var todo strings.Builder
	ids := map[string]bool{}
	for i := 0; i < items; i++ {
		id := string(TestID(1000 + i))
		ids[id] = true
		fmt.Fprintln(&todo, id)
	}
	todoFile := filepath.Join(dir, "todo")
	os.WriteFile(todoFile, []byte(todo.String()), 0o644)

	var procs []*exec.Cmd
	for w := 0; w < workers; w++ {
		cmd := exec.Command("bash", "-c", campaignWorker, "worker", strconv.Itoa(items), todoFile, filepath.Join(dir, fmt.Sprintf("w%d.log", w)))
		cmd.Env, cmd.Dir = env, dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	done := make(chan struct{})
	go func() {
		for _, p := range procs {
			p.Wait()
		}
		close(done)
	}()
	t.Cleanup(func() {
		for _, p := range procs {
			p.Process.Kill()
		}
		for _, pid := range leasePids(root) {
			syscall.Kill(pid, syscall.SIGCONT)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	// Chaos for 20 s (or until the campaign is done), each kind in turn,
	// then let the campaign finish.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))
	counts := map[string]int{}
	round := 0
	chaosEnd := time.Now().Add(20 * time.Second)
	for time.Now().Before(chaosEnd) {
		select {
		case <-done:
			chaosEnd = time.Now()
			continue
		default:
		}
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		pids := leasePids(root)
		round++
		switch p := round % 8; {
		case p < 4 && len(pids) > 0: // kill -9 any lease process
			pid := pids[rng.IntN(len(pids))]
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				counts["kill -9"]++
			}
		case p < 6 && len(pids) > 0: // stop one past its TTL (2 s)
			pid := pids[rng.IntN(len(pids))]
			if syscall.Kill(pid, syscall.SIGSTOP) == nil {
				counts["SIGSTOP past the TTL"]++
				go func() {
					time.Sleep(2500 * time.Millisecond)
					syscall.Kill(pid, syscall.SIGCONT)
				}()
			}
		case p == 6: // the filesystem full for a while
			fill := filepath.Join(mnt, "fill")
			exec.Command("dd", "if=/dev/zero", "of="+fill, "bs=64k", "status=none").Run() // until ENOSPC
			exec.Command("dd", "if=/dev/zero", "of="+fill, "bs=1k", "oflag=append", "conv=notrunc", "status=none").Run()
			var fs syscall.Statfs_t
			if syscall.Statfs(mnt, &fs) == nil && fs.Bavail == 0 {
				counts["ENOSPC"]++
				time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
			}
			os.Remove(fill)
		default: // read-only for a while
			if exec.Command("mount", "--bind", root, root).Run() == nil {
				if exec.Command("mount", "-o", "remount,ro,bind", root).Run() == nil {
					counts["read-only"]++
				}
				time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
				exec.Command("umount", "-l", root).Run() // lazily: a stopped process may hold it
			}
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		// Generous: on a machine at load 40 the workers' 2 s leases
		// expire again and again before the campaign gets through.
		out, _ := lease("status")
		fsck, _ := lease("fsck")
		var errs strings.Builder
		logs, _ := filepath.Glob(filepath.Join(dir, "w*.log.err"))
		for _, lf := range logs {
			data, _ := os.ReadFile(lf)
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			fmt.Fprintf(&errs, "%s (last lines):\n  %s\n", filepath.Base(lf), strings.Join(lines[max(0, len(lines)-4):], "\n  "))
		}
		var undone []string
		for _, l := range strings.Split(out, "\n") {
			if !strings.Contains(l, " done ") {
				undone = append(undone, l)
			}
		}
		t.Fatalf("the campaign did not finish within 5 minutes after the chaos (%v)\nnot done:\n%s\nfsck:\n%s\n%s",
			counts, strings.Join(undone, "\n"), fsck, errs.String())
	}
	os.Remove(filepath.Join(mnt, "fill"))

	// One repair, then clean.
	if out, code := lease("fsck", "--repair"); code&^1 != 0 {
		t.Fatalf("fsck --repair: exit %d\n%s", code, out)
	}
	if out, code := lease("fsck"); code != 0 {
		t.Fatalf("fsck after one repair: exit %d\n%s", code, out)
	}
	// Every item done once, with its one result, by the final holder.
	out, code := lease("status", "--json")
	if code != 0 {
		t.Fatalf("status: %s", out)
	}
	final := map[string]int64{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			ID, Status string
			Token      int64
		}
		if json.Unmarshal([]byte(l), &r) != nil || !ids[r.ID] {
			continue
		}
		if r.Status != "done" {
			t.Errorf("%s is %s after the campaign", r.ID[:12], r.Status)
		}
		final[r.ID] = r.Token
	}
	if len(final) != items {
		t.Errorf("%d of %d items have a record", len(final), items)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "public"))
	if len(ents) != items {
		t.Errorf("public/ holds %d results, want exactly %d (one per item)", len(ents), items)
	}
	for _, e := range ents {
		data, _ := os.ReadFile(filepath.Join(root, "public", e.Name()))
		id, ok := strings.CutSuffix(e.Name(), ".out")
		var gotID string
		var tok int64
		fmt.Sscan(string(data), &gotID, &tok)
		if !ok || !ids[id] || gotID != id || tok != final[id] {
			t.Errorf("public/%s holds %q: not the result of %s's final token %d", e.Name(), data, id, final[id])
		}
	}
	// No token granted twice.
	grants, granted := 0, map[string]int{}
	logs, _ := filepath.Glob(filepath.Join(dir, "w*.log"))
	for _, lf := range logs {
		f, err := os.Open(lf)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if g, ok := strings.CutPrefix(sc.Text(), "grant "); ok {
				grants++
				granted[g]++
			}
		}
		f.Close()
	}
	for g, n := range granted {
		if n > 1 {
			t.Errorf("ID TOKEN %s granted %d times", g, n)
		}
	}
	t.Logf("campaign: %d items, %d workers, %d grants; chaos: %v", items, workers, grants, counts)
	if counts["kill -9"] == 0 || counts["SIGSTOP past the TTL"] == 0 || counts["ENOSPC"] == 0 || counts["read-only"] == 0 {
		t.Errorf("the chaos did not happen: %v", counts)
	}
}

// leasePids lists the lease processes of the campaign on root (and no
// other test's).
func leasePids(root string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if strings.TrimSpace(string(comm)) != "lease" {
			continue
		}
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if strings.Contains(string(environ), "\x00LEASE_ROOT="+root+"\x00") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// needed skips t for a missing prerequisite, or fails it when
// LEASE_TEST_REQUIRE=all (CI).
func needed(t *testing.T, what string) {
	t.Helper()
	testenv.Missing(t, what, "needs "+what)
}
