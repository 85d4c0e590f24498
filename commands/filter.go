package commands

// The batch filter protocol (docs/design.md#cli): input lines of `ID TOKEN` (or lone
// IDs), from FILE arguments or stdin, blank lines and # comments skipped,
// validated whole before anything is written.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// maxLine bounds one input line.
const maxLine = 4096

// inputLine is one significant line of batch input.
type inputLine struct {
	src    string
	n      int
	fields []string
}

// readInput reads the lines of the FILE arguments, or of stdin when there
// are none or the argument is "-". Blank lines and # comments are skipped.
func readInput(c *cli.Context, args []string) ([]inputLine, error) {
	var out []inputLine
	err := eachInput(c, args, func(r io.Reader, src string) error {
		lines, err := scanLines(r, src)
		out = append(out, lines...)
		return err
	})
	return out, err
}

// eachInput calls read with each input in turn: the FILE arguments, or
// stdin when there are none or the argument is "-", and the name messages
// give it.
func eachInput(c *cli.Context, args []string, read func(r io.Reader, src string) error) error {
	if len(args) == 0 {
		args = []string{"-"}
	}
	for _, a := range args {
		if a == "-" {
			if err := read(c.App.Reader, "stdin"); err != nil {
				return err
			}
			continue
		}
		f, err := os.Open(a)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return usageErr("input file %s: %v", leasefmt.Quote(a), err)
		}
		err = read(f, a)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func scanLines(r io.Reader, src string) ([]inputLine, error) {
	var out []inputLine
	err := eachLine(r, src, func(n int, f [][]byte) error {
		fields := make([]string, len(f))
		for i, x := range f {
			fields[i] = string(x)
		}
		out = append(out, inputLine{src: src, n: n, fields: fields})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachLine calls fn with the number and the fields of every line of r
// (named src in messages) that has any, # comments cut off; a line longer
// than maxLine, a read error or fn's first error ends it. fn's fields are
// valid only during the call.
func eachLine(r io.Reader, src string, fn func(n int, f [][]byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, maxLine), maxLine) // a larger buffer would raise the bound
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if f := bytes.Fields(line); len(f) > 0 {
			if err := fn(n, f); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return usageErr("%s:%d: line longer than %d bytes", src, n+1, maxLine)
		}
		return usageErr("%s: %v", src, err)
	}
	return nil
}

// parseItems validates every line before anything is written: `ID TOKEN`
// lines (or lone IDs when withToken is false), no duplicate ID.
func parseItems(lines []inputLine, withToken bool) ([]commit.Item, error) {
	want := 2
	form := "ID TOKEN"
	if !withToken {
		want, form = 1, "ID"
	}
	items := make([]commit.Item, 0, len(lines))
	seen := make(map[leasefmt.ID]string, len(lines))
	for _, l := range lines {
		where := fmt.Sprintf("%s:%d", l.src, l.n)
		if len(l.fields) != want {
			return nil, usageErr("%s: malformed line %s: want %q", where, leasefmt.Quote(strings.Join(l.fields, " ")), form)
		}
		id, err := leasefmt.ParseID(l.fields[0])
		if err != nil {
			return nil, usageErr("%s: %v", where, err)
		}
		it := commit.Item{ID: id}
		if withToken {
			if it.Token, err = leasefmt.ParseToken(l.fields[1]); err != nil {
				return nil, usageErr("%s: %s: %v", where, id, err)
			}
		}
		if prev, dup := seen[id]; dup {
			return nil, usageErr("%s: duplicate id %s (first at %s)", where, id, prev)
		}
		seen[id] = where
		items = append(items, it)
	}
	return items, nil
}

// tokenLines reads and validates the `ID TOKEN` lines of the FILE
// arguments or stdin.
func tokenLines(c *cli.Context) ([]commit.Item, error) {
	lines, err := readInput(c, c.Args().Slice())
	if err != nil {
		return nil, err
	}
	return parseItems(lines, true)
}

// idArgs reads claim-style input: IDs as arguments, or one per line from
// stdin when the only argument is "-" or there is none.
func idArgs(c *cli.Context) ([]commit.Item, error) {
	args := c.Args().Slice()
	if len(args) == 0 || len(args) == 1 && args[0] == "-" {
		lines, err := readInput(c, []string{"-"})
		if err != nil {
			return nil, err
		}
		return parseItems(lines, false)
	}
	lines := make([]inputLine, len(args))
	for i, a := range args {
		lines[i] = inputLine{src: "argument", n: i + 1, fields: []string{a}}
		if a == "" || strings.ContainsAny(a, " \t\n") {
			lines[i].fields = []string{a, "?"} // refused as malformed
		}
	}
	return parseItems(lines, false)
}
