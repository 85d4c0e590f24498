package commands

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
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
func replaceFile(path string, data []byte) error {
	r, err := newReplacement(path)
	if err != nil {
		return err
	}
	if _, err := r.f.Write(data); err != nil {
		r.abort()
		return err
	}
	return r.commit()
}

// replacement is the temp file that replaces path once committed: a file
// of a unique name in path's directory.
type replacement struct {
	path, dir, tmp string
	f              *os.File
}

func newReplacement(path string) (*replacement, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	var nonce [6]byte
	rand.Read(nonce[:])
	tmp := filepath.Join(dir, "."+base+".tmp."+hex.EncodeToString(nonce[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return nil, err
	}
	return &replacement{path: path, dir: dir, tmp: tmp, f: f}, nil
}

// abort removes the temp file; path stays as it was.
func (r *replacement) abort() {
	r.f.Close()
	os.Remove(r.tmp)
}

// commit fsyncs the temp file, renames it over path and fsyncs the
// directory; on an error the temp file is removed.
func (r *replacement) commit() (err error) {
	defer func() {
		if err != nil {
			os.Remove(r.tmp)
		}
	}()
	err = r.f.Sync()
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err = os.Rename(r.tmp, r.path); err != nil {
		return err
	}
	d, err := os.Open(r.dir)
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

// bufferedOutput sends e's stdout into a temp file beside the --output
// FILE when it is given (so that a big batch's lines are not held in
// memory); the returned function replaces FILE with it (call it once the
// report is written) and returns its error, nil without --output.
func bufferedOutput(c *cli.Context, e *env) func() error {
	path := c.String("output")
	if path == "" || e == nil {
		return func() error { return nil }
	}
	r, err := newReplacement(path)
	if err != nil {
		e.out = io.Discard
		return func() error { return outputErr(path, err) }
	}
	e.out = r.f
	return func() error {
		if err := r.commit(); err != nil {
			return outputErr(path, err)
		}
		return nil
	}
}
