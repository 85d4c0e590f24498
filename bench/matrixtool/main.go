// Command matrixtool is the timing helper of bench/matrix: it runs whole
// `lease` processes and prints their wall time, CPU time and peak memory.
//
//	matrixtool time IN OUT -- CMD ARG...   run CMD once (stdin IN, stdout OUT);
//	                                       print "wall_ms cpu_ms maxrss_kb"
//	matrixtool each ARGS -- CMD ARG...     run CMD once per line of ARGS, the
//	                                       line's fields appended as arguments
//	                                       (stdin /dev/null, stdout discarded);
//	                                       print "wall_ms cpu_ms maxrss_kb" per run
//
// Wall time is from just before fork to just after wait (process start, Go
// runtime start, reading input and exit included, as a user pays); CPU is
// user + system time of the child; maxrss_kb is getrusage's ru_maxrss of the
// child (peak resident set, KiB). A run that exits non-zero is an error:
// matrixtool prints its stderr and exits 1.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

func main() {
	var err error
	switch {
	case len(os.Args) >= 6 && os.Args[1] == "time" && os.Args[4] == "--":
		var w, c float64
		var m int64
		if w, c, m, err = run(os.Args[2], os.Args[3], os.Args[5:]); err == nil {
			fmt.Printf("%.3f %.3f %d\n", w, c, m)
		}
	case len(os.Args) >= 5 && os.Args[1] == "each" && os.Args[3] == "--":
		err = each(os.Args[2], os.Args[4:])
	default:
		fmt.Fprintln(os.Stderr, "usage: matrixtool time IN OUT -- CMD ARG... | each ARGS -- CMD ARG...")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrixtool:", err)
		os.Exit(1)
	}
}

func each(argsFile string, cmdline []string) error {
	f, err := os.Open(argsFile)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		args := append(append([]string(nil), cmdline...), fields...)
		w, c, m, err := run(os.DevNull, os.DevNull, args)
		if err != nil {
			return err
		}
		fmt.Printf("%.3f %.3f %d\n", w, c, m)
	}
	return sc.Err()
}

func run(inPath, outPath string, args []string) (wallMs, cpuMs float64, maxrss int64, err error) {
	in, err := os.Open(inPath)
	if err != nil {
		return 0, 0, 0, err
	}
	defer in.Close()
	out, err := os.Create(outPath)
	if err != nil {
		return 0, 0, 0, err
	}
	defer out.Close()
	var stderr strings.Builder
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, io.Writer(&stderr)
	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return float64(elapsed.Microseconds()) / 1000, float64(cpu.Microseconds()) / 1000, ru.Maxrss, nil
}
