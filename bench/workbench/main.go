// Command workbench measures a campaign of trivial items side by side
// (issue 39): `lease work` workers against the floor (bench/workerfloor's
// floor.c: claim by rename and a directory fsync, spawn CMD, done/ID with a
// file and a directory fsync; one spawn and 3 syncs an item), a flock(1)
// file queue in bash (bench/workerfloor/flockq) and GNU parallel
// --sqlworker on SQLite, and (--system loop) the one-line
// `while lease run --next --complete` workers of issue 25. Every item's
// command is bench/workerfloor's logid, which appends the item's ID to a log
// outside the filesystem measured, and a run in which an item is missing
// from that log or in it twice (or the system's own state disagrees) is
// failed, not timed. bench/worker runs it on the filesystems, interleaved,
// and writes the report.
//
//	workbench run --system S --bin DIR --dir DIR --log FILE --items N --workers W [--fs NAME] [--strace]
//	workbench report --dir RESULTS
//
// run prepares the queue (not timed), starts W workers of system S at
// once, times them from the first start to the last exit and takes their
// CPU time from getrusage(RUSAGE_CHILDREN) around them (every process of
// theirs that was waited for: the workers, their commands, lease's
// supervisors, parallel's shells and sqlite). With --strace each worker
// runs under `strace -f -c` counting fsync, fdatasync, syncfs,
// sync_file_range and sync; such a run gives the syncs an item and its time
// is not used. It prints one JSON object.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// result is one run of one system.
type result struct {
	FS      string `json:"fs"`
	System  string `json:"system"` // floor, work, flock, parallel, loop
	Items   int    `json:"items"`
	Workers int    `json:"workers"`
	// Strace: a counting run (syncs), its time not used.
	Strace    bool    `json:"strace,omitempty"`
	Seconds   float64 `json:"seconds"`
	ItemsPerS float64 `json:"items_per_s"`
	// CPUms: user + system CPU of every waited-for descendant, per item.
	CPUms float64 `json:"cpu_ms_per_item"`
	// Syncs per item and the calls counted (counting runs only).
	Syncs float64        `json:"syncs_per_item,omitempty"`
	Calls map[string]int `json:"sync_calls,omitempty"`
	// Failed says why the run does not count (an item lost or run
	// twice, a worker that failed); empty for a good run.
	Failed string `json:"failed,omitempty"`
	Load   string `json:"load_average"`
}

// syncCalls are the system calls a counting run counts.
var syncCalls = []string{"fsync", "fdatasync", "syncfs", "sync_file_range", "sync"}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: workbench run|report [flags]")
		os.Exit(2)
	}
	fl := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	system := fl.String("system", "work", "floor, work, flock, parallel or loop")
	bin := fl.String("bin", "", "the directory of lease, floor, logid and flockq")
	dir := fl.String("dir", "", "run: an empty directory on the filesystem measured; report: the results")
	logFile := fl.String("log", "", "the items' log (outside the filesystem measured); the strace counts go beside it")
	items := fl.Int("items", 2000, "items")
	workers := fl.Int("workers", 8, "workers")
	shards := fl.Int("shards", 16, "lease's work shards")
	fsName := fl.String("fs", "", "the filesystem's name, for the report")
	strace := fl.Bool("strace", false, "count the syncs with strace -f -c (a counting run)")
	fl.Parse(os.Args[2:])
	switch os.Args[1] {
	case "run":
		r, err := run(*system, *bin, *dir, *logFile, *items, *workers, *shards, *strace)
		if err != nil {
			fmt.Fprintln(os.Stderr, "workbench:", err)
			os.Exit(1)
		}
		r.FS = *fsName
		if data, err := os.ReadFile("/proc/loadavg"); err == nil {
			r.Load = strings.Join(strings.Fields(string(data))[:3], " ")
		}
		json.NewEncoder(os.Stdout).Encode(r)
	case "report":
		if err := report(*dir); err != nil {
			fmt.Fprintln(os.Stderr, "workbench:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "workbench: unknown subcommand %q\n", os.Args[1])
		os.Exit(2)
	}
}

func id(i int) string {
	sum := sha256.Sum256([]byte("item-" + strconv.Itoa(i)))
	return hex.EncodeToString(sum[:])
}

// run prepares items for system in dir, runs workers of it and checks the
// outcome. An error is the benchmark's own failure (setup); a system that
// loses or doubles items gives a result with Failed set.
func run(system, bin, dir, logFile string, items, workers, shards int, strace bool) (result, error) {
	r := result{System: system, Items: items, Workers: workers, Strace: strace}
	if bin == "" || dir == "" || logFile == "" {
		return r, errors.New("--bin, --dir and --log are needed")
	}
	logid := filepath.Join(bin, "logid")
	lease := filepath.Join(bin, "lease")
	ids := make([]string, items)
	for i := range ids {
		ids[i] = id(i)
	}
	idList := strings.Join(ids, "\n") + "\n"
	env := append(os.Environ(), "BENCH_LOG="+logFile)
	mkdirs := func(names ...string) error {
		for _, n := range names {
			if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
				return err
			}
		}
		return nil
	}
	touchAll := func(sub string) error {
		for _, x := range ids {
			if err := os.WriteFile(filepath.Join(dir, sub, x), nil, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	setup := func(stdin string, name string, args ...string) error {
		c := exec.Command(name, args...)
		c.Env, c.Stdin = env, strings.NewReader(stdin)
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(string(out)))
		}
		return nil
	}
	var argv []string
	// check says what the system's own state disagrees with (its items
	// not all done), after the log was checked.
	var check func() string
	switch system {
	case "floor":
		if err := mkdirs("q", "run", "done"); err != nil {
			return r, err
		}
		if err := touchAll("q"); err != nil {
			return r, err
		}
		argv = []string{filepath.Join(bin, "floor"), dir, logid}
		check = func() string { return countFiles(dir, "done", "q", items) }
	case "flock":
		if err := mkdirs("queue", "running", "done"); err != nil {
			return r, err
		}
		if err := touchAll("queue"); err != nil {
			return r, err
		}
		argv = []string{filepath.Join(bin, "flockq"), dir, logid}
		check = func() string { return countFiles(dir, "done", "queue", items) }
	case "work", "loop":
		root := filepath.Join(dir, "table")
		env = append(env, "LEASE_ROOT="+root, "LEASE="+lease, "LOGID="+logid)
		if err := setup("", lease, "init", "--shards", strconv.Itoa(shards)); err != nil {
			return r, err
		}
		if err := setup(idList, lease, "add"); err != nil {
			return r, err
		}
		if system == "work" {
			argv = []string{lease, "work", "--", logid}
		} else {
			argv = []string{"sh", "-c", `while "$LEASE" run --next --complete -- "$LOGID"; do :; done`}
		}
		check = func() string {
			c := exec.Command(lease, "status", "--summary", "--json")
			c.Env = env
			out, err := c.Output()
			var s struct{ Queued, Done int }
			if err != nil || json.Unmarshal(out, &s) != nil {
				return fmt.Sprintf("lease status --summary: %v %s", err, out)
			}
			if s.Done != items || s.Queued != 0 {
				return fmt.Sprintf("lease status --summary: %d done, %d queued, of %d items", s.Done, s.Queued, items)
			}
			return ""
		}
	case "parallel":
		db := filepath.Join(dir, "jobs.sqlite")
		// GNU parallel's DBURL: the database's path with its slashes
		// escaped, then the table.
		dburl := "sqlite3:///" + strings.ReplaceAll(url.PathEscape(db), "/", "%2F") + "/jobs"
		if err := os.WriteFile(filepath.Join(dir, "ids"), []byte(idList), 0o644); err != nil {
			return r, err
		}
		if err := setup("", "parallel", "--will-cite", "--sqlmaster", dburl, logid, "::::", filepath.Join(dir, "ids")); err != nil {
			return r, err
		}
		argv = []string{"parallel", "--will-cite", "--sqlworker", dburl, "-j1"}
		check = func() string {
			out, err := exec.Command("sqlite3", db, "select count(*) from jobs where Exitval = 0").Output()
			if err != nil {
				return fmt.Sprintf("sqlite3: %v", err)
			}
			if n, _ := strconv.Atoi(strings.TrimSpace(string(out))); n != items {
				return fmt.Sprintf("%s of %d jobs with Exitval 0 in the table", strings.TrimSpace(string(out)), items)
			}
			return ""
		}
	default:
		return r, fmt.Errorf("--system %q: want floor, work, flock, parallel or loop", system)
	}
	os.Remove(logFile)
	unix.Sync()

	var before, after unix.Rusage
	unix.Getrusage(unix.RUSAGE_CHILDREN, &before)
	cmds := make([]*exec.Cmd, workers)
	errs := make([]*bytes.Buffer, workers)
	traces := make([]string, workers)
	start := time.Now()
	for i := range cmds {
		a := argv
		if strace {
			traces[i] = fmt.Sprintf("%s.strace.%d", logFile, i)
			a = append([]string{"strace", "-f", "-c", "-o", traces[i], "-e", "trace=" + strings.Join(syncCalls, ",")}, argv...)
		}
		cmds[i] = exec.Command(a[0], a[1:]...)
		cmds[i].Env = env
		errs[i] = &bytes.Buffer{}
		cmds[i].Stderr = errs[i]
		if err := cmds[i].Start(); err != nil {
			return r, err
		}
	}
	var failed []string
	for i, c := range cmds {
		if err := c.Wait(); err != nil && system != "loop" { // the loop ends with an error by design
			failed = append(failed, fmt.Sprintf("worker %d: %v: %s", i, err, strings.TrimSpace(tail(errs[i].String()))))
		}
	}
	r.Seconds = time.Since(start).Seconds()
	unix.Getrusage(unix.RUSAGE_CHILDREN, &after)
	cpu := time.Duration(unix.TimevalToNsec(after.Utime) - unix.TimevalToNsec(before.Utime) +
		unix.TimevalToNsec(after.Stime) - unix.TimevalToNsec(before.Stime))
	r.ItemsPerS = float64(items) / r.Seconds
	r.CPUms = float64(cpu) / float64(time.Millisecond) / float64(items)
	if strace {
		r.Calls = map[string]int{}
		total := 0
		for _, f := range traces {
			calls, err := straceCalls(f)
			if err != nil {
				return r, err
			}
			os.Remove(f)
			for k, v := range calls {
				r.Calls[k] += v
				total += v
			}
		}
		r.Syncs = float64(total) / float64(items)
	}
	if why := exactlyOnce(logFile, ids); why != "" {
		failed = append(failed, why)
	} else if why := check(); why != "" {
		failed = append(failed, why)
	}
	r.Failed = strings.Join(failed, "; ")
	return r, nil
}

// exactlyOnce says which items of ids the log misses or has more than
// once, or which lines are no item's; "" when each is there once.
func exactlyOnce(logFile string, ids []string) string {
	f, err := os.Open(logFile)
	if err != nil {
		return fmt.Sprintf("the items' log: %v", err)
	}
	defer f.Close()
	seen := make(map[string]int, len(ids))
	for _, x := range ids {
		seen[x] = 0
	}
	stray := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if _, ok := seen[sc.Text()]; !ok {
			stray++
			continue
		}
		seen[sc.Text()]++
	}
	missing, twice := 0, 0
	for _, n := range seen {
		switch {
		case n == 0:
			missing++
		case n > 1:
			twice++
		}
	}
	if missing+twice+stray == 0 {
		return ""
	}
	return fmt.Sprintf("%d items not run, %d run more than once, %d stray lines in the log", missing, twice, stray)
}

// countFiles says what is wrong unless dir/done has items entries and
// dir/queue none.
func countFiles(dir, done, queue string, items int) string {
	d, err1 := os.ReadDir(filepath.Join(dir, done))
	q, err2 := os.ReadDir(filepath.Join(dir, queue))
	if err := errors.Join(err1, err2); err != nil {
		return err.Error()
	}
	if len(d) != items || len(q) != 0 {
		return fmt.Sprintf("%d entries in %s/ and %d in %s/, of %d items", len(d), done, len(q), queue, items)
	}
	return ""
}

// straceCalls reads the calls column of an `strace -c` summary.
func straceCalls(file string) (map[string]int, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	calls := map[string]int{}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		// % time, seconds, usecs/call, calls, [errors,] syscall
		if len(f) < 5 || f[len(f)-1] == "total" {
			continue
		}
		name := f[len(f)-1]
		for _, s := range syncCalls {
			if s == name {
				n, err := strconv.Atoi(f[3])
				if err != nil {
					return nil, fmt.Errorf("%s: %q", file, l)
				}
				calls[name] += n
			}
		}
	}
	return calls, nil
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

// systems in the report's order, with what each is.
var systems = []struct{ name, what string }{
	{"floor", "the floor: bench/workerfloor/floor.c, claim by rename(q/ID, run/ID) + directory fsync, fork and exec CMD, done/ID with a file fsync and a directory fsync"},
	{"work", "`lease work -- CMD` workers on a lease table of the same items (lease init, lease add)"},
	{"flock", "a flock(1) file queue in bash (bench/workerfloor/flockq): flock on a lock file, mv queue/ID running/ID, CMD, touch done/ID, sync done/ID"},
	{"parallel", "GNU parallel --sqlworker -j1 workers on an SQLite table filled by parallel --sqlmaster (on the filesystem measured)"},
	{"loop", "`while lease run --next --complete -- CMD; do :; done` workers (issue 25's one-line worker)"},
}

// cell is every run of one system at one filesystem and worker count.
type cell struct {
	good, failed []result
	count        *result // the counting run (strace)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	if len(v)%2 == 0 {
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return v[len(v)/2]
}

func (c *cell) rate() float64 {
	var v []float64
	for _, r := range c.good {
		v = append(v, r.ItemsPerS)
	}
	return median(v)
}

func (c *cell) cpu() float64 {
	var v []float64
	for _, r := range c.good {
		v = append(v, r.CPUms)
	}
	return median(v)
}

// report writes worker-floor.md from raw.jsonl (one result a line) in dir.
func report(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "raw.jsonl"))
	if err != nil {
		return err
	}
	type key struct {
		fs      string
		workers int
	}
	cells := map[key]map[string]*cell{}
	var keys []key
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r result
		if json.Unmarshal([]byte(l), &r) != nil {
			continue
		}
		k := key{r.FS, r.Workers}
		if cells[k] == nil {
			cells[k] = map[string]*cell{}
			keys = append(keys, k)
		}
		c := cells[k][r.System]
		if c == nil {
			c = &cell{}
			cells[k][r.System] = c
		}
		switch {
		case r.Strace:
			rr := r
			c.count = &rr
		case r.Failed != "":
			c.failed = append(c.failed, r)
		default:
			c.good = append(c.good, r)
		}
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].fs != keys[b].fs {
			return keys[a].fs < keys[b].fs
		}
		return keys[a].workers < keys[b].workers
	})
	var b strings.Builder
	b.WriteString("# lease work against the floor and its peers (bench/worker)\n\n")
	for _, f := range []string{"machine.txt", "command.txt"} {
		if m, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			b.Write(bytes.TrimSpace(m))
			b.WriteString("\n\n")
		}
	}
	b.WriteString("Trivial items: every system runs the same command for each item, bench/workerfloor/logid (one exec, one O_APPEND write of the ID to a log outside the filesystem measured, no sync), and a run counts only if every item is in that log exactly once and the system's own state says all are done. Only the work phase is timed (all workers started at once, until the last exits); the systems are interleaved in every repetition. Items/s and CPU are medians of the good runs; CPU is user + system time of every descendant waited for (getrusage RUSAGE_CHILDREN), per item; syncs an item are fsync + fdatasync + syncfs + sync_file_range + sync calls counted by `strace -f -c` in a separate counting run of the same cell.\n\n")
	ran := map[string]bool{}
	for _, cs := range cells {
		for name := range cs {
			ran[name] = true
		}
	}
	for _, s := range systems {
		if ran[s.name] {
			fmt.Fprintf(&b, "- **%s**: %s\n", s.name, s.what)
		}
	}
	b.WriteString("\n| fs | workers | floor items/s | lease work items/s | lease ÷ floor | floor CPU ms/item | lease CPU ms/item | CPU lease ÷ floor | syncs/item floor, lease | best peer items/s |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	num := func(c *cell, f func(*cell) float64, format string) string {
		if c == nil || len(c.good) == 0 {
			if c != nil && len(c.failed) > 0 {
				return "failed"
			}
			return "–"
		}
		return fmt.Sprintf(format, f(c))
	}
	syncs := func(c *cell) string {
		if c == nil || c.count == nil {
			return "–"
		}
		if c.count.Failed != "" {
			return "failed"
		}
		return fmt.Sprintf("%.2f", c.count.Syncs)
	}
	ratio := func(a, b *cell, f func(*cell) float64) string {
		if a == nil || b == nil || len(a.good) == 0 || len(b.good) == 0 || f(b) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", f(a)/f(b))
	}
	for _, k := range keys {
		cs := cells[k]
		fl, wk := cs["floor"], cs["work"]
		best, bestRate := "–", 0.0
		for _, p := range []string{"flock", "parallel"} {
			if c := cs[p]; c != nil && len(c.good) > 0 && c.rate() > bestRate {
				best, bestRate = fmt.Sprintf("%s %.1f", p, c.rate()), c.rate()
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s, %s | %s |\n", k.fs, k.workers,
			num(fl, (*cell).rate, "%.1f"), num(wk, (*cell).rate, "%.1f"), ratio(wk, fl, (*cell).rate),
			num(fl, (*cell).cpu, "%.2f"), num(wk, (*cell).cpu, "%.2f"), ratio(wk, fl, (*cell).cpu),
			syncs(fl), syncs(wk), best)
	}
	b.WriteString("\nEvery system, with each run's items/s (a failed run is left out of the median and named below):\n\n")
	b.WriteString("| fs | workers | system | items/s | runs | CPU ms/item | syncs/item (strace) | sync calls in the counting run |\n")
	b.WriteString("| --- | ---: | --- | ---: | --- | ---: | ---: | --- |\n")
	var failures []string
	for _, k := range keys {
		for _, s := range systems {
			c := cells[k][s.name]
			if c == nil {
				continue
			}
			var runs []string
			for _, r := range c.good {
				runs = append(runs, fmt.Sprintf("%.1f", r.ItemsPerS))
			}
			for _, r := range c.failed {
				runs = append(runs, "failed")
				failures = append(failures, fmt.Sprintf("- %s, %d workers, %s (%d items): %s", k.fs, k.workers, s.name, r.Items, r.Failed))
			}
			if c.count != nil && c.count.Failed != "" {
				failures = append(failures, fmt.Sprintf("- %s, %d workers, %s, counting run (%d items): %s", k.fs, k.workers, s.name, c.count.Items, c.count.Failed))
			}
			calls := "–"
			if c.count != nil && len(c.count.Calls) > 0 {
				var cl []string
				for _, name := range syncCalls {
					if n := c.count.Calls[name]; n > 0 {
						cl = append(cl, fmt.Sprintf("%s %d", name, n))
					}
				}
				calls = fmt.Sprintf("%s (%d items)", strings.Join(cl, ", "), c.count.Items)
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", k.fs, k.workers, s.name,
				num(c, (*cell).rate, "%.1f"), strings.Join(runs, ", "), num(c, (*cell).cpu, "%.2f"), syncs(c), calls)
		}
	}
	if len(failures) > 0 {
		b.WriteString("\nFailed runs (an item lost or run twice, or a worker failed; not timed):\n\n")
		b.WriteString(strings.Join(failures, "\n") + "\n")
	}
	if pngs, _ := filepath.Glob(filepath.Join(dir, "worker-floor-*.png")); len(pngs) > 0 {
		b.WriteString("\nItems/s against workers (bench/plot --worker):\n\n")
		for _, p := range pngs {
			fmt.Fprintf(&b, "![%s](%s)\n", filepath.Base(p), filepath.Base(p))
		}
	}
	b.WriteString("\nRaw results: raw.jsonl beside this page (one JSON object a run, with the load average when it ended).\n")
	return os.WriteFile(filepath.Join(dir, "worker-floor.md"), []byte(b.String()), 0o644)
}
