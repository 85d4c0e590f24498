// Command takeover measures issue 36's takeover latency: how long after a
// killed holder's lease can be taken over (expires_at + clock_skew) its
// item is claimed again, in a campaign of `lease work` workers whose
// process groups are killed with SIGKILL one at a time.
//
//	takeover --lease NAME=BIN[,NAME=BIN...] --dir DIR [--items 10000 --workers 8 --ttl 5
//	         --clock-skew 1 --kill-every 3s --kills 60 --item-seconds 0.5 --settle 60s]
//
// For each binary, in the order given, it makes a table in DIR/NAME, adds
// the items, starts the workers (each in its own process group, owner
// wN), and every --kill-every kills one worker's process group and starts
// another. The item command appends its record, as read when it starts,
// to a log, so the log has every claim's token and claimed_at. At a kill
// the killed worker's item (the last it logged) is read: still leased by
// it, it is abandoned with that token and expires_at. After the kills it
// waits up to --settle for the abandoned items to be claimed again; an
// item not claimed by then counts as taken over at the end of the wait (a
// lower bound, flagged "censored"). It prints one JSON object per binary:
// p50, p90, p99 and max of claimed_at(token+1) - (expires_at + clock_skew)
// and the load average.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

type record struct {
	ID        string  `json:"id"`
	Status    string  `json:"status"`
	Owner     string  `json:"owner"`
	Token     int64   `json:"token"`
	ClaimedAt float64 `json:"claimed_at"`
	ExpiresAt float64 `json:"expires_at"`
}

type abandoned struct {
	id      string
	token   int64
	expires float64
}

type result struct {
	Binary    string    `json:"binary"`
	Items     int       `json:"items"`
	Workers   int       `json:"workers"`
	TTL       float64   `json:"ttl"`
	Kills     int       `json:"kills"`
	Abandoned int       `json:"abandoned"`
	Censored  int       `json:"censored"`
	P50       float64   `json:"p50_s"`
	P90       float64   `json:"p90_s"`
	P99       float64   `json:"p99_s"`
	Max       float64   `json:"max_s"`
	Latencies []float64 `json:"latencies_s,omitempty"`
	Load      string    `json:"load_average"`
}

func main() {
	leases := flag.String("lease", "", "NAME=BIN[,NAME=BIN...]: the lease binaries to measure, in order")
	dir := flag.String("dir", "", "an empty directory for the tables")
	items := flag.Int("items", 10000, "items queued")
	workers := flag.Int("workers", 8, "lease work workers")
	ttl := flag.Float64("ttl", 5, "lease TTL in seconds")
	skew := flag.Float64("clock-skew", 1, "clock_skew in seconds")
	every := flag.Duration("kill-every", 3*time.Second, "time between kills")
	kills := flag.Int("kills", 60, "kills")
	itemSec := flag.Float64("item-seconds", 0.5, "what one item's command takes")
	settle := flag.Duration("settle", 60*time.Second, "longest wait after the kills for the abandoned items")
	all := flag.Bool("all", false, "print every latency")
	flag.Parse()
	if *leases == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: takeover --lease NAME=BIN[,...] --dir DIR [flags]")
		os.Exit(2)
	}
	for _, nb := range strings.Split(*leases, ",") {
		name, bin, ok := strings.Cut(nb, "=")
		if !ok {
			fmt.Fprintln(os.Stderr, "takeover: --lease wants NAME=BIN")
			os.Exit(2)
		}
		c := campaign{name: name, bin: bin, dir: filepath.Join(*dir, name), items: *items, workers: *workers,
			ttl: *ttl, skew: *skew, every: *every, kills: *kills, itemSec: *itemSec, settle: *settle}
		r, err := c.run()
		if err != nil {
			fmt.Fprintf(os.Stderr, "takeover: %s: %v\n", name, err)
			os.Exit(1)
		}
		if !*all {
			r.Latencies = nil
		}
		out, _ := json.Marshal(r)
		fmt.Println(string(out))
	}
}

type campaign struct {
	name, bin, dir        string
	items, workers, kills int
	ttl, skew, itemSec    float64
	every, settle         time.Duration
	mu                    sync.Mutex
	procs                 map[string]*exec.Cmd
	next                  int
}

func (c *campaign) lease(args ...string) error {
	cmd := exec.Command(c.bin, append([]string{args[0], "--root", filepath.Join(c.dir, "table")}, args[1:]...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("lease %s: %v: %s", args[0], err, out)
	}
	return nil
}

func (c *campaign) start() error {
	owner := fmt.Sprintf("w%d", c.next)
	c.next++
	script := fmt.Sprintf(`cat "$LEASE_ROOT"/work/*/"$LEASE_ID".json >> %s; sleep %g`, filepath.Join(c.dir, "claims.log"), c.itemSec)
	cmd := exec.Command(c.bin, "work", "--root", filepath.Join(c.dir, "table"), "--owner", owner,
		"--ttl", fmt.Sprint(c.ttl), "--clock-skew", fmt.Sprint(c.skew), "--", "sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait()
	c.procs[owner] = cmd
	return nil
}

// claims reads the log: every claim's record, by ID.
func (c *campaign) claims() map[string][]record {
	out := map[string][]record{}
	f, err := os.Open(filepath.Join(c.dir, "claims.log"))
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<16)
	for sc.Scan() {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out[r.ID] = append(out[r.ID], r)
		}
	}
	return out
}

// lastOf is the ID of the last claim owner logged.
func (c *campaign) lastOf(owner string) string {
	f, err := os.Open(filepath.Join(c.dir, "claims.log"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<16)
	id := ""
	for sc.Scan() {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Owner == owner {
			id = r.ID
		}
	}
	return id
}

func (c *campaign) readRecord(id string) (record, error) {
	var r record
	m, _ := filepath.Glob(filepath.Join(c.dir, "table", "work", "*", id+".json"))
	if len(m) != 1 {
		return r, fmt.Errorf("no record of %s", id)
	}
	data, err := os.ReadFile(m[0])
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(data, &r)
}

func (c *campaign) run() (*result, error) {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	if err := c.lease("init", "--shards", "16"); err != nil {
		return nil, err
	}
	var ids strings.Builder
	for i := 0; i < c.items; i++ {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", c.name, i)))
		ids.WriteString(hex.EncodeToString(sum[:]) + "\n")
	}
	idFile := filepath.Join(c.dir, "ids")
	if err := os.WriteFile(idFile, []byte(ids.String()), 0o644); err != nil {
		return nil, err
	}
	if err := c.lease("add", idFile); err != nil {
		return nil, err
	}
	c.procs = map[string]*exec.Cmd{}
	for i := 0; i < c.workers; i++ {
		if err := c.start(); err != nil {
			return nil, err
		}
	}
	defer func() {
		for _, p := range c.procs {
			syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		}
	}()
	rnd := rand.New(rand.NewPCG(1, 2))
	var lost []abandoned
	time.Sleep(c.every)
	for k := 0; k < c.kills; k++ {
		owners := make([]string, 0, len(c.procs))
		for o := range c.procs {
			owners = append(owners, o)
		}
		sort.Strings(owners)
		victim := owners[rnd.IntN(len(owners))]
		p := c.procs[victim]
		syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		delete(c.procs, victim)
		time.Sleep(50 * time.Millisecond) // its last write, if any, is over
		if id := c.lastOf(victim); id != "" {
			if r, err := c.readRecord(id); err == nil && r.Status == "leased" && r.Owner == victim {
				lost = append(lost, abandoned{id: id, token: r.Token, expires: r.ExpiresAt})
			}
		}
		if err := c.start(); err != nil {
			return nil, err
		}
		time.Sleep(c.every)
	}
	end := time.Now().Add(c.settle)
	var lat []float64
	censored := 0
	for {
		lat, censored = c.latencies(lost, float64(time.Now().UnixMicro())/1e6)
		if censored == 0 || time.Now().After(end) {
			break
		}
		time.Sleep(time.Second)
	}
	sort.Float64s(lat)
	load, _ := os.ReadFile("/proc/loadavg")
	r := &result{Binary: c.name, Items: c.items, Workers: c.workers, TTL: c.ttl, Kills: c.kills, Abandoned: len(lost),
		Censored: censored, Latencies: lat, Load: strings.Join(strings.Fields(string(load))[:3], " ")}
	r.P50, r.P90, r.P99, r.Max = pct(lat, 0.5), pct(lat, 0.9), pct(lat, 0.99), pct(lat, 1)
	return r, nil
}

// latencies: per abandoned item, its next claim's claimed_at - (expires_at
// + skew); an item not claimed again yet counts until now (censored).
func (c *campaign) latencies(lost []abandoned, now float64) ([]float64, int) {
	cl := c.claims()
	var out []float64
	censored := 0
	for _, a := range lost {
		t := math.NaN()
		for _, r := range cl[a.id] {
			if r.Token == a.token+1 {
				t = r.ClaimedAt
			}
		}
		if math.IsNaN(t) {
			censored++
			t = now
		}
		out = append(out, t-(a.expires+c.skew))
	}
	return out, censored
}

func pct(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	return math.Round(s[i]*1000) / 1000
}
