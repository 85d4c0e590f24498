package hostile_test

// Cases 1, 4 and 6 of issue 38: staging directories belong to their
// claimer, publication changes no mode outside the table, and a result's
// subdirectories are published readable by the group.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/internal/hostile"
)

func init() {
	// plant makes the staging directory args[0] (mode 0777, so that its
	// victim can write in it) holding a link result -> args[1]: what a
	// member does before another member claims the item.
	hostile.Register("plant", func(args []string) int {
		if err := os.Mkdir(args[0], 0o777); err != nil {
			return fail(err)
		}
		if err := os.Chmod(args[0], 0o777); err != nil {
			return fail(err)
		}
		return fail(os.Symlink(args[1], filepath.Join(args[0], "result")))
	})
	// link makes the link args[0] -> args[1]: exit 0 when it was made.
	hostile.Register("link", func(args []string) int { return fail(os.Symlink(args[1], args[0])) })
}

// fail is the exit status of a step that ends with err.
func fail(err error) int {
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	return 0
}

// queued is a world with A's shared table, an item named name in its
// queue and a canary of A's, a private 0600 file.
func queued(t *testing.T, name string) (e *hostile.Env, root, id, canary string) {
	e = hostile.New(t)
	root = e.Table()
	canary = e.Canary(hostile.A, "private", 0o600)
	id = itemID(name)
	e.Must(0, hostile.A, id+"\n", "add", "--root", root)
	return e, root, id, canary
}

// itemID is the ID of the item named s.
func itemID(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// waitFile waits for path to exist (a CMD saying where it is), failing
// the test after a minute: a guard, not a timing.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Lstat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
	}
}

// TestStagePlantedBeforeClaim (case 1): B makes stage/ID.1/ before A
// claims the item, with result -> a private file of A's in it. A's lease
// work never reuses it: the harness's write lands in a fresh directory of
// A's own, and the private file is unchanged.
func TestStagePlantedBeforeClaim(t *testing.T) {
	t.Parallel()
	e, root, id, canary := queued(t, "planted-before")
	stage := filepath.Join(root, "stage", id+".1")
	if out, err := e.Step(context.Background(), hostile.B, "plant", stage, canary).CombinedOutput(); err != nil {
		t.Fatalf("planting as B: %v\n%s", err, out)
	}
	r := e.Must(0, hostile.A, "", "work", "--root", root, "--max-items", "1", "--",
		"sh", "-c", `echo "$LEASE_TOKEN" > "$LEASE_STAGE/result"`)
	e.CheckCanaries()
	if got, err := os.ReadFile(filepath.Join(root, "public", id, "result")); err != nil || string(got) != "1\n" {
		t.Errorf("public/%s/result: %q %v (want the result of token 1)\n%s", id, got, err, r)
	}
	// What B planted was moved aside, link and all, never followed.
	moved, _ := filepath.Glob(filepath.Join(root, "lost+found", "stage-"+id+".1.*", "result"))
	if len(moved) != 1 {
		t.Errorf("B's directory is not in lost+found/: %v", moved)
	} else if fi, err := os.Lstat(moved[0]); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("%s: %v %v, want B's link", moved[0], fi, err)
	}
}

// TestStagePlantedDuringCmd (case 1): while A's CMD runs, B tries to plant
// result -> a private file of A's in A's staging directory; the directory
// is A's alone (0700), so B cannot, and A's write stays in the table.
func TestStagePlantedDuringCmd(t *testing.T) {
	t.Parallel()
	e, root, id, canary := queued(t, "planted-during")
	cmd, out, stage, goOn := pausedWork(t, e, root)
	if fi, err := os.Stat(stage); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("the staging directory while CMD runs: %v, want the claimer's alone (0700)", modeOrErr(fi, err))
	}
	planted := e.Step(context.Background(), hostile.B, "link", filepath.Join(stage, "result"), canary).Run()
	if err := os.WriteFile(goOn, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("lease work: %v\n%s", err, out.String())
	}
	if planted == nil {
		t.Errorf("B planted a link in A's staging directory")
	}
	e.CheckCanaries()
	if got, err := os.ReadFile(filepath.Join(root, "public", id, "result")); err != nil || string(got) != "mine\n" {
		t.Errorf("public/%s/result: %q %v\n%s", id, got, err, out.String())
	}
}

// TestPublishedTreeReadableByGroup (case 6): a CMD under umask 077 stages
// a subdirectory; once published, every file and directory of the result
// is readable by the group, and the other member's lease fsck (and fsck
// --repair) find the table whole: exit 0.
func TestPublishedTreeReadableByGroup(t *testing.T) {
	t.Parallel()
	e, root, id, _ := queued(t, "umask-077")
	e.Must(0, hostile.A, "", "work", "--root", root, "--max-items", "1", "--", "sh", "-c",
		`umask 077 && mkdir -p "$LEASE_STAGE/sub/deeper" && echo r > "$LEASE_STAGE/sub/deeper/r" && echo top > "$LEASE_STAGE/top"`)
	pub := filepath.Join(root, "public", id)
	filepath.WalkDir(pub, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Error(err)
			return nil
		}
		fi, _ := d.Info()
		need := fs.FileMode(0o040)
		if d.IsDir() {
			need = 0o050
		}
		if fi.Mode().Perm()&need != need {
			t.Errorf("%s: mode %v, want the group's r%s", p, fi.Mode(), map[bool]string{true: "x", false: ""}[d.IsDir()])
		}
		return nil
	})
	for _, args := range [][]string{{"fsck", "--root", root}, {"fsck", "--root", root, "--repair"}} {
		if r := e.Run(hostile.B, "", args...); r.Code != 0 {
			t.Errorf("B's lease %s: %s", strings.Join(args, " "), r)
		}
	}
}

// TestPublishRefusesHardLink (case 4): A's CMD hard-links a private 0600
// file of A's into its stage; publication refuses it (the item is not
// done, the reason said) and the file keeps its mode.
func TestPublishRefusesHardLink(t *testing.T) {
	t.Parallel()
	e, root, id, canary := queued(t, "hard-link")
	r := e.Run(hostile.A, "", "work", "--root", root, "--max-items", "1", "--", "sh", "-c", `ln "$0" "$LEASE_STAGE/c"`, canary)
	// The staged link itself is A's to remove; then the canary is as it was.
	unlinkOthers(t, root, canary)
	e.CheckCanaries()
	if !strings.Contains(r.ErrOut, "2 links") {
		t.Errorf("lease work does not say why the result was refused: %s", r)
	}
	if _, err := os.Lstat(filepath.Join(root, "public", id)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("public/%s: %v, want nothing published", id, err)
	}
}

// unlinkOthers removes every name below root of the inode of file.
func unlinkOthers(t *testing.T, root, file string) {
	t.Helper()
	var want syscall.Stat_t
	if err := syscall.Stat(file, &want); err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		var st syscall.Stat_t
		if err == nil && d.Type().IsRegular() && syscall.Lstat(p, &st) == nil && st.Ino == want.Ino && st.Dev == want.Dev {
			os.Remove(p)
		}
		return nil
	})
}

// modeOrErr is what a stat found, for messages.
func modeOrErr(fi fs.FileInfo, err error) string {
	if err != nil {
		return err.Error()
	}
	return "mode " + fi.Mode().String()
}

// pausedWork starts A's lease work of one item whose CMD says its
// $LEASE_STAGE, waits for the file goOn, then writes "mine" to
// $LEASE_STAGE/result; it returns once CMD runs, with its staging
// directory.
func pausedWork(t *testing.T, e *hostile.Env, root string) (cmd *exec.Cmd, out *strings.Builder, stage, goOn string) {
	t.Helper()
	started := filepath.Join(e.Dir, "started")
	goOn = filepath.Join(e.Dir, "go")
	cmd = e.Command(hostile.A, "work", "--root", root, "--max-items", "1", "--", "sh", "-c",
		`echo "$LEASE_STAGE" > "$0.tmp" && mv "$0.tmp" "$0" && while [ ! -e "$1" ]; do sleep 0.01; done; echo mine > "$LEASE_STAGE/result"`,
		started, goOn)
	out = &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := os.Chmod(e.Dir, 0o777); err != nil { // A's CMD writes started there
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, started)
	data, _ := os.ReadFile(started)
	return cmd, out, strings.TrimSpace(string(data)), goOn
}
