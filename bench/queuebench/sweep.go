package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasetool/lease/bench/internal/spread"
	"golang.org/x/sys/unix"
)

// point is one fraction done of the sweep.
type point struct {
	Done      float64 `json:"done"`
	Remaining int     `json:"remaining"`
	Next      stats   `json:"claim_next"`
	ByID      stats   `json:"claim_id"`
	NextRSS   int64   `json:"claim_next_max_rss_kib"`
	// Round trips (FUSE requests) per grant, with --fuse-delay: the mean
	// per process and, by opcode, of one claim --next and one claim ID.
	NextRequests float64        `json:"claim_next_fuse_requests,omitempty"`
	IDRequests   float64        `json:"claim_id_fuse_requests,omitempty"`
	NextOps      map[string]int `json:"claim_next_fuse_ops,omitempty"`
	IDOps        map[string]int `json:"claim_id_fuse_ops,omitempty"`
}

type sweepResult struct {
	Items     int     `json:"items"`
	Shards    int     `json:"shards"`
	FuseDelay string  `json:"fuse_delay,omitempty"`
	Points    []point `json:"points"`
	// Flat: p50 of claim --next at the last point over p50 at the first;
	// VsID: p50 of claim --next over p50 of claim ID at the last point.
	Flat float64 `json:"flat_ratio"`
	VsID float64 `json:"vs_claim_id_ratio"`
	// Summary is one lease status --summary at the last point (every
	// record read), its wall time and peak RSS.
	SummaryMS     float64 `json:"status_summary_ms"`
	SummaryRSSKiB int64   `json:"status_summary_rss_kib"`
	SummaryOut    string  `json:"status_summary"`
}

func sweep(o opts) (sweepResult, error) {
	r := sweepResult{Items: o.items, Shards: o.shards}
	backing := filepath.Join(o.dir, "backing")
	root := filepath.Join(backing, "table")
	os.MkdirAll(backing, 0o755)
	if p, err := run("", o.lease, "init", "--root", root, "--shards", strconv.Itoa(o.shards)); err != nil || p.code != 0 {
		return r, fmt.Errorf("lease init: %v %s", err, p.errOut)
	}
	ids := filepath.Join(o.dir, "ids")
	if err := writeIDs(ids, 0, o.items); err != nil {
		return r, err
	}
	if p, err := run(ids, o.lease, "add", "--root", root); err != nil || p.code != 0 {
		return r, fmt.Errorf("lease add: exit %d %v %s", p.code, err, p.errOut)
	}
	os.Remove(ids)
	claimRoot := root
	var fuse *mount
	if o.fuseDelay > 0 {
		r.FuseDelay = o.fuseDelay.String()
		var err error
		if fuse, err = mountFaultfs(o, backing, filepath.Join(o.dir, "mnt")); err != nil {
			return r, err
		}
		defer fuse.unmount()
		claimRoot = filepath.Join(fuse.dir, "table")
	}
	var fracs []float64
	for _, f := range strings.Split(o.fractions, ",") {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return r, fmt.Errorf("--fractions: %v", err)
		}
		fracs = append(fracs, v)
	}
	done := 0
	extra := o.items // IDs never queued: the known free IDs of `claim ID`
	for _, f := range fracs {
		to := int(f * float64(o.items))
		if err := markDone(root, done, to, o.shards); err != nil {
			return r, err
		}
		done = max(done, to)
		pt := point{Done: f, Remaining: o.items - done}
		var next, byID []time.Duration
		for rep := 0; rep < o.reps; rep++ {
			free := spread.ID(extra)
			extra++
			steps := []func() error{
				func() error {
					p, err := run("", o.lease, "claim", "--root", claimRoot, "--next", "1", "--ttl", "86400")
					if err != nil || p.code != 0 {
						return fmt.Errorf("claim --next: exit %d %v %s", p.code, err, p.errOut)
					}
					next = append(next, p.wall)
					pt.NextRSS = max(pt.NextRSS, p.maxRSS)
					return nil
				},
				func() error {
					p, err := run("", o.lease, "claim", "--root", claimRoot, "--ttl", "86400", free)
					if err != nil || p.code != 0 {
						return fmt.Errorf("claim ID: exit %d %v %s", p.code, err, p.errOut)
					}
					byID = append(byID, p.wall)
					return nil
				},
			}
			if rep%2 == 1 {
				steps[0], steps[1] = steps[1], steps[0]
			}
			for _, s := range steps {
				if err := s(); err != nil {
					return r, err
				}
			}
		}
		pt.Next, pt.ByID = summarize(next), summarize(byID)
		if fuse != nil {
			var err error
			if pt.NextRequests, pt.NextOps, err = fuse.requests(5, func() error {
				_, err := run("", o.lease, "claim", "--root", claimRoot, "--next", "1", "--ttl", "86400")
				return err
			}); err != nil {
				return r, err
			}
			if pt.IDRequests, pt.IDOps, err = fuse.requests(5, func() error {
				free := spread.ID(extra)
				extra++
				_, err := run("", o.lease, "claim", "--root", claimRoot, "--ttl", "86400", free)
				return err
			}); err != nil {
				return r, err
			}
		}
		r.Points = append(r.Points, pt)
		fmt.Fprintf(os.Stderr, "queuebench: %.0f%% done: claim --next p50 %.2f ms p99 %.2f ms, claim ID p50 %.2f ms\n", f*100, pt.Next.P50, pt.Next.P99, pt.ByID.P50)
	}
	if p, err := run("", o.lease, "status", "--summary", "--json", "--root", claimRoot); err == nil && p.code == 0 {
		r.SummaryMS, r.SummaryRSSKiB, r.SummaryOut = p.wall.Seconds()*1e3, p.maxRSS, strings.TrimSpace(string(p.out))
	} else {
		return r, fmt.Errorf("status --summary: exit %d %v %s", p.code, err, p.errOut)
	}
	first, last := r.Points[0], r.Points[len(r.Points)-1]
	r.Flat = last.Next.P50 / first.Next.P50
	r.VsID = last.Next.P50 / last.ByID.P50
	return r, nil
}

// markDone makes items [from, to) done as complete would leave them: a
// done record, no queue entry; written directly (no fsync), then synced.
func markDone(root string, from, to, k int) error {
	if to <= from {
		return nil
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	const workers = 8
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from + w; i < to; i += workers {
				sh := spread.ShardDir(i, k)
				rec := fmt.Sprintf(`{"schema":"lease.work/v1","id":"%s","status":"done","owner":"bench","token":1,"claimed_at":1764450000,"renewed_at":1764450010,"expires_at":1764450120}`+"\n", spread.ID(i))
				err := os.WriteFile(filepath.Join(root, "work", sh, spread.ID(i)+".json"), []byte(rec), 0o644)
				if err == nil {
					err = os.Remove(filepath.Join(root, "queue", sh, spread.ID(i)))
				}
				if err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	unix.Sync()
	return first
}

// mount is a lease-faultfs mount that logs every FUSE request.
type mount struct {
	dir string
	cmd *exec.Cmd
	log string
}

func mountFaultfs(o opts, backing, dir string) (*mount, error) {
	os.MkdirAll(dir, 0o755)
	d := o.fuseDelay.String()
	m := &mount{dir: dir, log: filepath.Join(o.dir, "fuse.log")}
	logf, err := os.Create(m.log)
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(o.faultfs, "--backing", backing, "--mount", dir, "--debug",
		"--delay", "create="+d+",fsync="+d+",rename="+d+",fsyncdir="+d)
	m.cmd.Stderr = logf
	out, _ := m.cmd.StdoutPipe()
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(line, "mounted") {
		m.cmd.Process.Kill()
		return nil, fmt.Errorf("lease-faultfs did not mount: %q %v", line, err)
	}
	return m, nil
}

func (m *mount) unmount() {
	m.cmd.Process.Signal(unix.SIGTERM)
	m.cmd.Wait()
}

var rxRe = regexp.MustCompile(`rx \d+: (\w+)`)

// requests runs do n times and counts the FUSE requests each made, from
// the debug log (the mount is otherwise idle): the mean and, for the last
// run, the requests by opcode.
func (m *mount) requests(n int, do func() error) (float64, map[string]int, error) {
	total := 0
	var ops map[string]int
	for i := 0; i < n; i++ {
		time.Sleep(100 * time.Millisecond)
		before := fileSize(m.log)
		if err := do(); err != nil {
			return 0, nil, err
		}
		time.Sleep(100 * time.Millisecond)
		data, err := os.ReadFile(m.log)
		if err != nil {
			return 0, nil, err
		}
		ops = map[string]int{}
		for _, mm := range rxRe.FindAllSubmatch(data[before:], -1) {
			ops[string(mm[1])]++
			total++
		}
	}
	return float64(total) / float64(n), ops, nil
}

func fileSize(name string) int64 {
	fi, err := os.Stat(name)
	if err != nil {
		return 0
	}
	return fi.Size()
}
