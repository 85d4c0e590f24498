package safety

// Histories of real lease processes (some paused past their TTL, some
// killed) checked for linearizability with porcupine against the model in
// leasemodel_test.go.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// jsonReport is what --json prints.
type jsonReport struct {
	Results []struct {
		ID           string `json:"id"`
		OK           bool   `json:"ok"`
		Reason       string `json:"reason"`
		CurrentToken int64  `json:"current_token"`
	} `json:"results"`
	Exit int `json:"exit"`
}

// workload runs the clients and returns the history.
type workload struct {
	bin, root string
	ttl       float64
	ids       []leasefmt.ID
	start     time.Time
	ops       atomic.Int64
	pauses    atomic.Int64
	kills     atomic.Int64
	mu        sync.Mutex
	history   []porcupine.Operation
	problems  []string
	published int
	next      int // the last ID index handed out
	used      int // IDs retired (done)
}

// run starts one lease process for in, maybe pauses it past the TTL or
// kills it, and records the operation.
func (w *workload) run(client int, rng *rand.Rand, in leaseInput, stdin string) leaseOutput {
	args := []string{"--root", w.root, "--owner", in.Owner, "--now", strconv.FormatFloat(in.Now, 'f', 6, 64),
		"--lock-timeout", "30", "--clock-skew", "0", "--json"}
	switch in.Op {
	case "claim":
		args = append([]string{"claim"}, append(args, "--ttl", strconv.FormatFloat(in.TTL, 'f', 3, 64), string(in.ID))...)
	case "renew":
		args = append([]string{"renew-batch", "--ttl", strconv.FormatFloat(in.TTL, 'f', 3, 64)}, args...)
	case "publish":
		args = append([]string{"complete", "--publish", in.Publish}, args...)
	default:
		args = append([]string{in.Op}, args...)
	}
	cmd := exec.Command(w.bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	call := time.Since(w.start).Nanoseconds()
	if err := cmd.Start(); err != nil {
		w.problem("start: %v", err)
		return leaseOutput{Unknown: true}
	}
	switch p := rng.IntN(100); {
	case p < 4: // pause it past the TTL, mid-operation
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		if cmd.Process.Signal(syscall.SIGSTOP) == nil {
			w.pauses.Add(1)
			time.Sleep(time.Duration((w.ttl*1.2+rng.Float64()*w.ttl)*1e9) * time.Nanosecond)
			if p == 0 { // and kill it while paused
				cmd.Process.Signal(syscall.SIGKILL)
				w.kills.Add(1)
			}
			cmd.Process.Signal(syscall.SIGCONT)
		}
	case p < 8: // kill -9 it, mid-operation
		time.Sleep(time.Duration(rng.IntN(6000)) * time.Microsecond)
		if cmd.Process.Signal(syscall.SIGKILL) == nil {
			w.kills.Add(1)
		}
	}
	err := cmd.Wait()
	ret := time.Since(w.start).Nanoseconds()
	o := leaseOutput{}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		o.Unknown = true
	} else {
		// it finished before any signal: its answer stands
		var rep jsonReport
		if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil || len(rep.Results) != 1 {
			w.problem("%s %s: exit %v, unparsable output %q, stderr %q", in.Op, in.ID.Short(), err, out.String(), errb.String())
			o.Unknown = true
		} else {
			r := rep.Results[0]
			o.Reason = r.Reason
			if r.OK && in.Op == "claim" {
				o.Token = r.CurrentToken
			}
			switch rep.Exit {
			case 0, 1:
			default:
				w.problem("%s %s: exit %d (%s): %s", in.Op, in.ID.Short(), rep.Exit, r.Reason, errb.String())
			}
		}
	}
	w.ops.Add(1)
	w.mu.Lock()
	w.history = append(w.history, porcupine.Operation{ClientId: client, Input: in, Output: o, Call: call, Return: ret})
	w.mu.Unlock()
	return o
}

func (w *workload) problem(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.problems) < 20 {
		w.problems = append(w.problems, fmt.Sprintf(format, args...))
	}
}

// pick returns one of the active IDs.
func (w *workload) pick(rng *rand.Rand) leasefmt.ID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ids[rng.IntN(len(w.ids))]
}

// retire replaces a done ID by a fresh one, so the clients keep contending
// for live work.
func (w *workload) retire(id leasefmt.ID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, x := range w.ids {
		if x == id {
			w.next++
			w.ids[i] = TestID(1000 + w.next)
			w.used++
		}
	}
}

func wallNow() float64 { return float64(time.Now().UnixMicro()) / 1e6 }

// client loops: claim an ID, then renew, verify, complete or release it,
// or sit on it past its TTL, until the workload has enough operations.
func (w *workload) client(k int, want int64, deadline time.Time) {
	rng := rand.New(rand.NewPCG(uint64(k), 99))
	owner := fmt.Sprintf("client-%d", k)
	var held leasefmt.ID
	var tok int64
	for w.ops.Load() < want && time.Now().Before(deadline) {
		if held == "" {
			id := w.pick(rng)
			o := w.run(k, rng, leaseInput{Op: "claim", ID: id, Now: wallNow(), TTL: w.ttl, Owner: owner}, "")
			switch {
			case !o.Unknown && o.Reason == "ok":
				held, tok = id, o.Token
			case !o.Unknown && o.Reason == "done":
				w.retire(id)
			}
			continue
		}
		line := fmt.Sprintf("%s %d\n", held, tok)
		in := leaseInput{ID: held, Token: tok, TTL: w.ttl, Owner: owner}
		switch p := rng.IntN(100); {
		case p < 45:
			in.Op = "renew"
		case p < 70:
			in.Op = "verify"
		case p < 74:
			in.Op = "complete"
		case p < 80:
			in.Op = "publish"
			w.mu.Lock()
			w.published++
			in.Publish = fmt.Sprintf("result-%d-%d.bin", k, w.published)
			w.mu.Unlock()
			dir := filepath.Join(w.root, filepath.FromSlash(layout.StagePath(in.ID, in.Token)))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				w.problem("staging %s: %v", in.Publish, err)
			}
			if err := os.WriteFile(filepath.Join(dir, in.Publish), []byte(in.Publish+"\n"), 0o644); err != nil {
				w.problem("staging %s: %v", in.Publish, err)
			}
		case p < 88:
			in.Op = "release"
		default:
			// hold on past the TTL, then try to renew: another client may
			// have claimed it meanwhile
			time.Sleep(time.Duration(w.ttl*1.1*1e9) * time.Nanosecond)
			in.Op = "renew"
		}
		in.Now = wallNow()
		o := w.run(k, rng, in, line)
		if !o.Unknown && (in.Op == "complete" || in.Op == "publish") && (o.Reason == "ok" || o.Reason == "done") {
			w.retire(held)
		}
		if o.Unknown || o.Reason != "ok" || in.Op == "complete" || in.Op == "publish" || in.Op == "release" {
			held = ""
		}
	}
}

// TestLinearizability runs 8 clients, each running real lease processes
// (claim, renew-batch, verify, complete, release) against one table with
// a short TTL; some processes are paused with SIGSTOP past the TTL and
// some are killed with SIGKILL. The history must be linearizable under the
// model: per ID at most one live holder, tokens strictly increasing, a
// stale token never renews, completes or passes verify.
func TestLinearizability(t *testing.T) {
	t.Parallel()
	bin := leaseBinary(t)
	// The workload ends at want operations; limit only bounds a machine
	// too slow to get there (about 50 s on a quiet 2-core machine, 2–3
	// times that with other packages' tests beside it).
	want, limit, ttl := sized[int64](300, 1200, 5000), sized(8*time.Minute, 8*time.Minute, 10*time.Minute), 1.5
	w := &workload{bin: bin, root: filepath.Join(t.TempDir(), "table"), ttl: ttl, start: time.Now()}
	for i := 0; i < 12; i++ {
		w.ids = append(w.ids, TestID(1000+i))
	}
	w.next = 11
	if out, err := exec.Command(bin, "init", "--root", w.root, "--shards", "4").CombinedOutput(); err != nil {
		t.Fatalf("lease init: %v\n%s", err, out)
	}
	deadline := time.Now().Add(limit)
	var wg sync.WaitGroup
	for k := 0; k < 8; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.client(k, want, deadline)
		}()
	}
	wg.Wait()
	for _, p := range w.problems {
		t.Error(p)
	}
	// A publish that reported success is in public/; one refused (a stale
	// or expired token) published nothing.
	publishes, refused := 0, 0
	for _, op := range w.history {
		in, o := op.Input.(leaseInput), op.Output.(leaseOutput)
		if in.Op != "publish" || o.Unknown {
			continue
		}
		publishes++
		_, err := os.Stat(filepath.Join(w.root, "public", in.Publish))
		switch {
		case o.Reason == "ok" && err != nil:
			t.Errorf("publish %s by %s (token %d) reported ok, but public/%s: %v", in.ID.Short(), in.Owner, in.Token, in.Publish, err)
		case o.Reason != "ok" && err == nil:
			t.Errorf("publish %s by %s (token %d) refused (%s), but public/%s exists", in.ID.Short(), in.Owner, in.Token, o.Reason, in.Publish)
		case o.Reason != "ok":
			refused++
		}
	}
	unknown := 0
	for _, op := range w.history {
		if op.Output.(leaseOutput).Unknown {
			unknown++
		}
	}
	model := leaseModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, w.history, 60*time.Second)
	counts := map[string]int{}
	for _, op := range w.history {
		in, o := op.Input.(leaseInput), op.Output.(leaseOutput)
		r := o.Reason
		if o.Unknown {
			r = "unknown"
		}
		counts[in.Op+" "+r]++
	}
	var summary []string
	for k, n := range counts {
		summary = append(summary, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(summary)
	t.Logf("history: %d operations from 8 clients on %d IDs (12 at a time), %d paused past the TTL (%.1fs), %d killed, %d with unknown outcome; %d publishes checked (%d refused); porcupine: %s\noutcomes: %s",
		len(w.history), len(w.ids)+w.used, w.pauses.Load(), ttl, w.kills.Load(), unknown, publishes, refused, res, strings.Join(summary, " "))
	if res != porcupine.Ok {
		f := filepath.Join(os.TempDir(), "lease-linearizability.html")
		if out, err := os.Create(f); err == nil {
			porcupine.Visualize(model, info, out)
			out.Close()
			t.Logf("visualization: %s", f)
		}
		t.Fatalf("history is %s under the lease model", res)
	}
	if len(w.history) < 1000 && !isSample() {
		t.Errorf("only %d operations in %v; want at least 1000", len(w.history), limit)
	}
	if w.pauses.Load() == 0 || w.kills.Load() == 0 {
		t.Errorf("no pauses (%d) or no kills (%d): the workload did not exercise them", w.pauses.Load(), w.kills.Load())
	}
}
