package commands_test

// lease complete --publish: staged results moved into public/, a retry with
// the same token, staging fenced per token, public names never replaced.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/leasefmt"
)

func TestCompletePublish(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("pub", 4)
	claim := func(now string, id leasefmt.ID) {
		coreMust(t, 0, "", "claim", "--root", root, "--owner", "w", "--now", now, "--ttl", "60", string(id))
	}
	stage := func(id leasefmt.ID, token int, name, data string) {
		dir := filepath.Join(root, "stage", fmt.Sprintf("%s.%d", id, token))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	claim("1000", ids[0])
	stage(ids[0], 1, "result-0.tar", "RESULT 0")
	r := coreMust(t, 0, string(ids[0])+" 1\n", "complete", "--root", root, "--now", "1010", "--publish", "result-0.tar")
	if r.out != string(ids[0])+" 1\n" {
		t.Errorf("publish: %s", r)
	}
	if data, err := os.ReadFile(filepath.Join(root, "public", "result-0.tar")); err != nil || string(data) != "RESULT 0" {
		t.Errorf("public/result-0.tar: %q, %v", data, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "stage", string(ids[0])+".1")); err == nil {
		t.Error("the emptied staging directory is still there after the publish")
	}
	if rec := coreRecord(t, root, ids[0]); rec.Status != leasefmt.Done || rec.Publish != "result-0.tar" {
		t.Errorf("record after publish: %+v", rec)
	}
	// Completing again with the token that completed it succeeds (a retry
	// after a lost reply), and changes nothing.
	before := coreSnapshot(t, root)
	r = coreMust(t, 0, string(ids[0])+" 1\n", "complete", "--root", root, "--now", "1020", "--publish", "result-0.tar")
	if r.out != string(ids[0])+" 1\n" {
		t.Errorf("publish retried: %s", r)
	}
	coreSame(t, "publish retried", before, coreSnapshot(t, root))
	// A path inside the holder's staging directory works as well as a bare
	// name; a file directly in ROOT/stage/ (not fenced) is refused.
	claim("1000", ids[3])
	stage(ids[3], 1, "result-3", "R3")
	os.WriteFile(filepath.Join(root, "stage", "loose"), []byte("R3"), 0o644)
	r = coreMust(t, 2, string(ids[3])+" 1\n", "complete", "--root", root, "--now", "1010", "--publish", filepath.Join(root, "stage", "loose"))
	if !strings.Contains(r.errOut, "fenced staging") {
		t.Errorf("a publish from stage/ itself: %s", r)
	}
	os.Remove(filepath.Join(root, "stage", "loose"))
	coreMust(t, 0, string(ids[3])+" 1\n", "complete", "--root", root, "--now", "1010", "--publish",
		filepath.Join(root, "stage", string(ids[3])+".1", "result-3"))

	// Staged bytes are fenced: an expired holder and the next one stage the
	// same name, each in its own directory; the stale publish is refused and
	// the current one publishes its own bytes, not the stale holder's.
	claim("1000", ids[1])
	stage(ids[1], 1, "result-1.tar", "STALE")
	claim("1070", ids[1]) // expired and claimed again: token 2
	stage(ids[1], 2, "result-1.tar", "CURRENT")
	before = coreSnapshot(t, root)
	r = coreMust(t, 1, string(ids[1])+" 1\n", "complete", "--root", root, "--now", "1080", "--publish", "result-1.tar")
	if r.out != "" || coreReasons(t, r.errOut)[ids[1]] != "stale-token" {
		t.Errorf("stale publish: %s", r)
	}
	coreSame(t, "stale publish", before, coreSnapshot(t, root))
	coreMust(t, 0, string(ids[1])+" 2\n", "complete", "--root", root, "--now", "1080", "--publish", "result-1.tar")
	if data, _ := os.ReadFile(filepath.Join(root, "public", "result-1.tar")); string(data) != "CURRENT" {
		t.Errorf("public/result-1.tar holds %q, want the current holder's bytes", data)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "stage", string(ids[1])+".1", "result-1.tar")); string(data) != "STALE" {
		t.Errorf("the stale holder's staged file changed: %q", data)
	}

	// An existing public name is never replaced.
	claim("1000", ids[2])
	stage(ids[2], 1, "same", "NEW")
	os.WriteFile(filepath.Join(root, "public", "same"), []byte("OLD"), 0o644)
	before = coreSnapshot(t, root)
	r = coreLease(t, string(ids[2])+" 1\n", "complete", "--root", root, "--now", "1010", "--publish", "same")
	if r.code == 0 || r.out != "" || !strings.Contains(r.errOut, "already exists") {
		t.Errorf("publish over an existing name: %s", r)
	}
	coreSame(t, "publish over an existing name", before, coreSnapshot(t, root))
	// A staged file that does not exist is named as missing, not as "not a
	// regular file".
	r = coreMust(t, 2, string(ids[2])+" 1\n", "complete", "--root", root, "--now", "1010", "--publish", "no-such-result")
	if !strings.Contains(r.errOut, "no such file") || strings.Contains(r.errOut, "not a regular file") {
		t.Errorf("publish of a missing file: %s", r)
	}

	// Usage errors: nothing written.
	for _, tc := range []struct {
		stdin string
		args  []string
	}{
		{string(ids[2]) + " 1\n", []string{"--publish", "/etc/passwd"}},
		{string(ids[2]) + " 1\n", []string{"--publish", filepath.Join(root, "public", "same")}},
		{string(ids[2]) + " 1\n", []string{"--publish", "../public/same"}},
		{string(ids[2]) + " 1\n", []string{"--publish", ".."}},
		{string(ids[2]) + " 1\n", []string{"--publish", "no-such-file"}},
		{string(ids[2]) + " 1\n" + string(ids[0]) + " 1\n", []string{"--publish", "same"}},
		{"", []string{"--publish", "same"}},
	} {
		r := coreLease(t, tc.stdin, append([]string{"complete", "--root", root, "--now", "1010"}, tc.args...)...)
		if r.code != 2 || r.out != "" {
			t.Errorf("complete %v: %s\nwant exit 2", tc.args, r)
		}
		coreSame(t, fmt.Sprint(tc.args), before, coreSnapshot(t, root))
	}
}
