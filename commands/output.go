package commands

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
)

// --output FILE (renew-batch): the lines stdout would carry go to FILE,
// which is replaced whole, by a temp file in its directory, fsynced and
// renamed over it, the directory fsynced after, so that a job killed at
// any moment leaves FILE either as it was or with every line (never half
// of one), and the file holds what was reported once the command says so.
// Under mpirun only rank 0 writes it: give a path on a filesystem rank 0's
// node sees.

// outputFlag is the --output flag of renew-batch.
var outputFlag = &cli.StringFlag{Name: "output", Aliases: []string{"o"}, TakesFile: true,
	Usage: "write the lines renewed to FILE instead of stdout, replacing it atomically (temp file + rename); with --watch after every round that changed the held set, and at the end"}

// checkOutput refuses --output where it cannot work: with --json (the
// document stays on stdout) and for a directory.
func checkOutput(c *cli.Context) error {
	path := c.String("output")
	if path == "" {
		if c.IsSet("output") {
			return usageErr("--output: empty file name")
		}
		return nil
	}
	if c.Bool("json") {
		return usageErr("--output writes ID TOKEN lines; it cannot be used with --json")
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return usageErr("--output %s: is a directory", path)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return usageErr("--output %s: no such directory %s", path, filepath.Dir(path))
	}
	return nil
}

// replaceFile replaces path with data durably and atomically.
func replaceFile(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	var nonce [6]byte
	rand.Read(nonce[:])
	tmp := filepath.Join(dir, "."+base+".tmp."+hex.EncodeToString(nonce[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// outputErr is the error of a failed --output write: an I/O error.
func outputErr(path string, err error) error {
	return cli.Exit(leasefmt.Bound(fmt.Sprintf("--output %s: %v", path, err)), exitcode.IO)
}

// bufferedOutput sends e's stdout into a buffer when --output is given;
// the returned function writes the buffer to the file (call it once the
// report is written) and returns its error, nil without --output.
func bufferedOutput(c *cli.Context, e *env) func() error {
	path := c.String("output")
	if path == "" || e == nil {
		return func() error { return nil }
	}
	var buf bytes.Buffer
	e.out = &buf
	return func() error {
		if err := replaceFile(path, buf.Bytes()); err != nil {
			return outputErr(path, err)
		}
		return nil
	}
}
