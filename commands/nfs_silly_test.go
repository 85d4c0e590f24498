package commands_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNFSSillyRenameSkipped: the files an NFS client leaves of a file
// removed while open (.nfs and hex digits, leasefmt.IsNFSSillyRename) in
// every work shard, queue shard and tally directory change nothing that
// status, the summary, claim --next or fsck answer: the queue does not
// count them as foreign names, the summary counts what it counted before,
// status lists the same records, fsck calls each what it is (a notice,
// exit 0) and a repair leaves them where they are.
func TestNFSSillyRenameSkipped(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	ids := coreIDs("silly", 6)
	var in strings.Builder
	for _, id := range ids {
		in.WriteString(string(id) + "\n")
	}
	coreMust(t, 0, in.String(), "add", "--root", root)
	held := coreMust(t, 0, "", "claim", "--root", root, "--next", "2").out
	coreMust(t, 0, held, "complete", "--root", root)
	// What changes with the clock and the disk is left out.
	volatile := regexp.MustCompile(`"(remaining_s|now|duration_s)":[0-9.e+-]+|"inodes":\{[^}]*\}`)
	summary := func() string {
		return volatile.ReplaceAllString(coreMust(t, 0, "", "status", "--root", root, "--summary", "--json").out, "")
	}
	status := func() string {
		return volatile.ReplaceAllString(coreMust(t, 0, "", "status", "--root", root, "--json").out, "")
	}
	sumBefore, statusBefore := summary(), status()

	var planted []string
	n := 0
	dirs := map[string]int{}
	for _, top := range []string{"work", "queue", "tally"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			n++
			dirs[top]++
			f := filepath.Join(p, fmt.Sprintf(".nfs000000000123abcd%08x", n))
			planted = append(planted, f)
			return os.WriteFile(f, []byte(`{"schema":"lease.work/v1"}`), 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// work/ and its 16 shards; queue/ and a shard at least; tally/ and
	// the bucket of the two completed.
	if dirs["work"] != 17 || dirs["queue"] < 2 || dirs["tally"] < 2 {
		t.Fatalf("planted silly-rename files in %v directories, want work/ and its 16 shards, and queue and tally directories", dirs)
	}

	if got := summary(); got != sumBefore {
		t.Errorf("the summary changed with the silly-rename files:\n%s\nwas\n%s", got, sumBefore)
	}
	if got := status(); got != statusBefore {
		t.Errorf("status changed with the silly-rename files:\n%s\nwas\n%s", got, statusBefore)
	}
	r := coreMust(t, 0, "", "claim", "--root", root, "--next", "4", "-v")
	if lines := strings.Count(r.out, "\n"); lines != 4 {
		t.Errorf("claim --next 4 granted %d: %s", lines, r)
	}
	if !strings.Contains(r.errOut, " foreign=0 ") {
		t.Errorf("claim --next counted the silly-rename files as foreign names of the queue: %s", r.errOut)
	}
	for _, repair := range []bool{false, true, false} {
		args := []string{"fsck", "--root", root}
		if repair {
			args = append(args, "--repair")
		}
		r := coreMust(t, 0, "", args...)
		if c := strings.Count(r.out, "notice nfs-silly-rename "); c != len(planted) {
			t.Errorf("lease %s: %d nfs-silly-rename notices, want %d: %s", strings.Join(args, " "), c, len(planted), r)
		}
		if strings.Contains(r.out, "notice unknown") {
			t.Errorf("lease %s: a silly-rename file reported as unknown: %s", strings.Join(args, " "), r)
		}
	}
	for _, p := range planted {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after fsck --repair: %v", err)
		}
	}
}
