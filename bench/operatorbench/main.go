// Command operatorbench builds the tables of issue 26's operator benchmark
// (bench/operator) and times commands on them.
//
//	operatorbench gen --root DIR --done N --failed N --leased N --released N --free N [--unmarked]
//	    fills DIR, a table made by lease init, with items in those states:
//	    records written directly in lease's canonical form (no fsync; one
//	    sync(2) at the end), each done or failed record linked to its status
//	    marker ID.STATUS.ATTEMPTS as lease complete and lease work make it
//	    (--unmarked: none, as a program that knows nothing of markers
//	    leaves them), a queue entry for every item not done or failed.
//	operatorbench time --reps R -- CMD ARGS...
//	    runs CMD R times; one JSON object: wall ms per run (min, median),
//	    the largest peak RSS of a run (KiB).
package main

import (
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
	"sync"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: operatorbench gen|time ...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "gen":
		gen(os.Args[2:])
	case "time":
		timeCmd(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "operatorbench: unknown command", os.Args[1])
		os.Exit(2)
	}
}

// ID is item i's ID: the SHA-256 of "item-i".
func ID(i int) string {
	s := sha256.Sum256([]byte("item-" + strconv.Itoa(i)))
	return hex.EncodeToString(s[:])
}

func gen(args []string) {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	root := fs.String("root", "", "table root (made by lease init)")
	done := fs.Int("done", 0, "done items")
	failed := fs.Int("failed", 0, "failed items (3 attempts)")
	leased := fs.Int("leased", 0, "items leased, live for a day")
	released := fs.Int("released", 0, "released items with one failed run")
	free := fs.Int("free", 0, "queued items never claimed")
	unmarked := fs.Bool("unmarked", false, "make no status markers")
	noTally := fs.Bool("no-tally", false, "make no links in the tally (and remove tally/TRUSTED)")
	span := fs.Duration("span", 48*time.Hour, "the finished items finished evenly over this span before now (their renewed_at)")
	fs.Parse(args)
	var hdr struct {
		WorkShards int `json:"work_shards"`
	}
	data, err := os.ReadFile(filepath.Join(*root, "TABLE"))
	if err == nil {
		err = json.Unmarshal(data, &hdr)
	}
	if err != nil || hdr.WorkShards < 1 {
		fmt.Fprintln(os.Stderr, "operatorbench gen: no table at", *root, err)
		os.Exit(2)
	}
	width := max(2, len(strconv.FormatInt(int64(hdr.WorkShards-1), 16)))
	shard := func(id string) string {
		v, _ := strconv.ParseUint(id[:8], 16, 64)
		return fmt.Sprintf("%0*x", width, v%uint64(hdr.WorkShards))
	}
	for sh := range hdr.WorkShards {
		for _, d := range []string{"work", "queue"} {
			os.MkdirAll(filepath.Join(*root, d, fmt.Sprintf("%0*x", width, sh)), 0o755)
		}
	}
	now := float64(time.Now().Unix())
	type kind struct {
		n        int
		status   string
		attempts int
		queued   bool
		record   bool
	}
	kinds := []kind{{*done, "done", 0, false, true}, {*failed, "failed", 3, false, true}, {*leased, "leased", 0, true, true},
		{*released, "released", 1, true, true}, {*free, "", 0, true, false}}
	type job struct {
		i int
		k kind
	}
	finished := max(1, *done+*failed)
	if *noTally {
		os.Remove(filepath.Join(*root, "tally", "TRUSTED"))
	}
	jobs := make(chan job, 1024)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				fin := now - 200
				if j.k.status == "done" || j.k.status == "failed" {
					fin = now - span.Seconds()*(1-float64(j.i)/float64(finished))
				}
				if err := genOne(*root, shard, j.i, j.k.status, j.k.attempts, j.k.queued, j.k.record, !*unmarked, !*noTally, now, fin); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		}()
	}
	i := 0
	for _, k := range kinds {
		for range k.n {
			jobs <- job{i, k}
			i++
		}
	}
	close(jobs)
	wg.Wait()
	syscall.Sync()
	if firstErr != nil {
		fmt.Fprintln(os.Stderr, "operatorbench gen:", firstErr)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "operatorbench gen: %d items\n", i)
}

func genOne(root string, shard func(string) string, i int, status string, attempts int, queued, record, mark, tally bool, now, fin float64) error {
	id := ID(i)
	sh := shard(id)
	if queued {
		f, err := os.OpenFile(filepath.Join(root, "queue", sh, id), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	if !record {
		return nil
	}
	exp := now + 86400
	if status != "leased" {
		exp = now - 100
	}
	extra := ""
	if attempts > 0 {
		extra = fmt.Sprintf(`,"attempts":%d`, attempts)
		if status == "failed" {
			extra += `,"exit_status":1`
		}
	}
	rec := fmt.Sprintf(`{"schema":"lease.work/v1","id":"%s","status":"%s","owner":"bench-%d","token":1,"claimed_at":%.0f,"renewed_at":%.0f,"expires_at":%.0f%s}`+"\n",
		id, status, i%64, min(now-200, fin-10), fin, exp, extra)
	p := filepath.Join(root, "work", sh, id+".json")
	if err := os.WriteFile(p, []byte(rec), 0o644); err != nil {
		return err
	}
	if status != "done" && status != "failed" {
		return nil
	}
	name := fmt.Sprintf("%s.%s.%d", id, status, attempts)
	if mark {
		if err := os.Link(p, filepath.Join(root, "work", sh, name)); err != nil {
			return err
		}
	}
	if tally {
		// As the engine links it: tally/B/, B the renewed_at rounded down
		// to 300 s (commit/tally.go).
		b := filepath.Join(root, "tally", strconv.FormatInt(int64(fin)/300*300, 10))
		if err := os.MkdirAll(b, 0o755); err != nil {
			return err
		}
		return os.Link(p, filepath.Join(b, name))
	}
	return nil
}

func timeCmd(args []string) {
	fs := flag.NewFlagSet("time", flag.ExitOnError)
	reps := fs.Int("reps", 3, "runs")
	fs.Parse(args)
	cmdArgs := fs.Args()
	if len(cmdArgs) > 0 && cmdArgs[0] == "--" {
		cmdArgs = cmdArgs[1:]
	}
	var ms []float64
	var rss int64
	for range *reps {
		c := exec.Command(cmdArgs[0], cmdArgs[1:]...)
		c.Stderr = os.Stderr
		t0 := time.Now()
		out, err := c.Output()
		el := time.Since(t0)
		if err != nil {
			fmt.Fprintf(os.Stderr, "operatorbench time: %v: %v\n%s\n", cmdArgs, err, out)
			os.Exit(1)
		}
		ms = append(ms, float64(el.Microseconds())/1000)
		if u, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss = max(rss, u.Maxrss)
		}
	}
	sort.Float64s(ms)
	json.NewEncoder(os.Stdout).Encode(map[string]any{"cmd": cmdArgs, "ms": ms, "min_ms": ms[0], "median_ms": ms[len(ms)/2], "max_rss_kib": rss})
}
