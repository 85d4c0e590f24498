package fsck_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasetool/lease/leasefmt"
)

// The lease binary, built once for the package's process tests.
var (
	binDir  string
	binOnce sync.Once
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func leaseBin(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "lease-fsck-test-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "lease")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/leasetool/lease").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// runBin runs the binary with stdin and returns stdout, stderr and the
// exit status.
func runBin(t testing.TB, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(leaseBin(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("lease %v: %v", args, err)
		}
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

func ids(prefix string, n int) []leasefmt.ID {
	out := make([]leasefmt.ID, n)
	for i := range out {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", prefix, i)))
		out[i] = leasefmt.ID(hex.EncodeToString(sum[:]))
	}
	return out
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// ack is the newest acknowledged state of a lease: its token and the
// expires_at the acknowledging command wrote.
type ack struct {
	token   int64
	expires float64
}

type acks struct {
	mu sync.Mutex
	m  map[leasefmt.ID]ack
}

// add records the `ID TOKEN` lines a command printed on stdout, each
// acknowledged with expires.
func (a *acks) add(t testing.TB, stdout string, expires float64) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	// A process killed while printing may leave half a line after the last
	// newline: only complete lines are acknowledgements.
	if i := strings.LastIndexByte(stdout, '\n'); i >= 0 {
		stdout = stdout[:i+1]
	} else {
		stdout = ""
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		id, err := leasefmt.ParseID(f[0])
		tok, err2 := strconv.ParseInt(f[1], 10, 64)
		if err != nil || err2 != nil || len(f) != 2 {
			t.Errorf("bad acknowledgement line %q", line)
			continue
		}
		if prev, ok := a.m[id]; ok && prev.token != tok {
			t.Errorf("%s: acknowledged token %d, earlier %d", id, tok, prev.token)
		}
		if prev := a.m[id]; expires > prev.expires {
			a.m[id] = ack{tok, expires}
		}
		n++
	}
	return n
}

// verify checks every acknowledged lease on disk: valid, at home, same
// token, expires_at at least the acknowledged one.
func (a *acks) verify(t testing.TB, root string, shards int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, want := range a.m {
		rel := path.Join("work", leasefmt.ShardDirName(id.Shard(shards), shards), id.FileName())
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Errorf("acknowledged lease %s lost: %v", id, err)
			continue
		}
		r, err := leasefmt.Decode(data, leasefmt.Work, id)
		switch {
		case err != nil:
			t.Errorf("acknowledged lease %s corrupt: %v", id, err)
		case r.Token != want.token:
			t.Errorf("lease %s: token %d, acknowledged %d", id, r.Token, want.token)
		case r.ExpiresAt < want.expires:
			t.Errorf("lease %s: expires_at %s, an acknowledged renewal wrote %s (undone)", id, ftoa(r.ExpiresAt), ftoa(want.expires))
		case r.Status != leasefmt.Leased:
			t.Errorf("lease %s: status %s", id, r.Status)
		}
	}
}

func heldInput(held []leasefmt.ID, tokens map[leasefmt.ID]int64) string {
	var b strings.Builder
	for _, id := range held {
		fmt.Fprintf(&b, "%s %d\n", id, tokens[id])
	}
	return b.String()
}

func idInput(list []leasefmt.ID) string {
	var b strings.Builder
	for _, id := range list {
		fmt.Fprintln(&b, id)
	}
	return b.String()
}

func tempFiles(t testing.TB, root string) []string {
	var out []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp.") && !strings.Contains(p, "lost+found") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

const ttl = 1e6

// claimed is a table with n leases claimed through the binary.
type claimed struct {
	root   string
	now0   float64
	held   []leasefmt.ID
	tokens map[leasefmt.ID]int64
	acks   *acks
}

// memDir is a temporary directory in memory (/dev/shm) when there is one:
// a process killed with SIGKILL leaves the same files on any filesystem
// (its writes are in the page cache), and without disk fsyncs the kills
// reach every phase of a run many times within the time a test may take.
func memDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "lease-fsck-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// claimTable creates a table of the given shard count in dir and claims n
// fresh leases in it at the current time with a long TTL.
func claimTable(t *testing.T, dir string, shards, n int, prefix string) *claimed {
	t.Helper()
	c := &claimed{root: filepath.Join(dir, "table"), now0: float64(time.Now().Unix()), held: ids(prefix, n),
		tokens: map[leasefmt.ID]int64{}, acks: &acks{m: map[leasefmt.ID]ack{}}}
	if _, errs, code := runBin(t, "", "init", "--root", c.root, "--shards", strconv.Itoa(shards), "--target-shards", "16"); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	out, errs, code := runBin(t, idInput(c.held), "claim", "--root", c.root, "--now", ftoa(c.now0), "--ttl", ftoa(ttl), "-")
	if code != 0 {
		t.Fatalf("claim: exit %d: %s", code, errs)
	}
	if got := c.acks.add(t, out, c.now0+ttl); got != n {
		t.Fatalf("claimed %d of %d", got, n)
	}
	for _, id := range c.held {
		c.tokens[id] = c.acks.m[id].token
	}
	return c
}

// TestRepairWhileLive runs fsck --repair over and over, with fresh damage
// each time, while real renew-batch and claim processes work on the same
// table: no valid lease may be lost and no renewal or claim a worker
// acknowledged on stdout may be undone.
func TestRepairWhileLive(t *testing.T) {
	const shards = 16
	c := claimTable(t, t.TempDir(), shards, 300, "live")
	root, now0, tokens, a := c.root, c.now0, c.tokens, c.acks
	// Two renewers renew held; idle leases are only claimed, so a repair
	// that put an older copy over one of them would stay visible.
	held, idle := c.held[:250], c.held[250:]

	var stop atomic.Bool
	var wg sync.WaitGroup
	var renewals, claims atomic.Int64
	errc := make(chan string, 100)
	for w := 0; w < 2; w++ {
		part := held[w*len(held)/2 : (w+1)*len(held)/2]
		input := heldInput(part, tokens)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; !stop.Load(); i++ {
				now := now0 + float64(i)
				out, errs, code := runBin(t, input, "renew-batch", "--root", root, "--now", ftoa(now), "--ttl", ftoa(ttl))
				renewals.Add(int64(a.add(t, out, now+ttl)))
				if code != 0 {
					errc <- fmt.Sprintf("renew-batch exit %d: %s", code, errs)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; !stop.Load(); i++ {
			now := now0 + float64(i)
			fresh := ids(fmt.Sprintf("fresh/%d", i), 10)
			out, errs, code := runBin(t, idInput(fresh), "claim", "--root", root, "--now", ftoa(now), "--ttl", ftoa(ttl), "-")
			claims.Add(int64(a.add(t, out, now+ttl)))
			if code != 0 {
				errc <- fmt.Sprintf("claim exit %d: %s", code, errs)
				return
			}
		}
	}()

	home := func(id leasefmt.ID) string {
		return filepath.Join(root, "work", leasefmt.ShardDirName(id.Shard(shards), shards))
	}
	repaired := 0
	for iter := 0; iter < 20; iter++ {
		// Fresh damage: a corrupt record, a stray temp file beside a lease
		// the renewers are writing, a stale copy of a live lease in a wrong
		// shard, and a misplaced record of an unused ID.
		junk := ids(fmt.Sprintf("junk/%d", iter), 2)
		os.WriteFile(filepath.Join(home(junk[0]), junk[0].FileName()), []byte(`{"schema":"lease.work/v1","id":`), 0o644)
		victim := held[(iter*37)%len(held)]
		os.WriteFile(filepath.Join(home(victim), "."+victim.FileName()+fmt.Sprintf(".tmp.inject%06d", iter)), []byte("partial"), 0o644)
		if data, err := os.ReadFile(filepath.Join(home(victim), victim.FileName())); err == nil {
			wrong := leasefmt.ShardDirName((victim.Shard(shards)+1)%shards, shards)
			os.WriteFile(filepath.Join(root, "work", wrong, victim.FileName()), data, 0o644)
		}
		old := idle[iter%len(idle)]
		stale := &leasefmt.Record{Kind: leasefmt.Work, ID: old, Status: leasefmt.Leased, Owner: "stale", Token: tokens[old],
			ClaimedAt: now0 - 10, RenewedAt: now0 - 10, ExpiresAt: now0 + 1}
		staleData, _ := leasefmt.Encode(stale)
		wrongOld := leasefmt.ShardDirName((old.Shard(shards)+2)%shards, shards)
		os.WriteFile(filepath.Join(root, "work", wrongOld, old.FileName()), staleData, 0o644)
		stray := junk[1]
		r := &leasefmt.Record{Kind: leasefmt.Work, ID: stray, Status: leasefmt.Released, Owner: "x", Token: 3,
			ClaimedAt: now0, RenewedAt: now0, ExpiresAt: now0}
		data, _ := leasefmt.Encode(r)
		wrong := leasefmt.ShardDirName((stray.Shard(shards)+3)%shards, shards)
		os.WriteFile(filepath.Join(root, "work", wrong, stray.FileName()), data, 0o644)

		out, errs, code := runBin(t, "", "fsck", "--repair", "--root", root)
		if code != 1 {
			t.Fatalf("fsck --repair during live work: exit %d, want 1\n%s%s", code, out, errs)
		}
		repaired++
		select {
		case e := <-errc:
			t.Fatal(e)
		default:
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errc)
	for e := range errc {
		t.Error(e)
	}
	if out, errs, code := runBin(t, "", "fsck", "--root", root); code != 0 {
		t.Fatalf("final fsck: exit %d\n%s%s", code, out, errs)
	}
	if renewals.Load() == 0 || claims.Load() == 0 {
		t.Fatalf("workers did nothing while fsck ran: %d renewals, %d claims", renewals.Load(), claims.Load())
	}
	t.Logf("%d repair runs during %d acknowledged renewals and %d claims", repaired, renewals.Load(), claims.Load())
	a.verify(t, root, shards)
	for _, id := range c.held {
		if _, ok := a.m[id]; !ok {
			t.Errorf("held lease %s has no acknowledgement", id)
		}
	}
	if tf := tempFiles(t, root); len(tf) > 0 {
		t.Errorf("temp files left: %v", tf)
	}
}

// TestKilledRenewBatch kills renew-batch with SIGKILL at random points,
// many times, over 2000 leases; after each kill fsck --repair must leave a
// clean table in which every acknowledged renewal is present, no record is
// corrupt and no temp file is left.
func TestKilledRenewBatch(t *testing.T) {
	const shards = 64
	c := claimTable(t, memDir(t), shards, 2000, "killed")
	root, now0, held, a := c.root, c.now0, c.held, c.acks
	input := heldInput(held, c.tokens)

	start := time.Now()
	out, errs, code := runBin(t, input, "renew-batch", "--root", root, "--now", ftoa(now0+1), "--ttl", ftoa(ttl))
	full := time.Since(start)
	if code != 0 || a.add(t, out, now0+1+ttl) != len(held) {
		t.Fatalf("renew-batch: exit %d: %s", code, errs)
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d; a full renew-batch of %d leases takes %v", seed, len(held), full)
	var finished, withTemps int
	for i := 2; i < 32; i++ {
		now := now0 + float64(i)
		cmd := exec.Command(leaseBin(t), "renew-batch", "--root", root, "--now", ftoa(now), "--ttl", ftoa(ttl))
		cmd.Stdin = strings.NewReader(input)
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Float64() * 1.2 * float64(full)))
		cmd.Process.Kill()
		cmd.Wait()
		// Whatever reached stdout is acknowledged, even from a process
		// killed after it printed.
		n := a.add(t, stdout.String(), now+ttl)
		if cmd.ProcessState.Exited() && cmd.ProcessState.ExitCode() == 0 {
			finished++
			if n != len(held) {
				t.Fatalf("a finished renew-batch acknowledged %d of %d", n, len(held))
			}
		}
		temps := len(tempFiles(t, root))
		if temps > 0 {
			withTemps++
		}
		out, errs, code := runBin(t, "", "fsck", "--repair", "--root", root)
		// The temp files of a killed writer are debris, not damage: swept,
		// exit 0.
		if code != 0 || temps > 0 && !strings.Contains(out, "swept temp ") {
			t.Fatalf("kill %d: fsck --repair exit %d with %d temp files, want 0 and them swept\n%s%s", i, code, temps, out, errs)
		}
		if out, errs, code := runBin(t, "", "fsck", "--root", root); code != 0 {
			t.Fatalf("kill %d: fsck after repair: exit %d\n%s%s", i, code, out, errs)
		}
		if tf := tempFiles(t, root); len(tf) > 0 {
			t.Fatalf("kill %d: temp files left after repair: %v", i, tf)
		}
		a.verify(t, root, shards)
		if t.Failed() {
			t.Fatalf("kill %d broke the table", i)
		}
	}
	t.Logf("30 kills: %d runs finished before the kill, %d left temp files", finished, withTemps)
}
