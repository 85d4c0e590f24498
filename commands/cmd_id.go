package commands

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/leasefmt"
)

var idCommand = &cli.Command{
	Name:      "id",
	Usage:     "make work IDs: the SHA-256 of each NAME (or of each line of stdin, or of each file's content)",
	ArgsUsage: "NAME...|-",
	Description: "Prints, for each NAME, the ID of the work item it names: the SHA-256 digest of its bytes as 64\n" +
		"lowercase hex characters, one per line, in order; the same as `printf %s NAME | sha256sum |\n" +
		"cut -c1-64`. With - (or no NAME) every line of stdin is a NAME (without its newline; empty lines\n" +
		"are skipped). With --content each NAME is a file and its ID is the SHA-256 of its content, as\n" +
		"sha256sum FILE prints it. It reads no table. An empty NAME is refused (exit 2): an unset shell\n" +
		"variable must not name an item.",
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "content", Usage: "NAME... are files: print the SHA-256 of each file's content"},
		&cli.BoolFlag{Name: "with-name", Usage: "print \"ID NAME\" lines (as sha256sum prints \"DIGEST  NAME\") instead of the ID alone"},
	},
	Action: runID,
}

// idManual is the hand-written part of lease-id(1).
var idManual = Manual{
	More: "The other commands take IDs only, not names: there is no --hash option on claim or run, since " +
		"lease id composes with every one of them (`lease claim $(lease id NAME)`, `lease id - < names | lease " +
		"claim -`) and other programs make the same IDs with sha256sum.",
	Exit: simpleExit,
	Examples: []Example{
		{"Claim the item named by a fuzzer input's name:", "lease claim \"$(lease id corpus/input-0042)\""},
		{"Make the candidate list of a campaign from the names of its inputs:", "ls corpus/ | lease id - > todo\nlease claim --first 1 - < todo >> held"},
		{"One item per input file, named by its content (the same file twice is one item):", "lease id --content corpus/* > todo"},
	},
	SeeAlso: []string{"lease-claim(1)", "sha256sum(1)"},
	Args:    "files",
}

func init() {
	register(&Descriptor{Rank: 180, Command: idCommand, Manual: idManual, Launch: Once})
}

// maxIDName bounds one NAME read from stdin, as other input lines are.
const maxIDName = maxLine

func runID(c *cli.Context) error {
	args := c.Args().Slice()
	w := bufio.NewWriter(c.App.Writer)
	defer w.Flush()
	emit := func(sum [sha256.Size]byte, name string) {
		id := hex.EncodeToString(sum[:])
		if c.Bool("with-name") {
			fmt.Fprintf(w, "%s %s\n", id, name)
		} else {
			fmt.Fprintln(w, id)
		}
	}
	if len(args) == 0 || len(args) == 1 && args[0] == "-" {
		if c.Bool("content") {
			return usageErr("--content takes FILE arguments, not stdin")
		}
		sc := bufio.NewScanner(c.App.Reader)
		sc.Buffer(make([]byte, 0, maxIDName), maxIDName)
		n := 0
		for sc.Scan() {
			n++
			if line := sc.Bytes(); len(line) > 0 {
				emit(sha256.Sum256(line), sc.Text())
			}
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return usageErr("stdin:%d: line longer than %d bytes", n+1, maxIDName)
			}
			return usageErr("stdin: %v", err)
		}
		return nil
	}
	for i, a := range args {
		if a == "" {
			return usageErr("argument %d is empty: an empty NAME names no item", i+1)
		}
	}
	if !c.Bool("content") {
		for _, a := range args {
			emit(sha256.Sum256([]byte(a)), a)
		}
		return nil
	}
	// Files: every one is read before anything is printed, so that a
	// missing one leaves stdout empty (exit 2) rather than a partial list.
	sums := make([][sha256.Size]byte, len(args))
	for i, a := range args {
		s, err := fileSum(a)
		if err != nil {
			return usageErr("--content %s: %v", leasefmt.Quote(a), err)
		}
		sums[i] = s
	}
	for i, a := range args {
		emit(sums[i], a)
	}
	return nil
}

// fileSum is the SHA-256 of the content of the regular file name.
func fileSum(name string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	f, _, err := userfile.Open(name)
	if err != nil {
		return sum, unwrapPath(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}
