// Package qualify proves a filesystem, and the nodes of an mpirun job,
// fit for lease tables (docs/design.md#mpi): the checks `lease qualify` runs.
//
// On every rank, in a scratch directory of the table root: O_EXCL create,
// atomic rename-over, file and directory fsync, fcntl lock exclusion
// against a real second process and release when that holder is killed,
// and the clock skew between the host and the filesystem's timestamps.
// With several ranks also: the membership, rounds in which one rank holds
// the qualification lock while every other rank must fail to take it
// (contention) and read the holder's identity record (identity), then the
// holder releases and the next one takes it (release), and the clock skew
// between ranks. The result is one Proof, identical on every rank.
package qualify

import (
	"bufio"
	"bytes"
	"context"
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

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/mpi"
)

// HoldLock is the body of the second process of the lock checks: it takes
// the exclusive lock of byte 0 of file, prints "locked" on out and holds
// the lock until it is killed or ctx is done. It returns only on failure,
// or with ctx's error.
func HoldLock(ctx context.Context, file string, out io.Writer) error {
	dir, base := filepath.Split(file)
	fsys, err := seam.OS(dir)
	if err != nil {
		return err
	}
	if _, err := fsys.Lock(ctx, base, 0, 5*time.Second); err != nil {
		return err
	}
	fmt.Fprintln(out, "locked")
	for {
		// A timer, not a bare receive: a context that is never done has
		// no channel, and the runtime would end a process blocked on it
		// for good (all goroutines asleep), dropping the lock.
		t := time.NewTimer(time.Hour)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// Check is one check of the proof, made by one rank.
type Check struct {
	Name   string `json:"name"`
	Rank   int    `json:"rank"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
	// SkewS is the clock skew a skew check measured, in seconds (not in
	// the proof's JSON: its largest value is Proof.MaxClockSkewS).
	SkewS float64 `json:"-"`
}

// Member is one rank of the job.
type Member struct {
	Rank int    `json:"rank"`
	Host string `json:"host"`
}

// Proof is what qualify proves: identical on every rank (docs/design.md#mpi).
type Proof struct {
	Members    []Member `json:"members"`
	Clean      bool     `json:"clean"`
	Verified   bool     `json:"verified"`
	Rounds     int      `json:"rounds"`
	Contention int      `json:"contention"`
	Release    int      `json:"release"`
	Identity   int      `json:"identity"`
	// MaxClockSkewS is the largest skew measured, between this host and
	// the filesystem or between ranks, in seconds.
	MaxClockSkewS  float64 `json:"max_clock_skew_s"`
	Checks         []Check `json:"checks"`
	Error          string  `json:"error"`
	expectedRounds int
}

// Options select what Run checks.
type Options struct {
	// Rounds is the number of lock rounds across ranks (several ranks).
	Rounds int
	// MaxSkew is the largest clock skew in seconds that still qualifies.
	MaxSkew float64
	// Holder returns the command of a second process that takes the
	// exclusive lock of byte 0 of file, prints "locked" and a newline on
	// its stdout, and holds the lock until it is killed ([HoldLock] is
	// such a process's body). lease runs itself: lease qualify --hold-lock.
	Holder func(file string) *exec.Cmd
	// Sync is the table's sync setting: the sync check reports the
	// strategy the filesystem gets under it.
	Sync durable.Strategy
}

// Run runs the local checks in a scratch directory root/.qualify.<nonce>
// (removed afterwards) on every rank of w and, with several ranks, the
// lock rounds across them, and returns the proof on every rank. It is
// collective: every rank must call it. Errors on any rank become failed
// checks of the one proof, never an early return. ctx bounds the checks'
// lock waits.
func Run(ctx context.Context, w *mpi.World, root string, opt Options) Proof {
	rounds, maxSkew := opt.Rounds, opt.MaxSkew
	p := Proof{Rounds: 0, Checks: []Check{}}
	host := w.Host()
	mine, _ := json.Marshal(Member{w.Rank(), host})
	all, err := w.AllGather(mine)
	if err != nil {
		p.Error = leasefmt.Bound(err.Error())
		return p
	}
	for _, b := range all {
		var m Member
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
	dir := filepath.Join(root, string(name))
	var local []Check
	usable := true
	if err := durable.MkdirRoot(root); err != nil {
		local = append(local, Check{Name: "root", Pass: false, Detail: err.Error()})
		// A root that was made but whose parent directory could not be
		// fsynced is still checked, so that the proof names every check
		// that fails rather than only the first.
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			usable = false
		}
	}
	if w.Rank() == 0 && usable {
		if err := os.Mkdir(dir, 0o777); err != nil {
			local = append(local, Check{Name: "scratch-directory", Pass: false, Detail: err.Error()})
			usable = false
		}
	}
	w.Barrier()
	if usable {
		local = append(local, localChecks(ctx, dir, w.Rank(), maxSkew, opt.Holder)...)
		local = append(local, syncCheck(dir, opt.Sync))
	}
	if w.Size() > 1 {
		p.Rounds = rounds
		p.expectedRounds = rounds
	}
	local = append(local, clusterRounds(ctx, &p, w, dir, rounds)...)
	type rankChecks struct {
		Checks []Check `json:"checks"`
		SkewS  float64 `json:"skew_s"` // the largest filesystem skew this rank measured
	}
	mineChecks := rankChecks{Checks: local}
	for i := range local {
		local[i].Rank = w.Rank()
		local[i].Detail = leasefmt.Bound(local[i].Detail)
		if local[i].Name == "filesystem-clock-skew" {
			mineChecks.SkewS = math.Max(mineChecks.SkewS, math.Abs(local[i].SkewS))
		}
	}
	b, _ := json.Marshal(mineChecks)
	parts, err := w.AllGather(b)
	if err != nil {
		p.Error = leasefmt.Bound(err.Error())
		return p
	}
	for r, part := range parts {
		var rc rankChecks
		if json.Unmarshal(part, &rc) != nil {
			p.Checks = append(p.Checks, Check{Name: "message", Rank: r, Detail: "malformed check list"})
			continue
		}
		p.Checks = append(p.Checks, rc.Checks...)
		p.MaxClockSkewS = math.Max(p.MaxClockSkewS, rc.SkewS)
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
			p.Checks = append(p.Checks, Check{Name: "rank-clock-skew", Pass: hi-lo <= maxSkew, SkewS: hi - lo,
				Detail: fmt.Sprintf("%.6fs between ranks (limit %gs)", hi-lo, maxSkew)})
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
func localChecks(ctx context.Context, dir string, rank int, maxSkew float64, holder func(string) *exec.Cmd) []Check {
	sub := filepath.Join(dir, fmt.Sprintf("rank-%d", rank))
	if err := os.Mkdir(sub, 0o777); err != nil {
		return []Check{{Name: "scratch-directory", Detail: err.Error()}}
	}
	// What the mount tells: the filesystem, and client caches known to
	// serve stale records across clients (GlusterFS).
	out := append(mountChecks(sub), inodeCheck(sub))
	add := func(name string, err error, detail string) {
		if err != nil {
			out = append(out, Check{Name: name, Pass: false, Detail: err.Error()})
			return
		}
		out = append(out, Check{Name: name, Pass: true, Detail: detail})
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
	out = append(out, lockChecks(ctx, filepath.Join(sub, "lockfile"), holder)...)
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
		ch := Check{Name: "filesystem-clock-skew", Pass: math.Abs(skew) <= maxSkew, SkewS: skew,
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

// lockChecks starts a second process that takes the lock on byte 0 of
// file, checks that this process cannot take it, kills the holder with
// SIGKILL and checks that the lock is then granted.
func lockChecks(ctx context.Context, file string, holder func(string) *exec.Cmd) []Check {
	if holder == nil {
		return []Check{{Name: "lock-exclusion", Detail: "no second process to hold the lock (Options.Holder)"}}
	}
	dir, base := filepath.Split(file)
	fsys, err := seam.OS(dir)
	if err != nil {
		return []Check{{Name: "lock-exclusion", Detail: err.Error()}}
	}
	defer fsys.Close()
	cmd := holder(file)
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdin, _ = os.Open(os.DevNull)
	if err := cmd.Start(); err != nil {
		return []Check{{Name: "lock-exclusion", Detail: "cannot start the second process: " + err.Error()}}
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
			return []Check{{Name: "lock-exclusion", Detail: "second process could not take the lock: " + strings.TrimSpace(stderr.String())}}
		}
	case <-time.After(10 * time.Second):
		return []Check{{Name: "lock-exclusion", Detail: "second process did not report the lock within 10s"}}
	}
	var out []Check
	unlock, err := fsys.Lock(ctx, base, 0, 100*time.Millisecond)
	if err == nil {
		unlock()
		out = append(out, Check{Name: "lock-exclusion", Detail: fmt.Sprintf("pid %d holds the lock, yet this process took it: locks do not exclude", cmd.Process.Pid)})
	} else if errors.Is(err, commit.ErrLockTimeout) {
		out = append(out, Check{Name: "lock-exclusion", Pass: true, Detail: fmt.Sprintf("lock held by pid %d refused for 100ms", cmd.Process.Pid)})
	} else {
		out = append(out, Check{Name: "lock-exclusion", Detail: err.Error()})
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	t0 := time.Now()
	unlock, err = fsys.Lock(ctx, base, 0, 5*time.Second)
	if err != nil {
		out = append(out, Check{Name: "lock-release-on-death", Detail: fmt.Sprintf("lock not granted within 5s after its holder was killed: %v", err)})
	} else {
		unlock()
		out = append(out, Check{Name: "lock-release-on-death", Pass: true, Detail: fmt.Sprintf("granted %v after SIGKILL of the holder", time.Since(t0).Round(time.Microsecond))})
	}
	return out
}

// clusterRounds runs the rounds of contention, identity and release across
// ranks. Round i's holder is rank i % size. Every step is collective, and
// a failure is recorded as a failed check, never an early return.
func clusterRounds(ctx context.Context, p *Proof, w *mpi.World, dir string, rounds int) []Check {
	if w.Size() < 2 {
		return nil
	}
	var out []Check
	lockName := "qualify.lock"
	fsys, ferr := seam.OS(dir)
	if ferr == nil {
		defer fsys.Close()
	}
	// The identity record is read through the table root, as lease reads
	// a record below it: on CephFS a read that waits is ended by a touch of
	// the root (see the kicker of package seam), which cannot happen while the
	// waiting lookup holds the kernel's lock of the directory touched.
	rfs, rerr := seam.OS(filepath.Dir(dir))
	if rerr == nil {
		defer rfs.Close()
	}
	identity := filepath.Join(filepath.Base(dir), "identity")
	fail := func(name, detail string) { out = append(out, Check{Name: name, Detail: detail}) }
	var held func()
	var slowest time.Duration // this rank's slowest identity read
	slowestRound := -1
	for r := 0; r < rounds; r++ {
		holder := r % w.Size()
		me := w.Rank() == holder
		// The holder takes the lock (this is the release check for r > 0:
		// the previous holder released it a step ago) and writes its
		// identity record durably.
		ok := 0
		if me && ferr == nil {
			unlock, err := fsys.Lock(ctx, lockName, 0, 5*time.Second)
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
			unlock, err := fsys.Lock(ctx, lockName, 0, 50*time.Millisecond)
			if err == nil {
				unlock()
				fail("contention", fmt.Sprintf("round %d: rank %d took the lock held by rank %d", r, w.Rank(), holder))
			} else if errors.Is(err, commit.ErrLockTimeout) {
				cont = 1
			} else {
				fail("contention", err.Error())
			}
			// Through the table's own reader: on CephFS it asks the MDS
			// to write its journal when the read waits on it, as every
			// lease command does.
			t0 := time.Now()
			data, err := []byte(nil), rerr
			if rerr == nil {
				data, err = rfs.ReadFile(identity, 1<<12)
			}
			if d := time.Since(t0); d > slowest {
				slowest, slowestRound = d, r
			}
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
	if read := readTimes(w, slowest, slowestRound); w.Rank() == 0 {
		out = append(out, read)
	}
	sum := Check{Name: "cluster-rounds", Pass: p.Contention == rounds*(w.Size()-1) && p.Identity == rounds*(w.Size()-1) && p.Release == rounds,
		Detail: fmt.Sprintf("%d rounds over %d ranks: contention %d, identity %d, release %d", rounds, w.Size(), p.Contention, p.Identity, p.Release)}
	if w.Rank() == 0 {
		out = append(out, sum)
	}
	return out
}

// readTimes gathers every rank's slowest read of the identity record that
// another rank had just written and renamed into place, and returns the
// cross-client-read check (rank 0's is the one kept): a record changed
// through one client and read through another is the common case of a
// campaign, and on a filesystem whose metadata server holds such a read
// (CephFS holds it until its journal is written: up to 5 s when nothing
// asks for it) every command that reads what another node wrote pays it.
// It reports; it does not fail (a slow filesystem is not an unsafe one).
func readTimes(w *mpi.World, mine time.Duration, round int) Check {
	b, _ := json.Marshal([2]float64{mine.Seconds(), float64(round)})
	all, err := w.AllGather(b)
	ch := Check{Name: "cross-client-read", Pass: true}
	if err != nil {
		ch.Detail = "cannot gather the read times: " + err.Error()
		return ch
	}
	worst, rank, rd := -1.0, -1, -1
	for r, part := range all {
		var v [2]float64
		if json.Unmarshal(part, &v) == nil && v[1] >= 0 && v[0] > worst {
			worst, rank, rd = v[0], r, int(v[1])
		}
	}
	if rank < 0 {
		ch.Detail = "no rank read the record of another"
		return ch
	}
	ch.Detail = fmt.Sprintf("slowest read of the record another rank had just replaced: %s (rank %d, round %d)",
		time.Duration(worst*float64(time.Second)).Round(10*time.Microsecond), rank, rd)
	return ch
}

// syncCheck reports how a batch on the filesystem of dir makes its records
// durable under the setting want (durable.Disk.Choose): it informs, it
// never fails.
func syncCheck(dir string, want durable.Strategy) Check {
	c := Check{Name: "sync", Pass: true}
	f, err := seam.OS(dir)
	if err != nil {
		c.Detail = "record: " + err.Error()
		return c
	}
	defer f.Close()
	ch := durable.New(f, dir, new(durable.Counts)).Choose(want)
	c.Detail = ch.Strategy.String()
	if ch.FSType != "" {
		c.Detail += " on " + ch.FSType
	}
	c.Detail += ": " + ch.Why
	return c
}
