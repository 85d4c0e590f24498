package commands_test

// lease init: the table it creates, init again (idempotent or refused), and
// a corrupt TABLE header (exit 3 for every command, left alone).

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInit(t *testing.T) {
	t.Parallel()
	root := coreBareRoot(t)
	r := coreMust(t, 0, "", "init", "--root", root, "--shards", "4", "--target-shards", "2", "--now", "1000")
	if !strings.Contains(r.out, root) {
		t.Errorf("init output does not name the root: %s", r.out)
	}
	var hdr map[string]any
	data, err := os.ReadFile(filepath.Join(root, "TABLE"))
	if err != nil || json.Unmarshal(data, &hdr) != nil {
		t.Fatalf("TABLE: %q, %v", data, err)
	}
	if hdr["schema"] != "lease.table/v1" || hdr["work_shards"] != 4.0 || hdr["target_shards"] != 2.0 || hdr["created_at"] != 1000.0 {
		t.Errorf("TABLE = %s", data)
	}
	for _, p := range []string{"work/00/.lock", "work/03/.lock", "targets/01/.lock", "groups/01/.lock", "stage", "public", "lost+found"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "work/04")); err == nil {
		t.Errorf("work/04 exists in a table of 4 work shards")
	}
	before := coreSnapshot(t, root)
	coreMust(t, 0, "", "init", "--root", root)
	coreMust(t, 0, "", "init", "--root", root, "--shards", "4")
	r = coreMust(t, 2, "", "init", "--root", root, "--shards", "8")
	if !strings.Contains(r.errOut, "work_shards 4") {
		t.Errorf("shard conflict message: %s", r.errOut)
	}
	coreMust(t, 2, "", "init", "--root", root, "extra")
	coreSame(t, "init again", before, coreSnapshot(t, root))

	// A corrupt header is exit 3 for every command and left alone.
	os.WriteFile(filepath.Join(root, "TABLE"), []byte("{not json"), 0o644)
	before = coreSnapshot(t, root)
	coreMust(t, 3, "", "claim", "--root", root, "--owner", "w", string(coreID("x")))
	coreMust(t, 3, "", "status", "--root", root)
	coreSame(t, "corrupt TABLE", before, coreSnapshot(t, root))
}
