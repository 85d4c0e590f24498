package commands_test

// The completions offer the values of flags that take one of a few words,
// and, for claim and run, only the IDs a claim can take.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// complete returns the words shell offers for line, with the completions
// of dir loaded, in the environment of h.
func complete(t *testing.T, shell, dir string, h *holdTable, line string) string {
	t.Helper()
	var cmd *exec.Cmd
	switch shell {
	case "bash":
		script := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
_lease; printf '%s\n' "${COMPREPLY[@]}"`
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		cmd = exec.Command("bash", append([]string{"--norc", "--noprofile", "-c", script, "bash", filepath.Join(dir, "completions", "lease.bash")}, words...)...)
	case "fish":
		cmd = exec.Command("fish", "--no-config", "-c", `source $argv[1]; complete -C $argv[2] | string replace -r '\t.*' ''; true`, filepath.Join(dir, "completions", "lease.fish"), line)
	case "zsh":
		script := filepath.Join(h.dir, "capture.zsh")
		os.WriteFile(script, []byte(zshCapture), 0o644)
		cmd = exec.Command("zsh", "-f", script, filepath.Join(dir, "completions"), filepath.Join(h.dir, "zsh.out"), line)
	}
	cmd.Env, cmd.Dir = h.env(), h.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: completing %q: %v\n%s", shell, line, err, out)
	}
	return string(out)
}

func TestCompletionValuesAndFreeIDs(t *testing.T) {
	t.Parallel() // processes only: no in-process lease, no environment, no knob
	dir := docWrite(t)
	h := newHoldTable(t)
	held := holdID("complete-held")
	h.must(0, "", "claim", string(held))
	free := holdID("complete-free")
	h.must(0, h.must(0, "", "claim", string(free)).out, "release")
	done := holdID("complete-done")
	h.must(0, h.must(0, "", "claim", string(done)).out, "complete")
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			docRequire(t, shell)
			for _, c := range []struct {
				line        string
				want, never []string
			}{
				{"lease renew-batch --progress ", []string{"auto", "always", "never"}, nil},
				{"lease status --sort ", []string{"id", "expires", "owner", "status"}, nil},
				{"lease status -o ", []string{"wide", "id-token", "json"}, nil},
				{"lease init --shared ", []string{"group", "all"}, nil},
				// claim and run: what a claim can take, not what is held or done.
				{"lease claim ", []string{string(free)}, []string{string(held), string(done)}},
				{"lease run ", []string{string(free)}, []string{string(held), string(done)}},
				// revoke and status: every record.
				{"lease revoke ", []string{string(held), string(free), string(done)}, nil},
			} {
				out := complete(t, shell, dir, h, c.line)
				for _, w := range c.want {
					if !docOffers(out, w) {
						t.Errorf("completing %q does not offer %q:\n%s", c.line, w, out)
					}
				}
				for _, w := range c.never {
					if docOffers(out, w) {
						t.Errorf("completing %q offers %q:\n%s", c.line, w, out)
					}
				}
			}
		})
	}
}
