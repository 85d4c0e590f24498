package commands

// lease add --content: each item carries its input. The files are read
// and hashed first, all of them, so that a missing one or a line whose ID
// does not match leaves the table as it was (exit 2); then the contents
// are stored (commit.StoreInputs) and, once durable, their IDs queued.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/leasefmt"
)

// contentFile is one file named for lease add --content.
type contentFile struct {
	path string
	id   leasefmt.ID
}

func runAddContent(c *cli.Context) error {
	files, err := contentFiles(c)
	if err != nil {
		return err
	}
	byID := map[leasefmt.ID]string{}
	var contents []commit.Content
	var items []commit.Item
	for _, f := range files {
		if _, dup := byID[f.id]; dup {
			continue
		}
		byID[f.id] = f.path
		path := f.path
		contents = append(contents, commit.Content{ID: f.id, Name: path, Open: func() (io.ReadCloser, error) { return userfile.OpenReader(path) }})
		items = append(items, commit.Item{ID: f.id})
	}
	// Rank 0 stores and queues everything under mpirun: only it read the
	// files.
	spec := batchSpec{name: "add", kind: leasefmt.Work, spread: false,
		input: func(*cli.Context) ([]commit.Item, error) { return items, nil },
		run: func(e *env, st *commit.Store, mine []commit.Item) []commit.Result {
			if len(mine) == 0 {
				return nil
			}
			stored := st.StoreInputs(c.Context, contents)
			var queue []commit.Item
			var at []int
			res := make([]commit.Result, len(stored))
			for i, r := range stored {
				res[i] = r
				if r.Outcome == commit.OK {
					queue = append(queue, r.Item)
					at = append(at, i)
				}
			}
			for j, r := range st.Enqueue(c.Context, queue) {
				res[at[j]] = r
			}
			return res
		}}
	spec.idOnly = true
	spec.silent = func(r commit.Result) bool {
		return r.Outcome == commit.Queued || r.Outcome == commit.Done || r.Outcome == commit.Failed
	}
	spec.code = addCode
	return runBatch(c, spec)
}

// contentFiles reads the file arguments of --content (with -, the paths
// on stdin) and hashes every file, before anything is written.
func contentFiles(c *cli.Context) ([]contentFile, error) {
	args := c.Args().Slice()
	if len(args) == 0 {
		return nil, usageErr("--content takes FILE arguments, or - to read their paths from stdin")
	}
	var out []contentFile
	for i, a := range args {
		if a == "-" {
			if i != len(args)-1 || len(args) > 1 {
				return nil, usageErr("--content: give FILE arguments or -, not both")
			}
			named, err := readContentPaths(c.App.Reader, c.Bool("null"))
			if err != nil {
				return nil, err
			}
			out = named
			break
		}
		if a == "" {
			return nil, usageErr("--content: argument %d is empty: an empty name names no file", i+1)
		}
		out = append(out, contentFile{path: a})
	}
	if c.Bool("null") && (len(args) != 1 || args[0] != "-") {
		return nil, usageErr("--null is for the paths of --content -")
	}
	for i := range out {
		sum, err := contentSum(out[i].path)
		if err != nil {
			return nil, usageErr("--content %s: %v; nothing added", leasefmt.Quote(out[i].path), err)
		}
		if out[i].id != "" && out[i].id != sum {
			return nil, usageErr("--content %s: its content hashes to %s, not %s; nothing added", leasefmt.Quote(out[i].path), sum, out[i].id)
		}
		out[i].id = sum
	}
	return out, nil
}

// readContentPaths reads the paths of --content -: one per line, or
// NUL-terminated with null; a line `ID PATH` (lease id --with-name,
// sha256sum) names PATH and the ID its content must hash to.
func readContentPaths(r io.Reader, null bool) ([]contentFile, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	if null {
		sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
			if i := bytes.IndexByte(data, 0); i >= 0 {
				return i + 1, data[:i], nil
			}
			if atEOF && len(data) > 0 {
				return len(data), data, nil
			}
			return 0, nil, nil
		})
	}
	var out []contentFile
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if line == "" {
			continue
		}
		f := contentFile{path: line}
		if !null && len(line) > 65 && (line[64] == ' ' || line[64] == '\t') {
			if id, err := leasefmt.ParseID(line[:64]); err == nil {
				rest := line[65:]
				// sha256sum writes two spaces, or " *" for binary mode.
				if len(rest) > 0 && (rest[0] == ' ' || rest[0] == '*') {
					rest = rest[1:]
				}
				f = contentFile{path: rest, id: id}
			}
		}
		if f.path == "" {
			return nil, usageErr("stdin:%d: no path after the ID", n)
		}
		out = append(out, f)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, usageErr("stdin:%d: path longer than %d bytes", n+1, maxLine)
		}
		return nil, usageErr("stdin: %v", err)
	}
	return out, nil
}

// contentSum is the ID of the content of the regular file name (it may be
// a link to one: it is the user's file, outside the table), at most
// commit.MaxInput bytes.
func contentSum(name string) (leasefmt.ID, error) {
	f, fi, err := userfile.Open(name)
	if err != nil {
		return "", unwrapPath(err)
	}
	defer f.Close()
	if fi.Size() > commit.MaxInput {
		return "", fmt.Errorf("%d bytes, more than the %d an item's input may hold", fi.Size(), int64(commit.MaxInput))
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", unwrapPath(err)
	}
	return leasefmt.ID(hex.EncodeToString(h.Sum(nil))), nil
}
