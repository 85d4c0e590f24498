package commands_test

// A command is its descriptor: registering one is all it takes for the
// command to be run, listed, documented, completed, gated under a
// launcher and to exit with its own usage status.

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/commands"
)

func TestNewCommandNeedsOnlyItsDescriptor(t *testing.T) {
	ran := 0
	probe := &cli.Command{
		Name:      "probe",
		Usage:     "a command that exists only in this test",
		ArgsUsage: "[ID...]",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "loud", Usage: "say more"}},
		Action:    func(*cli.Context) error { ran++; return nil },
	}
	man := commands.Manual{
		More:     "The paragraph of the probe.",
		Examples: []commands.Example{{Text: "Probe:", Code: "lease probe --loud"}},
	}
	defer commands.Register(&commands.Descriptor{Rank: 125, Command: probe, Manual: man, Launch: commands.Alone, UsageExit: 7})()

	var names []string
	for _, c := range commands.NewApp().Commands {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, " "); !strings.Contains(got, " run probe status ") {
		t.Errorf("NewApp lists %s: want probe between run (rank 120) and status (130)", got)
	}
	if code, _, errOut := launchRun("probe", "--loud"); code != 0 || ran != 1 {
		t.Errorf("lease probe --loud: exit %d, ran %d times: %s", code, ran, errOut)
	}
	if code, _, errOut := launchRun("probe", "--lound"); code != 7 || !strings.Contains(errOut, "did you mean --loud?") {
		t.Errorf("lease probe --lound: exit %d, %q; want its usage status 7 and the flag meant", code, errOut)
	}
	if code, _, errOut := launchRun("--root", t.TempDir(), "probe"); code != 7 || !strings.Contains(errOut, "lease probe takes no --root") {
		t.Errorf("lease --root DIR probe: exit %d, %q; want 7", code, errOut)
	}

	files := docFiles()
	page := string(files["man/man1/lease-probe.1"])
	for _, want := range []string{"The paragraph of the probe.", "refuses to run", `\fB\-\-loud\fR`, "lease probe \\-\\-loud"} {
		if !strings.Contains(page, want) {
			t.Errorf("man/man1/lease-probe.1 does not say %q:\n%s", want, page)
		}
	}
	if main := string(files["man/man1/lease.1"]); !strings.Contains(main, `\fBlease probe\fR`) || !strings.Contains(main, `lease\-probe`) {
		t.Errorf("lease(1) does not list lease probe")
	}
	for _, f := range []string{"completions/lease.bash", "completions/_lease", "completions/lease.fish"} {
		if !strings.Contains(string(files[f]), "probe") {
			t.Errorf("%s does not complete probe", f)
		}
	}

	asSrunTask(t, 1, 4)
	if code, _, errOut := launchRun("probe"); code != 7 || ran != 1 || !strings.Contains(errOut, "not as one of 4 tasks") {
		t.Errorf("lease probe as task 1 of 4: exit %d, ran %d times, %q; want it refused with 7", code, ran, errOut)
	}
}

// TestRegisterRefusesIncompleteDescriptors: a descriptor without a launch
// policy or a rank, or a second one for a name, stops the program.
func TestRegisterRefusesIncompleteDescriptors(t *testing.T) {
	for name, d := range map[string]*commands.Descriptor{
		"no launch policy": {Rank: 1, Command: &cli.Command{Name: "probe-a"}},
		"no rank":          {Command: &cli.Command{Name: "probe-b"}, Launch: commands.Once},
		"no command":       {Rank: 1, Launch: commands.Once},
		"a second run":     {Rank: 1, Command: &cli.Command{Name: "run"}, Launch: commands.Once},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("a descriptor with %s was registered", name)
				}
			}()
			commands.Register(d)
		}()
	}
}
