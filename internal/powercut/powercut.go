//go:build linux

// Package powercut cuts the power of a real Linux kernel's filesystem under
// a lease workload and checks that every operation lease acknowledged is
// there afterwards (issue 35).
//
// A User-Mode Linux kernel (internal/uml) mounts an image as its disk and
// runs lease commands on a table on it, reporting each acknowledged
// operation on its console after the command returned success. At a random
// moment (seeded) every process of the kernel is killed at once: the disk
// (a file of this machine) keeps exactly what the kernel had written to it,
// as a disk keeps what reached it when the power went. The image is then
// mounted here (the journal is replayed) and checked: every acknowledged
// record, token, status and published file; no token went back; no record
// corrupt; lease fsck, fsck --repair, a clean fsck after it, and a campaign
// that goes on.
package powercut

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/leasetool/lease/internal/uml"
	"github.com/leasetool/lease/leasefmt"
)

// FS is a filesystem the cuts are made on.
type FS struct {
	Name      string // ext4, ext4-writeback, xfs, btrfs
	Type      string // the kernel's name of it
	Mkfs      []string
	MountOpts string // in the guest
}

// Filesystems are the filesystems a cut can be made on, by name.
var Filesystems = map[string]FS{
	"ext4":           {Name: "ext4", Type: "ext4", Mkfs: []string{"mkfs.ext4", "-q", "-F"}},
	"ext4-writeback": {Name: "ext4-writeback", Type: "ext4", Mkfs: []string{"mkfs.ext4", "-q", "-F"}, MountOpts: "data=writeback"},
	"xfs":            {Name: "xfs", Type: "xfs", Mkfs: []string{"mkfs.xfs", "-q", "-f"}},
	"btrfs":          {Name: "btrfs", Type: "btrfs", Mkfs: []string{"mkfs.btrfs", "-q", "-f"}},
}

// Names lists Filesystems in a fixed order.
var Names = []string{"ext4", "ext4-writeback", "xfs", "btrfs"}

// Result is one cut's outcome.
type Result struct {
	FS   string
	Seed int64
	// CutAfter is how long after the workload started the kernel was cut.
	CutAfter time.Duration
	// Acked counts the acknowledged operations (a lease of a renew-batch
	// counts as one operation each).
	Acked int
	// Lost says each acknowledged operation not found after the cut.
	Lost []string
	// Violations are other breaches: a corrupt record, a token that went
	// back, a repair that left errors, a campaign that cannot go on.
	Violations []string
	// Fsck, Repair and After are the exit statuses of lease fsck, lease
	// fsck --repair and lease fsck again; FsckSummary is fsck's summary.
	Fsck, Repair, After int
	FsckSummary         string
	// RenewOld and RenewNew count, after a cut during a renew-batch (one
	// begun and not acknowledged), the records of its leases that show
	// the old expiry and the new one.
	RenewCut           bool
	RenewOld, RenewNew int
	// LogReplay, when set, says the image did not mount because btrfs
	// could not replay the log tree it had written before the cut (a
	// directory named twice in the log: docs/safety.md#powercut), and that
	// it mounts without that log (rescue=nologreplay). No filesystem may
	// be left unmountable by any sequence of calls, so this is the
	// kernel's defect, not a loss of lease's; nothing was checked after
	// such a cut, and its image is kept.
	LogReplay string
	// Image is the image kept after a loss, a violation or a failed log
	// replay ("" otherwise).
	Image string
	// Boot is how long the kernel took to take commands, Ready how long
	// the workload then took to the moment the wait for the cut began,
	// Check how long the checks after the cut took; CPU is the processor
	// time the kernel used until the cut (uml.Kernel.CPUTime).
	Boot, Ready, Check, CPU time.Duration
}

// Failed says whether the cut lost or broke anything.
func (r Result) Failed() bool { return len(r.Lost) > 0 || len(r.Violations) > 0 }

// Options of a cut.
type Options struct {
	Lease string // the lease binary (uml.BuildLease): the checks here run it
	// Guest is the workload's program (GuestPackage built by
	// uml.BuildGuest, with the build tags of Lease), run in the guest.
	Guest string
	// Sync is the table's sync strategy in the guest (LEASE_SYNC: record,
	// auto, syncfs; "" for lease's default).
	Sync string
	Dir  string // where the image is made (removed after a clean cut)
	// MaxCut bounds the random moment of the cut after the workload
	// started (default 20s).
	MaxCut time.Duration
	// AfterBatch starts the random wait for the cut once the pool's claim
	// (Batch leases) is acknowledged instead of at lease init;
	// AfterRenew once the first renew-batch is.
	AfterBatch, AfterRenew bool
	// Template, when set, is the image the cut starts from instead of a
	// new filesystem: a table made and its pool claimed here (MakeTemplate),
	// so that the guest's time goes to the workload, not to its setup.
	Template *Template
	// Log receives progress lines (may be nil).
	Log func(format string, args ...any)
}

// Cut makes one power cut on fsys with the given seed.
func Cut(ctx context.Context, fsys FS, seed int64, o Options) (res Result, err error) {
	res = Result{FS: fsys.Name, Seed: seed}
	rng := rand.New(rand.NewSource(seed))
	if o.MaxCut == 0 {
		o.MaxCut = 20 * time.Second
	}
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	w, err := os.MkdirTemp(o.Dir, fmt.Sprintf("cut-%s-%d-", fsys.Name, seed))
	if err != nil {
		return res, err
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(w)
		}
	}()
	img := filepath.Join(w, "disk.img")
	var prior []byte // acknowledgements made here, before the guest ran
	pool := ""
	if o.Template != nil {
		if out, err := exec.Command("cp", "--sparse=always", o.Template.Image, img).CombinedOutput(); err != nil {
			return res, fmt.Errorf("copying the template: %v: %s", err, out)
		}
		prior, pool = o.Template.acks, o.Template.pool
	} else if err := mkfs(fsys, img); err != nil {
		return res, err
	}
	t0 := time.Now()
	k, err := uml.Boot(ctx, uml.Config{Name: "cut-" + fsys.Name, Disks: []string{img}, Modules: []string{fsys.Type}, Args: []string{"quiet"}})
	if err != nil {
		return res, err
	}
	defer k.Close()
	res.Boot = time.Since(t0)
	t0 = time.Now()
	// The workload runs in the guest's foreground (Run, not Start): the
	// guest's init does not poll its spool meanwhile, which costs a sleep
	// process every 50 ms. Run returns when the cut ends the kernel.
	ran := make(chan error, 1)
	go func() {
		_, _, err := k.Run(ctx, workload(o.Guest, fsys.Type, fsys.MountOpts, o.Sync, pool, seed))
		ran <- err
	}()
	defer func() {
		k.Kill()
		<-ran
	}()
	// The cut: at a random moment after the workload's first
	// acknowledgement (so that the boot's speed does not decide whether
	// anything ran).
	res.CutAfter = time.Duration(rng.Int63n(int64(o.MaxCut)))
	deadline := time.Now().Add(3 * time.Minute)
	for {
		b, _ := k.Console()
		if bytes.Contains(b, []byte("PCFAIL")) {
			return res, fmt.Errorf("the workload failed before the cut: %s", tailLines(b, 5))
		}
		switch {
		case o.AfterRenew:
			if bytes.Contains(b, []byte("ACK renew ")) {
				goto wait
			}
		case o.Template != nil:
			// The pool is claimed: the guest's first operation is a
			// renew-batch.
			if bytes.Contains(b, []byte("RENEW-START ")) {
				goto wait
			}
		case o.AfterBatch:
			if bytes.Count(b, []byte("ACK hold ")) >= Batch {
				goto wait
			}
		default:
			if bytes.Contains(b, []byte("ACK init")) {
				goto wait
			}
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("the workload did not start within 3 minutes; console: %s", tailLines(b, 10))
		}
		time.Sleep(20 * time.Millisecond)
	}
wait:
	res.Ready = time.Since(t0)
	select {
	case <-time.After(res.CutAfter):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	res.CPU = k.CPUTime()
	if err := k.Kill(); err != nil {
		return res, err
	}
	console, err := k.Console()
	if err != nil {
		return res, err
	}
	if i := bytes.Index(console, []byte("PCFAIL")); i >= 0 {
		return res, fmt.Errorf("the workload failed before the cut: %s", firstLine(console[i:]))
	}
	if os.Getenv("POWERCUT_DEBUG") != "" {
		logf("console:\n%s", console)
	}
	t0 = time.Now()
	acks := append(prior, console...)
	ex := parseAcks(acks)
	res.Acked = ex.count
	// An image kept for a loss or a violation keeps its acknowledgements
	// beside it (console.txt: the template's, then the guest's console), so
	// that what the cut lost can be told from the image alone afterwards,
	// in this kernel or another.
	keepImage := func() {
		keep, res.Image = true, img
		os.WriteFile(filepath.Join(w, "console.txt"), acks, 0o644)
	}
	mnt := filepath.Join(w, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return res, err
	}
	if replay, err := MountCut(fsys, img, mnt); err != nil {
		keepImage()
		if replay != "" {
			res.LogReplay = replay
			logf("powercut %s seed %d: %s; not checked", fsys.Name, seed, res.LogReplay)
			return res, nil
		}
		res.Violations = append(res.Violations, err.Error())
		return res, nil
	}
	defer func() {
		if out, uerr := exec.Command("umount", mnt).CombinedOutput(); uerr != nil {
			exec.Command("umount", "-l", mnt).Run()
			if err == nil {
				err = fmt.Errorf("umount %s: %v: %s", mnt, uerr, out)
			}
		}
		if res.Failed() {
			keepImage()
		}
	}()
	check(&res, ex, filepath.Join(mnt, "t"), o.Lease)
	res.Check = time.Since(t0)
	during := ""
	if res.RenewCut {
		during = fmt.Sprintf(" (during a renew-batch: %d records old, %d new)", res.RenewOld, res.RenewNew)
	}
	logf("powercut %s seed %d: boot %.1fs, workload %.1fs, cut %.1fs after %s (kernel CPU %.1fs), check %.1fs: %d acknowledged%s, %d lost, %d violations, fsck %d/%d/%d",
		fsys.Name, seed, res.Boot.Seconds(), res.Ready.Seconds(), res.CutAfter.Seconds(), started(o),
		res.CPU.Seconds(), res.Check.Seconds(), res.Acked, during, len(res.Lost), len(res.Violations), res.Fsck, res.Repair, res.After)
	return res, nil
}

// started says what the random wait for the cut began after.
func started(o Options) string {
	switch {
	case o.AfterRenew:
		return "the first renew-batch"
	case o.Template != nil:
		return "the start (a template's table)"
	case o.AfterBatch:
		return "the pool's claim"
	}
	return "lease init"
}

func mkfs(fsys FS, img string) error {
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		return err
	}
	if err := os.Truncate(img, 512<<20); err != nil {
		return err
	}
	if out, err := exec.Command(fsys.Mkfs[0], append(fsys.Mkfs[1:], img)...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", fsys.Mkfs[0], err, out)
	}
	return nil
}

// Template is an image with a table on it whose pool (Batch leases, as
// the guest's setup claims them) was claimed here, by lease on this
// machine's kernel, and made durable by the unmount: cuts copy it instead
// of spending their guest's time on lease init and the pool's claim.
type Template struct {
	Image string
	acks  []byte // ACK lines of the operations made here
	pool  string // the pool's ID TOKEN lines
}

// MakeTemplate makes a Template of fsys in dir with lease.
func MakeTemplate(fsys FS, dir, lease string) (*Template, error) {
	t := &Template{Image: filepath.Join(dir, "template-"+fsys.Name+".img")}
	if err := mkfs(fsys, t.Image); err != nil {
		return nil, err
	}
	mnt, err := os.MkdirTemp(dir, "template-mnt-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(mnt)
	if out, err := exec.Command("mount", "-o", "loop", "-t", fsys.Type, t.Image, mnt).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mount the template: %v: %s", err, out)
	}
	err = func() error {
		root := filepath.Join(mnt, "t")
		if out, rc := runLease(lease, "init", "--root", root, "--shards", strconv.Itoa(Shards)); rc != 0 {
			return fmt.Errorf("lease init: exit %d: %s", rc, out)
		}
		var acks bytes.Buffer
		acks.WriteString("ACK init\n")
		var ids strings.Builder
		for i := 0; i < Batch; i++ {
			s := sha256.Sum256([]byte(fmt.Sprintf("b-template-%d", i)))
			fmt.Fprintf(&ids, "%x\n", s)
		}
		out, rc := runLeaseIn(lease, ids.String(), "add", "--root", root, "-")
		if rc != 0 {
			return fmt.Errorf("lease add: exit %d: %s", rc, out)
		}
		for _, id := range strings.Fields(string(out)) {
			fmt.Fprintf(&acks, "ACK add %s\n", id)
		}
		cmd := exec.Command(lease, "claim", "--root", root, "--owner", "pc", "--ttl", strconv.Itoa(ClaimTTL), "--next", strconv.Itoa(Batch))
		cmd.Dir = "/"
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("lease claim --next: %v", err)
		}
		t.pool = string(out)
		for _, l := range strings.Split(strings.TrimSpace(t.pool), "\n") {
			fmt.Fprintf(&acks, "ACK hold %s\n", l)
		}
		if n := strings.Count(t.pool, "\n"); n != Batch {
			return fmt.Errorf("lease claim --next %d claimed %d", Batch, n)
		}
		t.acks = acks.Bytes()
		return nil
	}()
	if out, uerr := exec.Command("umount", mnt).CombinedOutput(); uerr != nil {
		exec.Command("umount", "-l", mnt).Run()
		if err == nil {
			err = fmt.Errorf("umount %s: %v: %s", mnt, uerr, out)
		}
	}
	if err != nil {
		os.Remove(t.Image)
		return nil, err
	}
	return t, nil
}

func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func tailLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// expected is what the acknowledgements promise.
type expected struct {
	count    int
	inited   bool
	added    map[string]bool
	claimed  map[string]int64 // highest acknowledged token
	done     map[string]int64
	publish  map[string]pub
	work     map[string]int64
	groups   map[string]int64   // GID -> highest acknowledged token
	released map[string]int64   // GID -> token of its last acknowledged release
	renewed  map[string]float64 // ID -> T0 of its last acknowledged renewal
	pool     map[string]bool    // the leases held (ACK hold), not completed
	// renewCut is the T0 of a renew-batch begun and not acknowledged (0:
	// none), renewPool the leases it was renewing.
	renewCut  float64
	renewPool []string
	renews    int // renew-batches acknowledged
}

type pub struct {
	token int64
	sum   string
	size  int64
}

func parseAcks(console []byte) *expected {
	ex := &expected{added: map[string]bool{}, claimed: map[string]int64{}, done: map[string]int64{},
		publish: map[string]pub{}, work: map[string]int64{}, groups: map[string]int64{}, released: map[string]int64{},
		renewed: map[string]float64{}, pool: map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(console))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "RENEW-START" {
			ex.renewCut, _ = strconv.ParseFloat(f[1], 64)
			ex.renewPool = ex.renewPool[:0]
			for id := range ex.pool {
				ex.renewPool = append(ex.renewPool, id)
			}
			continue
		}
		if len(f) < 2 || f[0] != "ACK" {
			continue
		}
		tok := func(i int) int64 {
			if len(f) <= i {
				return -1
			}
			n, _ := strconv.ParseInt(f[i], 10, 64)
			return n
		}
		switch f[1] {
		case "init":
			ex.inited = true
			ex.count++
		case "add":
			if len(f) == 3 {
				ex.added[f[2]] = true
				ex.count++
			}
		case "claim", "hold":
			if len(f) == 4 {
				if t := tok(3); t > ex.claimed[f[2]] {
					ex.claimed[f[2]] = t
				}
				if f[1] == "hold" {
					ex.pool[f[2]] = true
				}
				ex.count++
			}
		case "renew":
			t0, _ := strconv.ParseFloat(f[2], 64)
			for _, id := range ex.renewPool {
				ex.renewed[id] = t0
				ex.count++
			}
			ex.renews++
			ex.renewCut, ex.renewPool = 0, nil
		case "done":
			if len(f) == 4 {
				ex.done[f[2]] = tok(3)
				delete(ex.pool, f[2])
				ex.count++
			}
		case "publish":
			if len(f) == 6 {
				ex.publish[f[2]] = pub{token: tok(3), sum: f[4], size: tok(5)}
				ex.count++
			}
		case "work":
			if len(f) == 4 {
				ex.work[f[2]] = tok(3)
				ex.count++
			}
		case "group":
			if len(f) == 4 {
				if t := tok(3); t > ex.groups[f[2]] {
					ex.groups[f[2]] = t
				}
				ex.count++
			}
		case "group-release":
			if len(f) == 4 {
				ex.released[f[2]] = tok(3)
				ex.count++
			}
		case "fsck":
			ex.count++
		}
	}
	return ex
}

// records reads every record of kind k in the table (leasefmt.Decode, the
// rules of every reader), by ID; a file that does not decode is a violation.
func records(root string, k leasefmt.Kind, bad func(string, ...any)) map[string]*leasefmt.Record {
	recs := map[string]*leasefmt.Record{}
	filepath.WalkDir(filepath.Join(root, k.Dir()), func(p string, d fs.DirEntry, err error) error {
		// Records are ID.json; .lock, temp files (.ID.json.tmp.*) and the
		// status markers (ID.done.N, hard links to a record) are not.
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") || !strings.HasSuffix(d.Name(), ".json") {
			return nil
		}
		b, err := os.ReadFile(p)
		var r *leasefmt.Record
		if err == nil {
			var id leasefmt.ID
			if id, err = leasefmt.ParseID(strings.TrimSuffix(d.Name(), ".json")); err == nil {
				r, err = leasefmt.Decode(b, k, id)
			}
		}
		if err != nil {
			bad("corrupt record %s: %v: %q", p, err, truncate(b, 200))
			return nil
		}
		recs[string(r.ID)] = r
		return nil
	})
	return recs
}

// CheckTable checks the table at root (quiescent: no lease process at work
// on it) against acks, the acknowledgement lines of workloads that ran on
// it (workload.go's protocol), as Cut checks a table after a cut: every
// acknowledged operation there, nothing corrupt, no token gone back, lease
// fsck, fsck --repair and a clean fsck, and a campaign that goes on (an
// acknowledged lease taken over with a larger token, new work claimed and
// completed). seed names the new work. The result's Fsck, Repair, After,
// Acked, Lost and Violations are set.
func CheckTable(acks []byte, root, lease string, seed int64) Result {
	res := Result{Seed: seed}
	ex := parseAcks(acks)
	res.Acked = ex.count
	check(&res, ex, root, lease)
	return res
}

func check(res *Result, ex *expected, root, lease string) {
	lost := func(format string, args ...any) { res.Lost = append(res.Lost, fmt.Sprintf(format, args...)) }
	bad := func(format string, args ...any) {
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
	}
	if _, err := os.Stat(filepath.Join(root, "TABLE")); err != nil {
		if ex.inited {
			lost("the table (acknowledged by lease init): %v", err)
		}
		return
	}
	recs := records(root, leasefmt.Work, bad)
	targets := records(root, leasefmt.Target, bad)
	groups := records(root, leasefmt.Group, bad)
	queued := map[string]bool{}
	filepath.WalkDir(filepath.Join(root, "queue"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			queued[d.Name()] = true
		}
		return nil
	})
	for id := range ex.added {
		if _, ok := recs[id]; !ok && !queued[id] {
			lost("add %s: neither queued nor a record", id)
		}
	}
	for id, t := range ex.claimed {
		r, ok := recs[id]
		switch {
		case !ok:
			lost("claim %s token %d: no record", id, t)
		case r.Token < t:
			lost("claim %s token %d: the record has token %d (went back)", id, t, r.Token)
		}
	}
	done := func(what, id string, t int64) {
		if r, ok := recs[id]; !ok {
			lost("%s %s token %d: no record", what, id, t)
		} else if r.Status != leasefmt.Done || r.Token != t {
			lost("%s %s token %d: record %s token %d", what, id, t, r.Status, r.Token)
		}
	}
	for id, t := range ex.done {
		done("complete", id, t)
	}
	for id, p := range ex.publish {
		done("publish", id, p.token)
		b, err := os.ReadFile(filepath.Join(root, "public", id, "res"))
		sum := sha256.Sum256(b)
		if err != nil || int64(len(b)) != p.size || hex.EncodeToString(sum[:]) != p.sum {
			lost("publish %s: public/%s/res is %d bytes (want %d), err %v", id, id, len(b), p.size, err)
		}
	}
	for id, t := range ex.work {
		done("work", id, t)
		if b, err := os.ReadFile(filepath.Join(root, "public", id, "out")); err != nil || strings.TrimSpace(string(b)) != id {
			lost("work %s: public/%s/out: %q %v", id, id, truncate(b, 80), err)
		}
	}
	for gid, t := range ex.groups {
		m, ok := groups[gid]
		switch {
		case !ok:
			lost("group-claim %s token %d: no manifest", gid, t)
			continue
		case m.Token < t:
			lost("group-claim %s token %d: the manifest has token %d (went back)", gid, t, m.Token)
			continue
		case m.Token == t && ex.released[gid] == t && m.Status != leasefmt.Released:
			lost("group-release %s token %d: the manifest is %s", gid, t, m.Status)
		}
		for _, id := range m.Targets {
			if r, ok := targets[string(id)]; !ok || r.Token < t {
				lost("group-claim %s token %d: target %s: %v", gid, t, id, r)
			}
		}
	}
	for id, t0 := range ex.renewed {
		if _, done := ex.done[id]; done {
			continue
		}
		if r, ok := recs[id]; ok && r.Status == leasefmt.Leased && r.ExpiresAt < t0+RenewTTL {
			lost("renew %s at %.6f: expires_at %.6f < %.6f", id, t0, r.ExpiresAt, t0+RenewTTL)
		}
	}
	if ex.renewCut != 0 {
		res.RenewCut = true
		for _, id := range ex.renewPool {
			if r, ok := recs[id]; ok && r.Status == leasefmt.Leased {
				if r.ExpiresAt >= ex.renewCut+RenewTTL {
					res.RenewNew++
				} else {
					res.RenewOld++
				}
			}
		}
	}
	// lease fsck, --repair, fsck again: clean.
	var out []byte
	out, res.Fsck = runLease(lease, "fsck", "--root", root)
	res.FsckSummary = summary(out)
	if res.Fsck > 4 {
		bad("lease fsck exit %d: %s", res.Fsck, tailLines(out, 5))
	}
	out, res.Repair = runLease(lease, "fsck", "--root", root, "--repair")
	if res.Repair > 1 {
		bad("lease fsck --repair exit %d: %s", res.Repair, tailLines(out, 5))
	}
	out, res.After = runLease(lease, "fsck", "--root", root)
	if res.After != 0 {
		bad("lease fsck after the repair exit %d: %s", res.After, tailLines(out, 5))
	}
	// The campaign goes on: an acknowledged lease, expired in a later
	// clock, is taken over with a larger token and completed; new work is
	// added, claimed with --next and completed.
	now := strconv.FormatInt(time.Now().Unix()+10*RenewTTL, 10)
	for id, t := range ex.claimed {
		if _, d := ex.done[id]; d {
			continue
		}
		if _, d := ex.publish[id]; d {
			continue
		}
		if r, ok := recs[id]; ok && (r.Status == leasefmt.Done || r.Status == leasefmt.Failed) {
			// Finished by an operation of the workload whose
			// acknowledgement the cut (or the workload's kill) took: it
			// may take effect unacknowledged, and there is nothing to
			// take over (CI: an NFSv4.2 item done with its claim's token
			// 1 and no complete acknowledged).
			continue
		}
		out, rc := runLease(lease, "claim", "--root", root, "--owner", "after", "--now", now, "--ttl", "100", id)
		f := strings.Fields(string(out))
		if rc != 0 || len(f) < 2 {
			bad("taking over %s after the cut: exit %d: %s", id, rc, out)
			break
		}
		if nt, _ := strconv.ParseInt(f[1], 10, 64); nt <= t {
			bad("taking over %s after the cut: token %d, not above the acknowledged %d", id, nt, t)
		}
		out, rc = runLeaseIn(lease, f[0]+" "+f[1]+"\n", "complete", "--root", root, "--now", now)
		if rc != 0 {
			bad("completing %s after the cut: exit %d: %s", id, rc, out)
		}
		break
	}
	nid := fmt.Sprintf("%064x", sha256.Sum256([]byte(fmt.Sprint("after-", res.Seed))))
	if out, rc := runLeaseIn(lease, nid+"\n", "add", "--root", root); rc != 0 {
		bad("lease add after the cut: exit %d: %s", rc, out)
	}
	out, rc := runLease(lease, "claim", "--root", root, "--owner", "after", "--now", now, "--ttl", "100", "--next", "1")
	if f := strings.Fields(string(out)); rc != 0 || len(f) < 2 {
		bad("lease claim --next after the cut: exit %d: %s", rc, out)
	} else if out, rc := runLeaseIn(lease, f[0]+" "+f[1]+"\n", "complete", "--root", root, "--now", now); rc != 0 {
		bad("completing %s after the cut: exit %d: %s", f[0], rc, out)
	}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// summary is the last line of lease fsck's output (its summary).
func summary(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "repair:") && !strings.HasPrefix(l, "lease fsck --repair") {
			return l
		}
	}
	return ""
}

func runLease(lease string, args ...string) ([]byte, int) { return runLeaseIn(lease, "", args...) }

func runLeaseIn(lease, stdin string, args ...string) ([]byte, int) {
	cmd := exec.Command(lease, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Dir = "/" // no ./lease.toml
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out, ee.ExitCode()
	}
	if err != nil {
		return append(out, err.Error()...), -1
	}
	return out, 0
}

// MountCut mounts the image img of fsys at mnt after a cut. When it does
// not mount, err says so; on btrfs, replay then also says whether it
// mounts without its log tree (rescue=nologreplay, read-only, unmounted
// again): btrfs failed to replay the log it wrote (Result.LogReplay).
func MountCut(fsys FS, img, mnt string) (replay string, err error) {
	out, err := exec.Command("mount", "-o", "loop", "-t", fsys.Type, img, mnt).CombinedOutput()
	if err == nil {
		return "", nil
	}
	err = fmt.Errorf("the image does not mount after the cut: %v: %s", err, strings.TrimSpace(string(out)))
	if fsys.Type == "btrfs" && exec.Command("mount", "-o", "loop,ro,rescue=nologreplay", "-t", fsys.Type, img, mnt).Run() == nil {
		exec.Command("umount", mnt).Run()
		replay = "the image mounts only without its log tree (rescue=nologreplay): btrfs failed to replay the log it wrote (" + err.Error() + ")"
	}
	return replay, err
}
