// Command lease-faultfs mounts a faultfs: a FUSE filesystem mirroring a
// backing directory that delays or fails fsync, directory fsync, rename,
// write, open and create per rule, and counts them. It is for testing the
// lease durability protocol from the shell.
//
// Usage:
//
//	lease-faultfs --backing DIR --mount DIR [--delay OP=DURATION,...]
//	    [--fail OP=ERRNO,...] [--rule SPEC]... [--broken-locks | --locks MODE]
//	    [--counts-file FILE] [--debug]
//
// It prints "mounted" on standard output once the mount serves requests.
// On SIGTERM or SIGINT it unmounts, writes the per-op call counts as a JSON
// object ({"create":1,"fsync":1,...}) to the counts file if one was given,
// and exits 0 (1 if the mount could only be detached lazily because it was
// still busy). SIGUSR1 writes the counts file without exiting; SIGUSR2
// resets the counts to zero. If the mount is unmounted from outside
// (umount), the counts file is written and the command exits 0.
//
// Ops are fsync, fsyncdir, rename, write, open, create. --delay and --fail
// add one rule per OP=VALUE pair; --rule SPEC adds one rule written as
// comma-separated key=value pairs: op, glob (path relative to the mount
// root, path.Match syntax), delay, errno, after (matching calls let through
// before the rule first fires), times (how often it fires; 0 = always), e.g.
// --rule 'op=fsyncdir,glob=work/*,errno=EIO,after=3,times=1'. All three
// flags may be repeated.
//
// Exit status: 0 success, 1 failure (mount, unmount, counts file), 2 usage.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/leasetool/lease/faultfs"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type ruleList []faultfs.Rule

type pairsFlag struct {
	rules *ruleList
	parse func(op faultfs.Op, v string) (faultfs.Rule, error)
}

func (p pairsFlag) String() string { return "" }

func (p pairsFlag) Set(s string) error {
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q is not OP=VALUE", kv)
		}
		op, err := faultfs.ParseOp(k)
		if err != nil {
			return err
		}
		r, err := p.parse(op, strings.TrimSpace(v))
		if err != nil {
			return err
		}
		if err := r.Validate(); err != nil {
			return err
		}
		*p.rules = append(*p.rules, r)
	}
	return nil
}

type ruleFlag struct{ rules *ruleList }

func (r ruleFlag) String() string { return "" }

func (r ruleFlag) Set(s string) error {
	rule, err := faultfs.ParseRule(s)
	if err != nil {
		return err
	}
	*r.rules = append(*r.rules, rule)
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("lease-faultfs", flag.ContinueOnError)
	fl.SetOutput(stderr)
	var rules ruleList
	backing := fl.String("backing", "", "directory to mirror (required)")
	mount := fl.String("mount", "", "mountpoint, an existing directory (required)")
	fl.Var(pairsFlag{&rules, func(op faultfs.Op, v string) (faultfs.Rule, error) {
		d, err := time.ParseDuration(v)
		return faultfs.Rule{Op: op, Delay: d}, err
	}}, "delay", "`OP=DURATION,...`: delay every call of OP (e.g. fsync=2ms,rename=500us)")
	fl.Var(pairsFlag{&rules, func(op faultfs.Op, v string) (faultfs.Rule, error) {
		e, err := faultfs.ParseErrno(v)
		return faultfs.Rule{Op: op, Errno: e}, err
	}}, "fail", "`OP=ERRNO,...`: fail every call of OP (e.g. fsyncdir=EINVAL)")
	fl.Var(ruleFlag{&rules}, "rule", "`SPEC`: op=OP,glob=GLOB,delay=DUR,errno=ERRNO,after=N,times=N (repeatable)")
	brokenLocks := fl.Bool("broken-locks", false, "locks never exclude: every lock request succeeds (same as --locks broken)")
	locks := fl.String("locks", "forward", "lock `MODE`: forward (locks exclude, also against the backing dir), kernel (kept by the kernel, this mount only), broken")
	countsFile := fl.String("counts-file", "", "write per-op call counts as JSON to `FILE` on exit and on SIGUSR1")
	debug := fl.Bool("debug", false, "log every FUSE request to stderr")
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: lease-faultfs --backing DIR --mount DIR [flags]\n\n"+
			"Mounts a FUSE mirror of DIR that delays or fails fsync, fsyncdir, rename, write, open, create.\n"+
			"Prints \"mounted\" when ready; SIGTERM/SIGINT unmount and write the counts file;\n"+
			"SIGUSR1 writes the counts file; SIGUSR2 resets the counts.\n\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "lease-faultfs: "+format+"\n", a...)
		return 2
	}
	if fl.NArg() > 0 {
		return usage("unexpected arguments: %q", fl.Args())
	}
	if *backing == "" || *mount == "" {
		return usage("--backing and --mount are required")
	}
	mode, err := faultfs.ParseLockMode(*locks)
	if err != nil {
		return usage("%v", err)
	}
	if *brokenLocks {
		if mode != faultfs.LocksForward && mode != faultfs.LocksBroken {
			return usage("--broken-locks conflicts with --locks %s", mode)
		}
		mode = faultfs.LocksBroken
	}
	if err := faultfs.Available(); err != nil {
		fmt.Fprintf(stderr, "lease-faultfs: %v\n", err)
		return 1
	}

	// Subscribe before mounting so that no signal is lost between
	// "mounted" and the wait below.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)

	fsys, err := faultfs.Mount(*mount, *backing, faultfs.Options{Rules: rules, Locks: mode, Debug: *debug})
	if err != nil {
		fmt.Fprintf(stderr, "lease-faultfs: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "mounted")

	gone := make(chan struct{})
	go func() {
		fsys.Wait()
		close(gone)
	}()

	status := 0
	writeCounts := func() {
		if *countsFile == "" {
			return
		}
		if err := writeJSON(*countsFile, fsys.Counts()); err != nil {
			fmt.Fprintf(stderr, "lease-faultfs: counts file: %v\n", err)
			status = 1
		}
	}
	for {
		select {
		case sig := <-sigs:
			switch sig {
			case syscall.SIGUSR1:
				writeCounts()
				continue
			case syscall.SIGUSR2:
				fsys.ResetCounts()
				continue
			}
			if err := fsys.Unmount(); err != nil {
				fmt.Fprintf(stderr, "lease-faultfs: %v\n", err)
				status = 1
			}
		case <-gone:
			fmt.Fprintf(stderr, "lease-faultfs: %s was unmounted from outside\n", *mount)
			fsys.Unmount()
		}
		writeCounts()
		fmt.Fprintf(stderr, "lease-faultfs: counts %v; injected failures %v\n", fsys.Counts(), fsys.Injected())
		return status
	}
}

// writeJSON replaces path with v as JSON, atomically.
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp.*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
