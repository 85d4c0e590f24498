//go:build linux

// Command guest is the workload of internal/powercut's power cuts: one Go
// process in the User-Mode Linux guest that runs lease's command line
// in-process (commands.Run, a fresh app per operation: exactly the code
// paths of the lease binary, without the half second a process start costs
// in a UML guest) against a table on the image, and reports each
// acknowledged operation on the console only after the command returned
// success. The line protocol is internal/powercut's (workload.go), which
// parses it on the host.
//
// It runs until the kernel is cut (or until -ops operations ran, for a run
// on the host that checks the protocol without a cut).
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/internal/proctree"
)

type guest struct {
	root    string
	owner   []string // --owner ... --lock-timeout ...
	seed    int64
	batch   int
	claimT  string
	renewT  string
	rng     *rand.Rand
	console *os.File
	n       int // operations run, for unique names

	held     []string   // "ID TOKEN" lines of the renewed pool, in claim order
	released [][]string // target lists of groups acknowledged released
	lastAck  int64      // UnixMicro after the last renew-batch returned
	renewDur time.Duration
	timing   bool
}

func main() {
	dev := flag.String("dev", "", "block device to mount on the table's parent (none: -root is used as it is)")
	fstype := flag.String("fstype", "", "filesystem type of -dev")
	opts := flag.String("o", "", "mount options of -dev")
	mnt := flag.String("mnt", "/run/d", "mount point of -dev")
	root := flag.String("root", "", "the table (default MNT/t)")
	console := flag.String("console", "/dev/console", "where acknowledgements are written")
	seed := flag.Int64("seed", 1, "seed of the operations' choice and of the names")
	batch := flag.Int("batch", 300, "leases held and renewed by every renew-batch")
	shards := flag.Int("shards", 16, "work shards of the table")
	claimTTL := flag.Int("claim-ttl", 100000, "TTL of claims")
	renewTTL := flag.Int("renew-ttl", 200000, "TTL of renewals")
	ops := flag.Int("ops", 0, "stop after this many operations after the setup (0: run until cut)")
	pool := flag.String("pool", "", "a table exists: hold the ID TOKEN lines of this file (- for stdin) as the pool instead of making the table and claiming it")
	timing := flag.Bool("timing", false, "write each operation's duration on the console (TIME OP SECONDS)")
	flag.Parse()
	// lease work's supervisor is this binary started again: proctree's
	// init took it over before main. As the lease binary does, adopt a
	// dead supervisor's orphans.
	proctree.AdoptOrphans()
	con, err := os.OpenFile(*console, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "guest:", err)
		os.Exit(1)
	}
	g := &guest{root: *root, seed: *seed, batch: *batch, claimT: strconv.Itoa(*claimTTL), renewT: strconv.Itoa(*renewTTL),
		rng: rand.New(rand.NewSource(*seed)), console: con, timing: *timing,
		owner: []string{"--owner", "pc", "--lock-timeout", "60"}}
	if *dev != "" {
		if err := os.MkdirAll(*mnt, 0o755); err != nil {
			g.fail("mkdir-mnt", err.Error())
		}
		if err := syscall.Mount(*dev, *mnt, *fstype, 0, *opts); err != nil {
			g.fail("mount", err.Error())
		}
	}
	if g.root == "" {
		g.root = filepath.Join(*mnt, "t")
	}
	if err := os.Chdir("/"); err != nil { // no ./lease.toml
		g.fail("chdir", err.Error())
	}
	if *pool != "" {
		b, err := os.ReadFile(*pool)
		if *pool == "-" {
			b, err = io.ReadAll(os.Stdin)
		}
		if err != nil {
			g.fail("pool", err.Error())
		}
		g.held = lines(string(b))
	} else {
		g.setup(*shards)
	}
	for i := 0; *ops == 0 || i < *ops; i++ {
		g.step()
	}
}

// ack reports lines (each "ACK ...") in one write to the console.
func (g *guest) ack(lines ...string) {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if _, err := g.console.WriteString(b.String()); err != nil {
		fmt.Fprintln(os.Stderr, "guest: console:", err)
		os.Exit(1)
	}
}

func (g *guest) fail(what, detail string) {
	if len(detail) > 300 {
		detail = detail[len(detail)-300:]
	}
	g.console.WriteString("PCFAIL " + what + " " + strings.ReplaceAll(detail, "\n", " | ") + "\n")
	os.Exit(1)
}

// lease runs the lease command line in-process and returns its stdout,
// stderr and exit status.
func (g *guest) lease(stdin string, args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	t0 := time.Now()
	code := commands.Run(append([]string{"lease"}, args...), strings.NewReader(stdin), &out, &errb)
	if g.timing {
		fmt.Fprintf(g.console, "TIME %s %.3f\n", args[0], time.Since(t0).Seconds())
	}
	return out.String(), errb.String(), code
}

// must runs lease and fails the workload unless it exits 0.
func (g *guest) must(what, stdin string, args ...string) string {
	out, errs, code := g.lease(stdin, args...)
	if code != 0 {
		g.fail(what, fmt.Sprintf("exit %d: %s", code, errs))
	}
	return out
}

func (g *guest) id(name string) string {
	s := sha256.Sum256([]byte(name))
	return hex.EncodeToString(s[:])
}

func (g *guest) name(kind string) string {
	g.n++
	return fmt.Sprintf("%s-%d-%d", kind, g.seed, g.n)
}

func lines(s string) []string {
	var l []string
	for _, x := range strings.Split(s, "\n") {
		if x = strings.TrimSpace(x); x != "" {
			l = append(l, x)
		}
	}
	return l
}

func (g *guest) setup(shards int) {
	g.must("init", "", "init", "--root", g.root, "--shards", strconv.Itoa(shards))
	g.ack("ACK init")
	g.hold(g.batch)
}

// hold adds n new items and claims them with --next into the pool that
// every renew-batch renews.
func (g *guest) hold(n int) {
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, g.id(g.name("b")))
	}
	g.add(ids)
	out := g.must("claim-next", "", append(append([]string{"claim", "--root", g.root}, g.owner...), "--ttl", g.claimT, "--next", strconv.Itoa(n))...)
	var acks []string
	for _, l := range lines(out) {
		acks = append(acks, "ACK hold "+l)
		g.held = append(g.held, l)
	}
	g.ack(acks...)
}

func (g *guest) add(ids []string) {
	out := g.must("add", strings.Join(ids, "\n")+"\n", "add", "--root", g.root, "-")
	var acks []string
	for _, l := range lines(out) {
		acks = append(acks, "ACK add "+l)
	}
	g.ack(acks...)
}

func (g *guest) claim(kind string) (id, token string) {
	id = g.id(g.name(kind))
	out := g.must("claim", "", append(append([]string{"claim", "--root", g.root}, g.owner...), "--ttl", g.claimT, id)...)
	f := strings.Fields(out)
	if len(f) != 2 || f[0] != id {
		g.fail("claim", "output "+out)
	}
	g.ack("ACK claim " + f[0] + " " + f[1])
	return id, f[1]
}

// renew renews the whole pool in one renew-batch, between RENEW-START and
// its acknowledgement. T0 (microseconds, printed as seconds) is taken after
// the previous renew-batch's acknowledgement and before this one starts:
// each record this batch renews expires at >= T0+TTL, each one the previous
// batches renewed before T0+TTL.
func (g *guest) renew() {
	t0 := time.Now().UnixMicro()
	for t0 <= g.lastAck {
		time.Sleep(time.Millisecond)
		t0 = time.Now().UnixMicro()
	}
	held := strings.Join(g.held, "\n") + "\n"
	g.ack(fmt.Sprintf("RENEW-START %d.%06d %d", t0/1e6, t0%1e6, len(g.held)))
	out := g.must("renew-batch", held, append(append([]string{"renew-batch", "--root", g.root}, g.owner...), "--ttl", g.renewT)...)
	if n := len(lines(out)); n != len(g.held) {
		g.fail("renew-batch", fmt.Sprintf("%d of %d renewed", n, len(g.held)))
	}
	g.lastAck = time.Now().UnixMicro()
	g.renewDur = time.Duration(g.lastAck-t0) * time.Microsecond
	g.ack(fmt.Sprintf("ACK renew %d.%06d", t0/1e6, t0%1e6))
}

// step runs a renew-batch once the other operations ran as long as the
// last renew-batch took (so that a cut at a random moment lands inside a
// renew-batch about half of the time), else one other operation chosen at
// random; first it tops the pool up to its size.
func (g *guest) step() {
	if len(g.held) < g.batch {
		g.hold(g.batch - len(g.held) + 16)
		return
	}
	if time.Since(time.UnixMicro(g.lastAck)) >= g.renewDur {
		g.renew()
		return
	}
	switch r := g.rng.Intn(100); {
	case r < 25:
		g.claim("c")
	case r < 45:
		g.publish()
	case r < 62:
		g.complete()
	case r < 80:
		g.group()
	case r < 88:
		g.add([]string{g.id(g.name("a")), g.id(g.name("a"))})
	case r < 94:
		g.work()
	default:
		g.fsck()
	}
}

// publish claims an item, stages random bytes in its stage directory and
// completes it with --publish.
func (g *guest) publish() {
	id, tok := g.claim("p")
	d := filepath.Join(g.root, "stage", id+"."+tok)
	if err := os.Mkdir(d, 0o700); err != nil {
		g.fail("mkdir-stage", err.Error())
	}
	b := make([]byte, (g.rng.Intn(7)+1)*4096)
	g.rng.Read(b)
	if err := os.WriteFile(filepath.Join(d, "res"), b, 0o644); err != nil {
		g.fail("stage", err.Error())
	}
	g.must("publish", id+" "+tok+"\n", append(append([]string{"complete", "--root", g.root}, g.owner...), "--publish", d)...)
	s := sha256.Sum256(b)
	g.ack(fmt.Sprintf("ACK publish %s %s %s %d", id, tok, hex.EncodeToString(s[:]), len(b)))
}

// complete completes the oldest 7 leases of the pool.
func (g *guest) complete() {
	n := min(7, len(g.held))
	c := strings.Join(g.held[:n], "\n") + "\n"
	out := g.must("complete", c, append([]string{"complete", "--root", g.root}, g.owner...)...)
	var acks []string
	for _, l := range lines(out) {
		acks = append(acks, "ACK done "+l)
	}
	if len(acks) != n {
		g.fail("complete", fmt.Sprintf("%d of %d completed: %s", len(acks), n, out))
	}
	g.ack(acks...)
	g.held = g.held[n:]
}

// group claims a group of 3 targets (new ones, or those of a group it
// released: the same group again, with a larger token) and releases it
// half of the time.
func (g *guest) group() {
	var targets []string
	if len(g.released) > 0 && g.rng.Intn(2) == 0 {
		i := g.rng.Intn(len(g.released))
		targets = g.released[i]
		g.released = append(g.released[:i], g.released[i+1:]...)
	} else {
		for i := 0; i < 3; i++ {
			targets = append(targets, g.id(g.name("t")))
		}
	}
	out := g.must("group-claim", "", append(append(append([]string{"group-claim", "--root", g.root}, g.owner...), "--ttl", g.claimT), targets...)...)
	if len(strings.Fields(out)) != 2 {
		g.fail("group-claim", "output "+out)
	}
	g.ack("ACK group " + strings.TrimSpace(out))
	if g.rng.Intn(2) == 0 {
		out = g.must("group-release", out, append([]string{"group-release", "--root", g.root}, g.owner...)...)
		g.ack("ACK group-release " + strings.TrimSpace(out))
		g.released = append(g.released, targets)
	}
}

// work adds an item and runs lease work for one item: its command (one
// sh) writes the item's ID to LEASE_STAGE/out, which lease work publishes.
func (g *guest) work() {
	g.add([]string{g.id(g.name("w"))})
	_, errs, code := g.lease("", "work", "--root", g.root, "--owner", "w", "--ttl", g.claimT, "--json", "--max-items", "1",
		"--", "sh", "-c", `echo "$LEASE_ID" > "$LEASE_STAGE/out"`)
	if code != 0 {
		g.fail("work", fmt.Sprintf("exit %d: %s", code, errs))
	}
	for _, l := range lines(errs) {
		var item struct {
			ID     string `json:"id"`
			Token  int64  `json:"token"`
			Finish string `json:"finish"`
		}
		if json.Unmarshal([]byte(l), &item) == nil && item.ID != "" && item.Finish == "done" {
			g.ack(fmt.Sprintf("ACK work %s %d", item.ID, item.Token))
		}
	}
}

func (g *guest) fsck() {
	out, errs, code := g.lease("", "fsck", "--root", g.root, "--repair")
	if code > 1 {
		g.fail("fsck-repair", fmt.Sprintf("exit %d: %s%s", code, out, errs))
	}
	g.ack(fmt.Sprintf("ACK fsck %d", code))
}
