package commands

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/mpi"
)

var qualifyCommand = &cli.Command{
	Name:      "qualify",
	Usage:     "prove the table's filesystem (and, under mpirun, the cluster) fit for leases",
	ArgsUsage: " ",
	Description: "Runs, in a scratch directory ROOT/.qualify.<nonce> removed afterwards, the checks a lease\n" +
		"table depends on: O_EXCL create, atomic rename-over, file fsync, directory fsync, fcntl lock\n" +
		"exclusion against a real second process, lock release when that holder is killed, and the\n" +
		"clock skew between this host and the filesystem's timestamps (mtime of a fresh file).\n" +
		"Under mpirun (built with -tags mpi) it also gathers the membership (rank, host), runs\n" +
		"--rounds rounds in which one rank holds the qualification lock while every other rank must\n" +
		"fail to take it (contention) and must read the holder's identity record (identity), then the\n" +
		"holder releases and the next rank must acquire it (release), and measures the clock skew\n" +
		"between ranks. It prints one JSON proof, identical on every rank:\n" +
		"{members, clean, verified, rounds, contention, release, identity, max_clock_skew_s, checks, error}.\n" +
		"Exit 0 only when verified; 1 when a check failed.",
	Flags: flags(commonFlags(), []cli.Flag{
		&cli.IntFlag{Name: "rounds", Value: 4, Usage: "lock rounds across ranks under mpirun"},
		&cli.Float64Flag{Name: "max-skew", Value: 2, Usage: "largest clock skew in seconds that still qualifies"},
		&cli.Float64Flag{Name: "mpi-timeout", Usage: "under mpirun, longest wait in seconds for one collective (env LEASE_MPI_TIMEOUT, default 60)"},
		&cli.StringFlag{Name: "hold-lock", Hidden: true, Usage: "internal: hold the lock of byte 0 of FILE until killed"},
	}),
	Action: runQualify,
}

// check is one line of the proof.
type check struct {
	Name   string `json:"name"`
	Rank   int    `json:"rank"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
}

type member struct {
	Rank int    `json:"rank"`
	Host string `json:"host"`
}

// proof is what qualify prints.
type proof struct {
	Members        []member `json:"members"`
	Clean          bool     `json:"clean"`
	Verified       bool     `json:"verified"`
	Rounds         int      `json:"rounds"`
	Contention     int      `json:"contention"`
	Release        int      `json:"release"`
	Identity       int      `json:"identity"`
	MaxClockSkewS  float64  `json:"max_clock_skew_s"`
	Checks         []check  `json:"checks"`
	Error          string   `json:"error"`
	expectedRounds int
}

func runQualify(c *cli.Context) error {
	if p := c.String("hold-lock"); p != "" {
		return holdLock(c, p)
	}
	if err := refuseUnderLauncher(); err != nil {
		return err
	}
	rounds := c.Int("rounds")
	if rounds < 1 || rounds > 10000 {
		return usageErr("--rounds %d: want 1 to 10000", rounds)
	}
	maxSkew := c.Float64("max-skew")
	if err := leasefmt.CheckTime("--max-skew", maxSkew); err != nil {
		return usageErr("%v", err)
	}
	e, setErr := newEnv(c)
	timeout := time.Duration(defaultMPITimeout) * time.Second
	if setErr == nil {
		timeout = time.Duration(e.set.MPITimeout * float64(time.Second))
	}
	w, err := mpi.Init(timeout)
	if err != nil {
		return cli.Exit(leasefmt.Bound(fmt.Sprintf("mpi: %v", err)), 4)
	}
	defer w.Finalize()
	var coll time.Duration
	if we, err := agree(w, setErr, &coll); err != nil || we.Code != 0 {
		if w.Rank() != 0 {
			return cli.Exit("", max(we.Code, 1))
		}
		return agreedErr(we, err)
	}
	p := qualifyAll(e, w, rounds, maxSkew)
	doc, _ := json.Marshal(p)
	// Rank 0's proof is the proof: broadcast it so every rank prints the
	// same bytes.
	if out, err := w.Bcast(0, doc); err == nil {
		doc = out
	}
	fmt.Fprintln(e.out, string(doc))
	var agreed proof
	if json.Unmarshal(doc, &agreed) != nil || !agreed.Verified {
		return cli.Exit("", 1)
	}
	return nil
}

// qualifyAll runs the local checks on every rank and, with several ranks,
// the cluster rounds; errors on any rank become failed checks in one proof.
func qualifyAll(e *env, w *mpi.World, rounds int, maxSkew float64) proof {
	p := proof{Rounds: 0, Checks: []check{}}
	host := w.Host()
	mine, _ := json.Marshal(member{w.Rank(), host})
	all, err := w.AllGather(mine)
	if err != nil {
		p.Error = leasefmt.Bound(err.Error())
		return p
	}
	for _, b := range all {
		var m member
		json.Unmarshal(b, &m)
		p.Members = append(p.Members, m)
	}
	// Rank 0 names the scratch directory.
	var nonce [6]byte
	rand.Read(nonce[:])
	name, err := w.Bcast(0, []byte(".qualify."+hex.EncodeToString(nonce[:])))
	if err != nil {
		p.Error = leasefmt.Bound(err.Error())
		return p
	}
	root := e.root()
	dir := filepath.Join(root, string(name))
	var local []check
	usable := true
	if err := commit.MkdirRoot(root); err != nil {
		local = append(local, check{Name: "root", Pass: false, Detail: err.Error()})
		// A root that was made but whose parent directory could not be
		// fsynced is still checked, so that the proof names every check
		// that fails rather than only the first.
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			usable = false
		}
	}
	if w.Rank() == 0 && usable {
		if err := os.Mkdir(dir, 0o777); err != nil {
			local = append(local, check{Name: "scratch-directory", Pass: false, Detail: err.Error()})
			usable = false
		}
	}
	w.Barrier()
	if usable {
		local = append(local, localChecks(dir, w.Rank(), maxSkew)...)
	}
	if w.Size() > 1 {
		p.Rounds = rounds
		p.expectedRounds = rounds
	}
	cluster := clusterRounds(&p, w, dir, rounds)
	local = append(local, cluster...)
	for i := range local {
		local[i].Rank = w.Rank()
		local[i].Detail = leasefmt.Bound(local[i].Detail)
	}
	b, _ := json.Marshal(local)
	parts, err := w.AllGather(b)
	if err != nil {
		p.Error = leasefmt.Bound(err.Error())
		return p
	}
	for r, part := range parts {
		var cs []check
		if json.Unmarshal(part, &cs) != nil {
			p.Checks = append(p.Checks, check{Name: "message", Rank: r, Detail: "malformed check list"})
			continue
		}
		p.Checks = append(p.Checks, cs...)
	}
	// Clock skew between ranks: every rank reads its clock right after a
	// barrier; the spread includes the barrier's own exit jitter.
	if w.Size() > 1 {
		w.Barrier()
		now, _ := json.Marshal(float64(time.Now().UnixNano()) / 1e9)
		clocks, err := w.AllGather(now)
		if err == nil {
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, b := range clocks {
				var t float64
				json.Unmarshal(b, &t)
				lo, hi = math.Min(lo, t), math.Max(hi, t)
			}
			p.MaxClockSkewS = math.Max(p.MaxClockSkewS, hi-lo)
			p.Checks = append(p.Checks, check{Name: "rank-clock-skew", Pass: hi-lo <= maxSkew,
				Detail: fmt.Sprintf("%.6fs between ranks (limit %gs)", hi-lo, maxSkew)})
		}
	}
	for _, ch := range p.Checks {
		if ch.Name == "filesystem-clock-skew" {
			var s float64
			fmt.Sscanf(ch.Detail, "%gs", &s)
			p.MaxClockSkewS = math.Max(p.MaxClockSkewS, math.Abs(s))
		}
	}
	if w.Rank() == 0 {
		os.RemoveAll(dir)
	}
	w.Barrier()
	p.Clean = p.Error == ""
	var failed []string
	for _, ch := range p.Checks {
		if !ch.Pass {
			p.Clean = false
			failed = append(failed, fmt.Sprintf("%s on rank %d: %s", ch.Name, ch.Rank, ch.Detail))
		}
	}
	if len(failed) > 0 && p.Error == "" {
		p.Error = leasefmt.Bound("not qualified: " + strings.Join(failed, "; "))
	}
	want := p.expectedRounds * (w.Size() - 1)
	p.Verified = p.Clean && p.Contention == want && p.Identity == want && p.Release == p.expectedRounds
	return p
}

// localChecks are the checks one rank makes on its own.
func localChecks(dir string, rank int, maxSkew float64) []check {
	sub := filepath.Join(dir, fmt.Sprintf("rank-%d", rank))
	if err := os.Mkdir(sub, 0o777); err != nil {
		return []check{{Name: "scratch-directory", Detail: err.Error()}}
	}
	var out []check
	add := func(name string, err error, detail string) {
		if err != nil {
			out = append(out, check{Name: name, Pass: false, Detail: err.Error()})
			return
		}
		out = append(out, check{Name: name, Pass: true, Detail: detail})
	}
	// O_EXCL create: a second exclusive create of the same name must fail.
	excl := filepath.Join(sub, "excl")
	err := func() error {
		f, err := os.OpenFile(excl, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err != nil {
			return err
		}
		f.Close()
		g, err := os.OpenFile(excl, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil {
			g.Close()
			return errors.New("a second O_EXCL create of the same name succeeded")
		}
		if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("second O_EXCL create failed with %v, want EEXIST", err)
		}
		return nil
	}()
	add("o-excl-create", err, "second exclusive create refused with EEXIST")
	// File fsync.
	t0 := time.Now()
	err = writeSync(filepath.Join(sub, "fsync"), []byte("fsync\n"))
	add("file-fsync", err, fmt.Sprintf("write+fsync took %v", time.Since(t0).Round(time.Microsecond)))
	// Atomic rename-over: the name switches from old to new content.
	target := filepath.Join(sub, "record")
	err = func() error {
		if err := writeSync(target, []byte("old\n")); err != nil {
			return err
		}
		tmp := filepath.Join(sub, ".record.tmp")
		if err := writeSync(tmp, []byte("new\n")); err != nil {
			return err
		}
		if err := os.Rename(tmp, target); err != nil {
			return err
		}
		got, err := os.ReadFile(target)
		if err != nil {
			return err
		}
		if string(got) != "new\n" {
			return fmt.Errorf("after rename-over the name reads %q, want %q", got, "new\n")
		}
		if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
			return errors.New("the temp name still exists after rename")
		}
		return nil
	}()
	add("atomic-rename", err, "rename over an existing name switched its content")
	// Directory fsync.
	t0 = time.Now()
	err = func() error {
		d, err := os.Open(sub)
		if err != nil {
			return err
		}
		defer d.Close()
		return d.Sync()
	}()
	add("directory-fsync", err, fmt.Sprintf("fsync of the directory took %v", time.Since(t0).Round(time.Microsecond)))
	// Locks against a real second process, and release on its death.
	out = append(out, lockChecks(filepath.Join(sub, "lockfile"))...)
	// Clock skew against the filesystem's timestamps.
	skewFile := filepath.Join(sub, "clock")
	before := time.Now()
	err = writeSync(skewFile, []byte("clock\n"))
	after := time.Now()
	if err != nil {
		add("filesystem-clock-skew", err, "")
	} else if fi, err := os.Stat(skewFile); err != nil {
		add("filesystem-clock-skew", err, "")
	} else {
		mid := before.Add(after.Sub(before) / 2)
		skew := fi.ModTime().Sub(mid).Seconds()
		ch := check{Name: "filesystem-clock-skew", Pass: math.Abs(skew) <= maxSkew,
			Detail: fmt.Sprintf("%.6fs (mtime of a fresh file minus this host's clock; limit %gs)", skew, maxSkew)}
		out = append(out, ch)
	}
	return out
}

func writeSync(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// lockChecks starts a second lease process that takes the lock on byte 0
// of file, checks that this process cannot take it, kills the holder with
// SIGKILL and checks that the lock is then granted.
func lockChecks(file string) []check {
	exe, err := os.Executable()
	if err != nil {
		return []check{{Name: "lock-exclusion", Detail: err.Error()}}
	}
	dir, base := filepath.Split(file)
	fsys, err := commit.OS(dir)
	if err != nil {
		return []check{{Name: "lock-exclusion", Detail: err.Error()}}
	}
	defer fsys.Close()
	cmd := exec.Command(exe, "qualify", "--hold-lock", file)
	cmd.Env = withoutLauncher(os.Environ())
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdin, _ = os.Open(os.DevNull)
	if err := cmd.Start(); err != nil {
		return []check{{Name: "lock-exclusion", Detail: "cannot start the second process: " + err.Error()}}
	}
	defer cmd.Process.Kill()
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- strings.TrimSpace(line)
	}()
	select {
	case line := <-ready:
		if line != "locked" {
			cmd.Process.Kill()
			cmd.Wait()
			return []check{{Name: "lock-exclusion", Detail: "second process could not take the lock: " + strings.TrimSpace(stderr.String())}}
		}
	case <-time.After(10 * time.Second):
		return []check{{Name: "lock-exclusion", Detail: "second process did not report the lock within 10s"}}
	}
	var out []check
	unlock, err := fsys.Lock(base, 0, 100*time.Millisecond)
	if err == nil {
		unlock()
		out = append(out, check{Name: "lock-exclusion", Detail: fmt.Sprintf("pid %d holds the lock, yet this process took it: locks do not exclude", cmd.Process.Pid)})
	} else if errors.Is(err, commit.ErrLockTimeout) {
		out = append(out, check{Name: "lock-exclusion", Pass: true, Detail: fmt.Sprintf("lock held by pid %d refused for 100ms", cmd.Process.Pid)})
	} else {
		out = append(out, check{Name: "lock-exclusion", Detail: err.Error()})
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	t0 := time.Now()
	unlock, err = fsys.Lock(base, 0, 5*time.Second)
	if err != nil {
		out = append(out, check{Name: "lock-release-on-death", Detail: fmt.Sprintf("lock not granted within 5s after its holder was killed: %v", err)})
	} else {
		unlock()
		out = append(out, check{Name: "lock-release-on-death", Pass: true, Detail: fmt.Sprintf("granted %v after SIGKILL of the holder", time.Since(t0).Round(time.Microsecond))})
	}
	return out
}

// withoutLauncher drops the launcher's variables so the helper process
// runs as a plain single process.
func withoutLauncher(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "OMPI_") || strings.HasPrefix(kv, "PMIX_") || strings.HasPrefix(kv, "PMI_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// holdLock is the second process of the lock checks.
func holdLock(c *cli.Context, file string) error {
	dir, base := filepath.Split(file)
	fsys, err := commit.OS(dir)
	if err != nil {
		return cli.Exit(err.Error(), 4)
	}
	if _, err := fsys.Lock(base, 0, 5*time.Second); err != nil {
		return cli.Exit(err.Error(), 5)
	}
	fmt.Fprintln(c.App.Writer, "locked")
	io.Copy(io.Discard, c.App.Reader) // until killed (stdin is /dev/null: then sleep)
	for {
		time.Sleep(time.Hour)
	}
}

// clusterRounds runs the rounds of contention, identity and release across
// ranks. Round i's holder is rank i % size. Every step is collective, and
// a failure is recorded as a failed check, never an early return.
func clusterRounds(p *proof, w *mpi.World, dir string, rounds int) []check {
	if w.Size() < 2 {
		return nil
	}
	var out []check
	lockName := "qualify.lock"
	fsys, ferr := commit.OS(dir)
	if ferr == nil {
		defer fsys.Close()
	}
	fail := func(name, detail string) { out = append(out, check{Name: name, Detail: detail}) }
	var held func()
	for r := 0; r < rounds; r++ {
		holder := r % w.Size()
		me := w.Rank() == holder
		// The holder takes the lock (this is the release check for r > 0:
		// the previous holder released it a step ago) and writes its
		// identity record durably.
		ok := 0
		if me && ferr == nil {
			unlock, err := fsys.Lock(lockName, 0, 5*time.Second)
			if err != nil {
				fail("release", fmt.Sprintf("round %d: holder could not take the lock: %v", r, err))
			} else {
				held = unlock
				id := fmt.Sprintf(`{"rank":%d,"host":%q,"round":%d}`+"\n", w.Rank(), w.Host(), r)
				if err := writeSync(filepath.Join(dir, "identity.tmp"), []byte(id)); err != nil {
					fail("identity", err.Error())
				} else if err := os.Rename(filepath.Join(dir, "identity.tmp"), filepath.Join(dir, "identity")); err != nil {
					fail("identity", err.Error())
				} else if d, err := os.Open(dir); err == nil {
					d.Sync()
					d.Close()
					ok = 1
				}
			}
		}
		if ferr != nil {
			fail("scratch-directory", ferr.Error())
		}
		got, _ := w.AllMaxInt(ok)
		if got == 1 {
			p.Release++
		}
		// Everyone else must fail to take it and must read the holder's
		// identity.
		cont, ident := 0, 0
		if !me && ferr == nil {
			unlock, err := fsys.Lock(lockName, 0, 50*time.Millisecond)
			if err == nil {
				unlock()
				fail("contention", fmt.Sprintf("round %d: rank %d took the lock held by rank %d", r, w.Rank(), holder))
			} else if errors.Is(err, commit.ErrLockTimeout) {
				cont = 1
			} else {
				fail("contention", err.Error())
			}
			data, err := os.ReadFile(filepath.Join(dir, "identity"))
			want := fmt.Sprintf(`"rank":%d,`, holder)
			wantRound := fmt.Sprintf(`"round":%d}`, r)
			if err != nil {
				fail("identity", fmt.Sprintf("round %d: %v", r, err))
			} else if !bytes.Contains(data, []byte(want)) || !bytes.Contains(data, []byte(wantRound)) {
				fail("identity", fmt.Sprintf("round %d: read %q, want rank %d round %d", r, bytes.TrimSpace(data), holder, r))
			} else {
				ident = 1
			}
		}
		cs, _ := w.AllGather([]byte{byte(cont), byte(ident)})
		for _, b := range cs {
			if len(b) == 2 {
				p.Contention += int(b[0])
				p.Identity += int(b[1])
			}
		}
		// The holder releases before the next round.
		if held != nil {
			held()
			held = nil
		}
		w.Barrier()
	}
	sum := check{Name: "cluster-rounds", Pass: p.Contention == rounds*(w.Size()-1) && p.Identity == rounds*(w.Size()-1) && p.Release == rounds,
		Detail: fmt.Sprintf("%d rounds over %d ranks: contention %d, identity %d, release %d", rounds, w.Size(), p.Contention, p.Identity, p.Release)}
	if w.Rank() == 0 {
		out = append(out, sum)
	}
	return out
}
