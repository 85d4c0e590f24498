package commands

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

var completeCommand = &cli.Command{
	Name:      "complete",
	Usage:     "finish held leases (fenced): leased -> committing -> done, optionally publishing a result",
	ArgsUsage: "[FILE...]",
	Description: "For each `ID TOKEN` line whose token is current and live, writes the record as `committing`\n" +
		"and then as `done`, each step durable. With --publish PATH (exactly one input line), PATH\n" +
		"must be a regular file directly inside ROOT/stage/ (a bare file name means ROOT/stage/NAME);\n" +
		"between committing and done it is moved to ROOT/public/NAME with a durable cross-directory\n" +
		"replace (public/ fsynced, then stage/), never over an existing name. A stale token publishes\n" +
		"nothing. A crash between the move and done is rolled forward by lease fsck --repair.",
	Flags: flags(commonFlags(), batchFlags(), []cli.Flag{
		&cli.StringFlag{Name: "publish", Usage: "move `PATH` (inside ROOT/stage/) to ROOT/public/ between committing and done", TakesFile: true},
	}),
	Action: runComplete,
}

func runComplete(c *cli.Context) error {
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	lines, err := readInput(c, c.Args().Slice())
	if err != nil {
		return err
	}
	items, err := parseItems(lines, true)
	if err != nil {
		return err
	}
	if !c.IsSet("publish") {
		st, err := e.open(false)
		if err != nil {
			return err
		}
		return e.report("complete", st.Complete(items, e.now), e.snapshot(st))
	}
	if len(items) != 1 {
		return usageErr("--publish takes exactly one ID TOKEN line, got %d", len(items))
	}
	name, err := stagedName(e.root(), c.String("publish"))
	if err != nil {
		return err
	}
	st, err := e.open(false)
	if err != nil {
		return err
	}
	r, err := st.CompletePublish(items[0], name, e.now)
	if errors.Is(err, commit.ErrStaged) {
		return usageErr("--publish: %v; nothing written", err)
	}
	return e.report("complete", []commit.Result{r}, e.snapshot(st))
}

// stagedName maps --publish PATH to the name of a file in ROOT/stage/.
func stagedName(root, p string) (string, error) {
	if p != "" && !strings.Contains(p, "/") {
		if err := leasefmt.CheckPublishName(p); err != nil {
			return "", usageErr("--publish: %v", err)
		}
		return p, nil // a bare name: ROOT/stage/NAME
	}
	abs := mustAbs(p)
	if filepath.Dir(abs) != filepath.Join(root, "stage") {
		return "", usageErr("--publish %s: not a file directly inside %s", leasefmt.Quote(p), filepath.Join(root, "stage"))
	}
	name := filepath.Base(abs)
	if err := leasefmt.CheckPublishName(name); err != nil {
		return "", usageErr("--publish: %v", err)
	}
	return name, nil
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	return a
}
