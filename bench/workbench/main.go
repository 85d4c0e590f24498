// Command workbench measures issue 25's campaign throughput: items per
// second of `lease work` workers against today's one-line workers
// (`while lease run --next --complete -- true; do :; done`) on trivial
// items, and against a floor: one plain program doing, per item, the same
// process spawns and the same fsync'd writes as lease work (see floor).
// bench/worker runs it on the filesystems and writes the report.
//
//	workbench campaign --mode work|loop --lease BIN --dir DIR --items N --workers W
//	workbench floor --dir DIR --items N --workers W [--file-syncs 3 --dir-syncs 4]
//	workbench report --dir RESULTS
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// result is one measured run.
type result struct {
	FS        string  `json:"fs"`
	Mode      string  `json:"mode"` // work, loop, floor
	Items     int     `json:"items"`
	Workers   int     `json:"workers"`
	Seconds   float64 `json:"seconds"`
	ItemsPerS float64 `json:"items_per_s"`
	// Per item, from lease work's --json ends (mode work) or as done
	// (floor): the file and directory fsyncs.
	FileSyncs float64 `json:"file_syncs_per_item,omitempty"`
	DirSyncs  float64 `json:"directory_syncs_per_item,omitempty"`
	// Spawns per item: the processes started for each item.
	Spawns int    `json:"spawns_per_item"`
	Load   string `json:"load_average"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: workbench campaign|floor|report [flags]")
		os.Exit(2)
	}
	fl := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	mode := fl.String("mode", "work", "campaign: work (lease work workers) or loop (while lease run --next --complete)")
	lease := fl.String("lease", "lease", "the lease binary")
	dir := fl.String("dir", "", "an empty directory on the filesystem measured (campaign, floor); the results (report)")
	items := fl.Int("items", 2000, "items")
	workers := fl.Int("workers", 8, "workers")
	shards := fl.Int("shards", 16, "work shards")
	fsName := fl.String("fs", "", "the filesystem's name, for the report")
	fileSyncs := fl.Int("file-syncs", 3, "floor: record writes (file fsyncs) per item")
	dirSyncs := fl.Int("dir-syncs", 4, "floor: directory fsyncs per item (one per record write, the rest for the staging directory)")
	fl.Parse(os.Args[2:])
	var r result
	var err error
	switch os.Args[1] {
	case "campaign":
		r, err = campaign(*mode, *lease, *dir, *items, *workers, *shards)
	case "floor":
		r, err = floor(*dir, *items, *workers, *shards, *fileSyncs, *dirSyncs)
	case "report":
		err = report(*dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "workbench:", err)
			os.Exit(1)
		}
		return
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "workbench:", err)
		os.Exit(1)
	}
	r.FS = *fsName
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.Load = strings.Join(strings.Fields(string(data))[:3], " ")
	}
	json.NewEncoder(os.Stdout).Encode(r)
}

func id(i int) string {
	sum := sha256.Sum256([]byte("item-" + strconv.Itoa(i)))
	return hex.EncodeToString(sum[:])
}

// campaign runs workers over items trivial items (CMD = true) and times
// them from the first worker's start to the last one's end; every item
// must be done.
func campaign(mode, lease, dir string, items, workers, shards int) (result, error) {
	r := result{Mode: mode, Items: items, Workers: workers}
	root := filepath.Join(dir, "table")
	env := append(os.Environ(), "LEASE_ROOT="+root)
	run := func(stdin string, args ...string) error {
		c := exec.Command(lease, args...)
		c.Env, c.Stdin = env, strings.NewReader(stdin)
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("lease %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("", "init", "--shards", strconv.Itoa(shards)); err != nil {
		return r, err
	}
	var ids strings.Builder
	for i := 0; i < items; i++ {
		ids.WriteString(id(i) + "\n")
	}
	if err := run(ids.String(), "add"); err != nil {
		return r, err
	}
	unix.Sync()
	var script string
	switch mode {
	case "loop":
		// Today's one-line worker, as the issue measured it.
		script = `while "$LEASE" run --next --complete -- true; do :; done`
		r.Spawns = 3 // lease run, its supervisor, true
	case "work":
		script = `exec "$LEASE" work --json -- true`
		r.Spawns = 1 // true (one supervisor per worker)
	default:
		return r, fmt.Errorf("--mode %q: want work or loop", mode)
	}
	cmds := make([]*exec.Cmd, workers)
	errs := make([]*bytes.Buffer, workers)
	start := time.Now()
	for i := range cmds {
		cmds[i] = exec.Command("sh", "-c", script)
		cmds[i].Env = append(env, "LEASE="+lease)
		errs[i] = &bytes.Buffer{}
		cmds[i].Stderr = errs[i]
		if err := cmds[i].Start(); err != nil {
			return r, err
		}
	}
	for i, c := range cmds {
		err := c.Wait()
		if mode == "work" && err != nil {
			return r, fmt.Errorf("worker %d: %v\n%s", i, err, tail(errs[i].String()))
		}
	}
	r.Seconds = time.Since(start).Seconds()
	r.ItemsPerS = float64(items) / r.Seconds
	// Every item done: the queue is empty.
	left := 0
	filepath.WalkDir(filepath.Join(root, "queue"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left++
		}
		return nil
	})
	if left > 0 {
		return r, fmt.Errorf("%d items not done", left)
	}
	if mode == "work" {
		var fsyncs, dsyncs float64
		for _, e := range errs {
			for _, l := range strings.Split(e.String(), "\n") {
				var end struct {
					End   string `json:"end"`
					Stats struct {
						FileSyncs int `json:"file_syncs"`
						DirSyncs  int `json:"directory_syncs"`
					} `json:"stats"`
				}
				if json.Unmarshal([]byte(l), &end) == nil && end.End != "" {
					fsyncs += float64(end.Stats.FileSyncs)
					dsyncs += float64(end.Stats.DirSyncs)
				}
			}
		}
		r.FileSyncs, r.DirSyncs = fsyncs/float64(items), dsyncs/float64(items)
	}
	return r, nil
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

// floor is the least a worker can do per item, from one plain program
// with one goroutine per worker: the process spawns lease work makes per
// item (one: the command, /bin/true) and the same fsync'd writes (the
// staging directory made, its parent fsynced, and removed; fileSyncs
// record writes, each a temp file written, fdatasynced, renamed over the
// record and its directory fsynced: the claim, committing, done; the
// queue entry removed), in a table-shaped tree of shards directories, with
// no locks, no reads and no checks.
func floor(dir string, items, workers, shards, fileSyncs, dirSyncs int) (result, error) {
	r := result{Mode: "floor", Items: items, Workers: workers, Spawns: 1,
		FileSyncs: float64(fileSyncs), DirSyncs: float64(dirSyncs)}
	stage := filepath.Join(dir, "stage")
	for _, d := range []string{stage, filepath.Join(dir, "queue"), filepath.Join(dir, "work")} {
		os.MkdirAll(d, 0o755)
	}
	for s := 0; s < shards; s++ {
		os.MkdirAll(filepath.Join(dir, "work", fmt.Sprintf("%02x", s)), 0o755)
		os.MkdirAll(filepath.Join(dir, "queue", fmt.Sprintf("%02x", s)), 0o755)
	}
	for i := 0; i < items; i++ {
		q := filepath.Join(dir, "queue", fmt.Sprintf("%02x", i%shards), id(i))
		os.WriteFile(q, nil, 0o644)
	}
	unix.Sync()
	record := bytes.Repeat([]byte("x"), 230)
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= items {
					return
				}
				if err := floorItem(dir, stage, i, shards, fileSyncs, dirSyncs, record); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	r.ItemsPerS = float64(items) / r.Seconds
	select {
	case err := <-errc:
		return r, err
	default:
	}
	return r, nil
}

func floorItem(dir, stage string, i, shards, fileSyncs, dirSyncs int, record []byte) error {
	sh := fmt.Sprintf("%02x", i%shards)
	shard := filepath.Join(dir, "work", sh)
	sd := filepath.Join(stage, id(i)+".1")
	if err := os.Mkdir(sd, 0o755); err != nil {
		return err
	}
	extra := dirSyncs - fileSyncs
	for k := 0; k < extra; k++ {
		if err := syncDir(stage); err != nil {
			return err
		}
	}
	if err := exec.Command("/bin/true").Run(); err != nil {
		return err
	}
	for k := 0; k < fileSyncs; k++ {
		tmp := filepath.Join(shard, fmt.Sprintf(".%s.json.tmp.%d", id(i), k))
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		f.Write(record)
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return err
		}
		f.Close()
		if err := os.Rename(tmp, filepath.Join(shard, id(i)+".json")); err != nil {
			return err
		}
		if err := syncDir(shard); err != nil {
			return err
		}
	}
	os.Remove(filepath.Join(dir, "queue", sh, id(i)))
	return os.Remove(sd)
}

func syncDir(d string) error {
	f, err := os.Open(d)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// report writes work.md from the results (*.json, one result per line)
// in dir: per filesystem and worker count, the medians of each mode side
// by side and the goal's ratios.
func report(dir string) error {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	type key struct {
		fs      string
		workers int
	}
	runs := map[key]map[string][]result{}
	var keys []key
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var r result
			if json.Unmarshal([]byte(l), &r) != nil {
				continue
			}
			k := key{r.FS, r.Workers}
			if runs[k] == nil {
				runs[k] = map[string][]result{}
				keys = append(keys, k)
			}
			runs[k][r.Mode] = append(runs[k][r.Mode], r)
		}
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].fs != keys[b].fs {
			return keys[a].fs < keys[b].fs
		}
		return keys[a].workers < keys[b].workers
	})
	median := func(rs []result) (float64, string) {
		if len(rs) == 0 {
			return 0, ""
		}
		v := make([]float64, len(rs))
		var all []string
		for i, r := range rs {
			v[i] = r.ItemsPerS
			all = append(all, fmt.Sprintf("%.0f", r.ItemsPerS))
		}
		sort.Float64s(v)
		m := v[len(v)/2]
		if len(v)%2 == 0 {
			m = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		return m, strings.Join(all, ", ")
	}
	var b strings.Builder
	b.WriteString("# lease work: campaign throughput (bench/worker)\n\n")
	if m, err := os.ReadFile(filepath.Join(dir, "machine.txt")); err == nil {
		b.Write(m)
		b.WriteString("\n")
	}
	b.WriteString("Trivial items (CMD = `true`), items per second, median of the runs (each run in brackets); " +
		"the modes interleaved in every repetition. **loop**: today's one-line workers, " +
		"`while lease run --next --complete -- true; do :; done` (3 processes per item: lease run, its supervisor, true). " +
		"**work**: `lease work -- true` workers (1 process per item: true; one supervisor per worker). " +
		"**floor**: one plain Go program with one goroutine per worker doing, per item, the same process spawn (/bin/true) " +
		"and the same fsync'd writes as lease work (its measured file and directory fsyncs per item: the staging " +
		"directory made with its parent fsynced and removed, three record writes each fdatasynced, renamed and its " +
		"directory fsynced, the queue entry removed), with no locks, reads or checks. Goal: work ≥ 3× loop, and " +
		"floor ÷ work ≤ 1.5.\n\n")
	b.WriteString("| fs | workers | loop | work | floor | work ÷ loop (goal ≥ 3) | floor ÷ work (goal ≤ 1.5) | fsyncs per item (file, dir) |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, k := range keys {
		loop, la := median(runs[k]["loop"])
		work, wa := median(runs[k]["work"])
		fl, fa := median(runs[k]["floor"])
		syncs := ""
		if ws := runs[k]["work"]; len(ws) > 0 {
			syncs = fmt.Sprintf("%.2f, %.2f", ws[0].FileSyncs, ws[0].DirSyncs)
		}
		ratio := func(a, b float64, goal func(float64) bool) string {
			if a == 0 || b == 0 {
				return ""
			}
			s := fmt.Sprintf("%.2f×", a/b)
			if goal(a / b) {
				s = "**" + s + "**"
			}
			return s
		}
		fmt.Fprintf(&b, "| %s | %d | %.0f (%s) | %.0f (%s) | %.0f (%s) | %s | %s | %s |\n", k.fs, k.workers, loop, la, work, wa, fl, fa,
			ratio(work, loop, func(x float64) bool { return x >= 3 }), ratio(fl, work, func(x float64) bool { return x <= 1.5 }), syncs)
	}
	b.WriteString("\nBold: the goal met. Raw results: the .json files beside this page (one JSON object per run, with the load average when it ended).\n")
	return os.WriteFile(filepath.Join(dir, "work.md"), []byte(b.String()), 0o644)
}
