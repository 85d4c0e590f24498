// Command streambench measures the batch commands on a big input, two lease
// binaries side by side (issue 26, bounded memory): wall time and peak RSS
// of lease add of N IDs, claim --next N, renew-batch and complete of the N
// leases, for an old and a new binary, each step of the two run one after
// the other so that both see the same machine load; and lease add against a
// no-fsync floor (the same empty queue files from one process, one
// syncfs). It prints one JSON document on stdout.
//
// usage: streambench -old BIN -new BIN -dir-old DIR -dir-new DIR -dir-floor DIR [-items N] [-record-items M] [-shards K]
//
// Each DIR should be a fresh filesystem of its own (bench/stream makes
// three journaled ext4 loop images). Peak RSS is the child's own high
// water mark, VmHWM of /proc/PID/status, read every 10 ms while it runs:
// the rusage of wait4 will not do, since a child started by vfork and exec
// (as os/exec starts it) is charged this launcher's own peak as well.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/leasetool/lease/bench/internal/spread"
	"golang.org/x/sys/unix"
)

// step is one measured process.
type step struct {
	Command string  `json:"command"`
	Binary  string  `json:"binary"`
	WallS   float64 `json:"wall_s"`
	RSSKiB  int64   `json:"rss_kib"`
	Lines   int     `json:"lines"`
	Exit    int     `json:"exit"`
	Load1   float64 `json:"load1_before"`
}

type result struct {
	Items   int     `json:"items"`
	Records int     `json:"record_items"`
	Shards  int     `json:"shards"`
	Steps   []step  `json:"steps"`
	FloorS  float64 `json:"floor_s"`
	Start   string  `json:"start"`
	End     string  `json:"end"`
}

func main() {
	oldBin := flag.String("old", "", "the old lease binary")
	newBin := flag.String("new", "", "the new lease binary")
	dirOld := flag.String("dir-old", "", "the old binary's filesystem")
	dirNew := flag.String("dir-new", "", "the new binary's filesystem")
	dirFloor := flag.String("dir-floor", "", "the floor's filesystem")
	md := flag.String("md", "", "also write the results as a Markdown table to `FILE`")
	items := flag.Int("items", 1000000, "IDs")
	records := flag.Int("record-items", 0, "leases for claim --next, renew-batch and complete (default: -items)")
	shards := flag.Int("shards", 256, "work shards of the tables")
	flag.Parse()
	if *oldBin == "" || *newBin == "" || *dirOld == "" || *dirNew == "" || *dirFloor == "" {
		flag.Usage()
		os.Exit(2)
	}
	if *records == 0 {
		*records = *items
	}
	r, err := bench(*oldBin, *newBin, *dirOld, *dirNew, *dirFloor, *items, *records, *shards)
	json.NewEncoder(os.Stdout).Encode(r)
	if *md != "" {
		if werr := os.WriteFile(*md, []byte(markdown(r)), 0o644); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "streambench:", err)
		os.Exit(1)
	}
}

func bench(oldBin, newBin, dirOld, dirNew, dirFloor string, n, m, k int) (result, error) {
	r := result{Items: n, Records: m, Shards: k, Start: time.Now().UTC().Format(time.RFC3339)}
	r, err := steps(r, oldBin, newBin, dirOld, dirNew, dirFloor, n, m, k)
	r.End = time.Now().UTC().Format(time.RFC3339)
	return r, err
}

// steps runs the measurements of bench into r.
func steps(r result, oldBin, newBin, dirOld, dirNew, dirFloor string, n, m, k int) (result, error) {
	bins := []struct{ name, bin, dir string }{{"old", oldBin, dirOld}, {"new", newBin, dirNew}}
	ids := filepath.Join(dirFloor, "ids")
	if err := writeIDs(ids, n); err != nil {
		return r, err
	}
	for _, b := range bins {
		if p, err := run("", "", b.bin, "init", "--root", filepath.Join(b.dir, "table"), "--shards", strconv.Itoa(k)); err != nil || p.Exit != 0 {
			return r, fmt.Errorf("%s lease init: %v", b.name, err)
		}
	}
	d, err := spread.FloorCreate(filepath.Join(dirFloor, "floor"), n, k)
	if err != nil {
		return r, err
	}
	r.FloorS = d.Seconds()
	fmt.Fprintf(os.Stderr, "streambench: floor %.1fs\n", r.FloorS)
	cmds := []struct {
		name  string
		in    string // input file, relative to the binary's dir ("" for the IDs)
		out   string
		lines int
		args  []string
	}{
		{"add", "", "added", n, []string{"add"}},
		{"claim --next", "-", "held", m, []string{"claim", "--next", strconv.Itoa(m), "--ttl", "86400"}},
		{"renew-batch", "held", "renewed", m, []string{"renew-batch", "--ttl", "86400"}},
		{"complete", "held", "completed", m, []string{"complete"}},
	}
	for _, c := range cmds {
		for _, b := range bins {
			in := ids
			switch c.in {
			case "-":
				in = ""
			case "":
			default:
				in = filepath.Join(b.dir, c.in)
			}
			args := append(append([]string{}, c.args...), "--root", filepath.Join(b.dir, "table"))
			unix.Sync()
			p, err := run(in, filepath.Join(b.dir, c.out), b.bin, args...)
			p.Command, p.Binary = c.name, b.name
			r.Steps = append(r.Steps, p)
			fmt.Fprintf(os.Stderr, "streambench: %s %s: %.1fs %d KiB %d lines exit %d (load %.1f)\n", b.name, c.name, p.WallS, p.RSSKiB, p.Lines, p.Exit, p.Load1)
			if err != nil {
				return r, fmt.Errorf("%s %s: %w", b.name, c.name, err)
			}
			if p.Exit != 0 || p.Lines != c.lines {
				return r, fmt.Errorf("%s %s: exit %d, %d lines of %d", b.name, c.name, p.Exit, p.Lines, c.lines)
			}
		}
	}
	return r, nil
}

// run runs bin args with stdin from in ("" for none) and stdout into out,
// timing it from just before fork to just after wait.
func run(in, out, bin string, args ...string) (step, error) {
	var p step
	p.Load1 = load1()
	cmd := exec.Command(bin, args...)
	if in != "" {
		f, err := os.Open(in)
		if err != nil {
			return p, err
		}
		defer f.Close()
		cmd.Stdin = f
	}
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return p, err
		}
		defer f.Close()
		cmd.Stdout = f
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return p, err
	}
	stop, polled := make(chan struct{}), make(chan int64)
	go func() {
		var peak int64
		status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		for {
			if kb := vmHWM(status); kb > peak {
				peak = kb
			}
			select {
			case <-stop:
				polled <- peak
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	err := cmd.Wait()
	p.WallS = time.Since(start).Seconds()
	close(stop)
	p.RSSKiB = <-polled
	if cmd.ProcessState != nil {
		p.Exit = cmd.ProcessState.ExitCode()
	}
	if _, ok := err.(*exec.ExitError); ok {
		err = nil
	}
	if p.Exit != 0 {
		fmt.Fprintf(os.Stderr, "streambench: %s %s: %s\n", bin, strings.Join(args, " "), firstLines(errb.String(), 5))
	}
	if out != "" {
		n, rerr := countLines(out)
		if rerr != nil {
			return p, rerr
		}
		p.Lines = n
	}
	return p, err
}

// vmHWM is the VmHWM of a /proc/PID/status file in KiB, 0 when unread.
func vmHWM(status string) int64 {
	data, err := os.ReadFile(status)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb
			}
		}
	}
	return 0
}

// countLines counts the lines of file without holding it.
func countLines(file string) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<16)
	n := 0
	for {
		k, err := f.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func firstLines(s string, n int) string {
	l := strings.SplitN(s, "\n", n+1)
	return strings.Join(l[:min(n, len(l))], "\n")
}

func load1() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// id is ID i: its first 8 hex digits are i, so N IDs spread evenly over the
// shards, the rest a SHA-256 digest of i (as bench/queuebench's).

func writeIDs(file string, n int) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 0, 1<<20)
	for i := range n {
		b = append(append(b, spread.ID(i)...), '\n')
		if len(b) > 1<<20-100 {
			if _, err := f.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	_, err = f.Write(b)
	return err
}

// markdown is the table of r: each command's old and new wall time and
// peak RSS with their ratios, and add against the floor.
func markdown(r result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "add of %d IDs; claim --next, renew-batch and complete of %d leases; %d shards.\n\n", r.Items, r.Records, r.Shards)
	b.WriteString("| command | old wall s | new wall s | new/old | old peak RSS MiB | new peak RSS MiB | new/old | load1 before (old, new) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---|\n")
	by := map[string]map[string]step{}
	var order []string
	for _, s := range r.Steps {
		if by[s.Command] == nil {
			by[s.Command] = map[string]step{}
			order = append(order, s.Command)
		}
		by[s.Command][s.Binary] = s
	}
	for _, c := range order {
		o, n := by[c]["old"], by[c]["new"]
		if o.WallS == 0 || n.WallS == 0 {
			continue // not run: an earlier step failed
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.3f | %.1f, %.1f |\n", c, o.WallS, n.WallS, ratio(n.WallS, o.WallS),
			float64(o.RSSKiB)/1024, float64(n.RSSKiB)/1024, ratio(float64(n.RSSKiB), float64(o.RSSKiB)), o.Load1, n.Load1)
	}
	if a := by["add"]; a != nil && r.FloorS > 0 {
		fmt.Fprintf(&b, "\nNo-fsync floor (the same %d empty queue files from one process, one syncfs): %.1f s. lease add / floor: old %.2f, new %.2f.\n",
			r.Items, r.FloorS, a["old"].WallS/r.FloorS, a["new"].WallS/r.FloorS)
	}
	fmt.Fprintf(&b, "\nRun %s to %s.\n", r.Start, r.End)
	return b.String()
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
