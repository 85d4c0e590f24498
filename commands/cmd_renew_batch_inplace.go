package commands

// lease renew-batch --in-place FILE: the held set kept current in one
// step, as sed -i edits a file: the lines renewed replace FILE, durably,
// unless nothing could be renewed (a usage or I/O error: exit 2 or 4),
// when FILE stays as it was. It replaces
// `lease renew-batch < held > held.new && mv held.new held`, which never
// prunes held once a lease is lost (exit 1 stops the mv), and
// `... ; mv held.new held`, which empties held after an I/O error.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/exitcode"
	"github.com/leasetool/lease/leasefmt"
)

func renewInPlace(c *cli.Context, mode string) error {
	switch {
	case c.Bool("watch"):
		return usageErr("--in-place and --watch exclude each other: --watch prints the lines still held when it stops (lease renew-batch --watch held > held.final)")
	case c.Bool("json"):
		return usageErr("--in-place and --json exclude each other: the file takes ID TOKEN lines")
	case c.IsSet("output"):
		return usageErr("--in-place and --output exclude each other: --in-place replaces its FILE, --output another")
	case launch().Distributed():
		return usageErr("--in-place under mpirun: give --output held.new instead (rank 0 writes it)")
	case c.NArg() != 1 || c.Args().First() == "-":
		return usageErr("--in-place takes exactly one FILE (not stdin), got %d arguments", c.NArg())
	}
	file := c.Args().First()
	fi, err := os.Stat(file)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return usageErr("input file %s: %v", leasefmt.Quote(file), err)
	}
	if !fi.Mode().IsRegular() {
		return usageErr("--in-place %s: not a regular file", leasefmt.Quote(file))
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".lease-*")
	if err != nil {
		return cli.Exit(leasefmt.Bound(fmt.Sprintf("--in-place %s: %v", file, err)), exitcode.IO)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	saved := c.App.Writer
	c.App.Writer = tmp
	berr := runBatch(c, renewSpec(c, mode))
	c.App.Writer = saved
	code := exitOf(berr)
	if code == exitcode.Usage || code == exitcode.IO {
		tmp.Close()
		if code == exitcode.IO {
			fmt.Fprintln(c.App.ErrWriter, leasefmt.Bound(fmt.Sprintf("lease renew-batch: %s left as it was: nothing was reported renewed", file)))
		}
		return berr
	}
	err = tmp.Chmod(fi.Mode().Perm())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err == nil {
		err = syncDir(filepath.Dir(file))
	}
	if err != nil {
		return cli.Exit(leasefmt.Bound(fmt.Sprintf("--in-place %s: the leases were renewed, but the file could not be replaced: %v", file, err)), exitcode.IO)
	}
	return berr
}

// syncDir fsyncs directory dir.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
