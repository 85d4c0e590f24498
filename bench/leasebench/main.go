// Command leasebench is the lease command line for benchmarks: lease
// itself, with every table it opens going through a commit strategy of
// bench/strategy, so that the seed's algorithms are measured with the
// same engine, command line and process costs as lease, while the lease
// binary carries no benchmark mode.
//
//	leasebench [--strategy S] LEASE-ARGUMENTS...
//
// S is concurrent (the default: lease's own commit, its fsyncs only
// counted), sequential (seed F324), one-at-a-time (seed F323) or nosync
// (the floor: no fsync, one syncfs(2) at the end); --strategy may stand
// anywhere among the arguments before a "--", as lease's hidden flag of
// that name did. The seed's algorithms run with one writer whatever
// --writers or the configuration says (as under that flag): leasebench
// drops --writers and sets LEASE_WRITERS=1. With LEASE_BENCH_COUNTS=FILE the syncs that reached
// the filesystem are written to FILE as JSON ({"file_syncs": N,
// "directory_syncs": K, "syncfs": 0 or 1}): the engine's own statistics
// count the calls it made, which the strategies turn into more, fewer or
// none.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/leasetool/lease/bench/strategy"
	"github.com/leasetool/lease/commands"
	"github.com/leasetool/lease/commit/seam"
)

func main() { os.Exit(run(os.Args)) }

func run(args []string) int {
	kind, args, err := strategyOf(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "leasebench: usage: --strategy:", err)
		return 2
	}
	if kind.Writers() > 0 {
		args = withoutWriters(args)
		os.Setenv("LEASE_WRITERS", fmt.Sprint(kind.Writers()))
	}
	var (
		mu     sync.Mutex
		opened []*strategy.FS
	)
	restore := commands.SetWrapFS(func(f seam.FS) seam.FS {
		w := strategy.Wrap(kind, f)
		mu.Lock()
		opened = append(opened, w)
		mu.Unlock()
		return w
	})
	defer restore()
	code := commands.Run(args, os.Stdin, os.Stdout, os.Stderr)
	var total strategy.Counts
	for _, w := range opened {
		if err := w.Finish(); err != nil {
			fmt.Fprintln(os.Stderr, "leasebench: syncfs:", err)
			code = max(code, 4)
		}
		c := w.Counts()
		total.FileSyncs += c.FileSyncs
		total.DirectorySyncs += c.DirectorySyncs
		total.Syncfs += c.Syncfs
	}
	if file := os.Getenv("LEASE_BENCH_COUNTS"); file != "" {
		data, _ := json.Marshal(total)
		if err := os.WriteFile(file, append(data, '\n'), 0o666); err != nil {
			fmt.Fprintln(os.Stderr, "leasebench:", err)
			code = max(code, 4)
		}
	}
	return code
}

// strategyOf takes --strategy S (or --strategy=S) out of args.
func strategyOf(args []string) (strategy.Kind, []string, error) {
	kind := strategy.Concurrent
	out := args[:1:1]
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		name, ok := "", false
		switch {
		case a == "--strategy" && i+1 < len(args):
			name, ok = args[i+1], true
			i++
		case strings.HasPrefix(a, "--strategy="):
			name, ok = strings.TrimPrefix(a, "--strategy="), true
		case a == "--strategy":
			return 0, nil, fmt.Errorf("a strategy name must follow")
		}
		if !ok {
			out = append(out, a)
			continue
		}
		k, err := strategy.Parse(name)
		if err != nil {
			return 0, nil, err
		}
		kind = k
	}
	return kind, out, nil
}

// withoutWriters drops --writers N (and --writers=N) from args, before a
// "--".
func withoutWriters(args []string) []string {
	out := args[:1:1]
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			return append(out, args[i:]...)
		case a == "--writers" && i+1 < len(args):
			i++
		case strings.HasPrefix(a, "--writers="):
		default:
			out = append(out, a)
		}
	}
	return out
}
